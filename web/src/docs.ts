// /docs: the OpenAPI document rendered by Redoc (its standalone bundle,
// shipped in the binary: nothing is loaded from elsewhere). Before it is
// rendered the document is given an order and an introduction: sandhold's
// own routes first, AIO Sandbox's compatible routes second (x-tagGroups),
// and an authentication section that says how keys, tickets and the
// console's cookie work. Field descriptions are the document's own.

// AIO Sandbox's tags (its OpenAPI 1.9.4), in its order.
const aioTags = ['sandbox', 'shell', 'bash', 'file', 'file-watch', 'jupyter', 'nodejs', 'code', 'browser', 'mcp', 'util', 'skills', 'proxy', 'display', 'auth'];
// sandhold's own tags, in the order a reader needs them.
const nativeOrder = ['sandboxes', 'exec', 'templates', 'files', 'preview', 'tools', 'approvals', 'keys', 'audit', 'policy', 'control', 'monitoring', 'console', 'system'];

const nativeAbout: Record<string, string> = {
  sandboxes: 'Create, list, pause, resume and delete sandboxes.',
  exec: 'Run commands in a sandbox: one-shot, streamed, in the background.',
  templates: 'Root file systems sandboxes are made from.',
  files: 'Artifacts: large files in and out of a sandbox.',
  preview: 'The sandbox\'s own web servers, on the sandbox-content origin.',
  tools: 'Every action is a tool: list them, call one, define custom tools.',
  approvals: 'Calls waiting for an operator.',
  keys: 'API keys (admin).',
  audit: 'The hash-chained audit log.',
  policy: 'The risk policy in force.',
  control: 'HALT and unhalt.',
  monitoring: 'Live figures and the security posture.',
  console: 'The web console\'s sign-in.',
  system: 'Health and metrics.',
};

const authentication = `
# Authentication

Every route but \`/healthz\`, \`/docs\` and \`/openapi.json\` needs a key. A key is \`shk_\` and 43 characters; the
server stores only its SHA-256. Send it as one of:

- \`Authorization: Bearer shk_…\`
- \`X-API-Key: shk_…\`
- \`X-AIO-API-Key: shk_…\` (AIO Sandbox's header)

A key in the query string is refused (it would leak into logs). **Roles**: \`admin\` (everything), \`agent\` (its own
sandboxes, tools within the policy), \`viewer\` (read-only observation).

**WebSockets and browsers** use one-time **tickets**: \`POST /v1/tickets {"scope": "terminal"}\` answers a ticket valid
for 30 s and one use, of the scope it was minted for (terminal, vnc, cdp, preview, console). The web console exchanges
a key for an HttpOnly session cookie (\`POST /console/session\`); a cookie request that changes anything sends the
session's \`X-CSRF-Token\`. The cookie never opens a relay of sandbox content.

Ten failed attempts in 60 s from one address answer 429 with \`Retry-After\`.

# Two families of routes

**sandhold** routes (\`/v1/sandboxes\`, \`/v1/templates\`, \`/v1/audit\`, …) use real HTTP status codes and put
\`{"code", "request_id"}\` in \`data\` on errors. **AIO Sandbox–compatible** routes keep AIO's shapes: at \`/v1/…\` they
act on the caller's default sandbox, at \`/sandboxes/{id}/v1/…\` on that sandbox, so an AIO SDK works with
\`base_url = https://host/sandboxes/{id}\`. Every response is the envelope \`{success, message, data, hint}\`.

<!-- ReDoc-Inject: <security-definitions> -->
`;

async function load() {
  const status = document.getElementById('docs-status');
  let doc: any;
  try {
    const r = await fetch('/openapi.json', { credentials: 'omit' });
    doc = await r.json();
  } catch (e: any) {
    if (status) status.textContent = `Could not load /openapi.json: ${String(e?.message ?? e)}`;
    return;
  }
  const used = new Set<string>();
  for (const item of Object.values<any>(doc.paths ?? {})) {
    for (const op of Object.values<any>(item)) if (op && Array.isArray(op.tags)) for (const t of op.tags) used.add(t);
  }
  const aio = aioTags.filter((t) => used.has(t));
  const native = [...nativeOrder.filter((t) => used.has(t)), ...[...used].filter((t) => !aioTags.includes(t) && !nativeOrder.includes(t)).sort()];
  doc.tags = [...native.map((name) => ({ name, description: nativeAbout[name] ?? '' })),
    ...aio.map((name) => ({ name, description: `AIO Sandbox's ${name} routes (OpenAPI 1.9.4 shapes).` }))];
  doc['x-tagGroups'] = [{ name: 'sandhold', tags: native }, { name: 'AIO Sandbox–compatible', tags: aio }];
  doc.info = { ...doc.info, description: `${doc.info?.description ?? ''}\n${authentication}` };
  const schemes = doc.components?.securitySchemes ?? {};
  if (schemes.apiKey && !schemes.aioApiKey) {
    schemes.aioApiKey = { type: 'apiKey', in: 'header', name: 'X-AIO-API-Key', description: 'AIO Sandbox\'s header; the same key' };
  }
  const Redoc = (window as any).Redoc;
  const el = document.getElementById('redoc')!;
  el.replaceChildren();
  Redoc.init(doc, {
    // No fonts or anything else from outside: the page's CSP allows only this origin.
    theme: { typography: { fontFamily: 'system-ui, sans-serif', headings: { fontFamily: 'system-ui, sans-serif' }, code: { fontFamily: 'ui-monospace, monospace' } } },
    hideDownloadButton: false,
    expandResponses: '200,201',
    jsonSampleExpandLevel: 2,
    sortTagsAlphabetically: false,
    pathInMiddlePanel: true,
  }, el, () => document.body.setAttribute('data-ready', '1'));
}

// The standalone bundle is a classic deferred script: it has run before
// this module, which runs after the document is parsed too.
void load();
