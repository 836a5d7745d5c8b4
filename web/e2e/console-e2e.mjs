// Drives the console in a real browser (the distribution's Chromium,
// through playwright-core). Run by internal/console's TestConsoleInBrowser:
//   BASE_URL=http://127.0.0.1:port ADMIN_KEY=shk_… CHROMIUM=/usr/bin/chromium OUT_DIR=dir node console-e2e.mjs
// Prints "ok: <step>" per step and "PASS" at the end; screenshots of each
// page go to OUT_DIR.
import { chromium } from 'playwright-core';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const base = process.env.BASE_URL;
const key = process.env.ADMIN_KEY;
const out = process.env.OUT_DIR;
if (!base || !key || !out) throw new Error('BASE_URL, ADMIN_KEY and OUT_DIR are required');
const timeout = 30_000;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});
const ok = (s) => console.log('ok: ' + s);
// fullPage unless asked not to (the API reference is thousands of pixels tall)
const shot = async (page, name, fullPage = true) => page.screenshot({ path: join(out, name + '.png'), fullPage });

// Every request must go to the server itself: no CDN, no third party.
const foreign = [];
function watch(page) {
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(base) && !u.startsWith(base.replace('http', 'ws')) && !u.startsWith('data:') && !u.startsWith('blob:')) foreign.push(u);
  });
  page.on('pageerror', (e) => console.log('page error: ' + e.message));
}

async function signIn(page) {
  await page.goto(base + '/');
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Sandboxes' }).waitFor({ timeout });
}

// inView waits for the element to carry text matching re and to be inside
// the viewport (an error no one has to scroll to).
async function inView(page, sel, re) {
  const el = page.locator(sel);
  await el.filter({ hasText: re }).waitFor();
  const box = await el.boundingBox();
  const vp = page.viewportSize();
  if (!box || box.y < 0 || box.y + box.height > vp.height || box.x + box.width > vp.width) throw new Error(`${sel} is out of view: ${JSON.stringify(box)}`);
}

// sessionFetch calls the API with the page's session (and its CSRF token).
async function sessionFetch(page, path, body, method = 'POST') {
  const r = await page.evaluate(async ([p, b, m]) => {
    const s = (await (await fetch('/console/session')).json()).data;
    const res = await fetch(p, { method: m, headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': s.csrf_token }, body: b === null ? undefined : JSON.stringify(b) });
    return { status: res.status, body: await res.text() };
  }, [path, body ?? null, method]);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.body}`);
  return JSON.parse(r.body).data;
}

async function status(page) {
  return (await page.locator('#status').textContent()) ?? '';
}

try {
  // ------------------------------------------------------------ desktop
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  watch(page);

  await page.goto(base + '/');
  await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  await shot(page, '01-signin');
  await signIn(page);
  const cookies = await ctx.cookies();
  const sess = cookies.find((c) => c.name.includes('sandhold_session'));
  if (!sess || !sess.httpOnly || sess.sameSite !== 'Strict') throw new Error('session cookie missing or not HttpOnly+Strict: ' + JSON.stringify(cookies));
  const stored = await page.evaluate(() => JSON.stringify({ c: document.cookie, l: { ...localStorage }, s: { ...sessionStorage } }));
  if (stored.includes(key) || stored.includes('sandhold_session')) throw new Error('the key or session is readable by script: ' + stored);
  ok('sign in (HttpOnly SameSite=Strict cookie, key not in the page)');

  // create a sandbox with limits, in the drawer; errors show at the field,
  // in view, from the browser's own checks and from the server's
  const name = 'e2e-' + Date.now().toString(36);
  await page.getByRole('button', { name: 'New sandbox' }).click();
  const drawer = page.getByRole('dialog', { name: 'New sandbox' });
  await drawer.waitFor();
  await drawer.getByLabel('Name', { exact: true }).fill(name);
  await drawer.getByLabel('Memory', { exact: true }).fill('lots');
  await drawer.getByRole('button', { name: 'Create', exact: true }).click();
  await inView(page, '#c-memory-err', /a size like/);
  await drawer.getByLabel('Memory', { exact: true }).fill('64GiB');
  await drawer.getByRole('button', { name: 'Create', exact: true }).click();
  await inView(page, '#c-memory-err', /SANDBOX_MAX_MEMORY/);
  if ((await page.locator('#c-memory').getAttribute('aria-invalid')) !== 'true') throw new Error('the memory field is not marked invalid');
  await shot(page, '02a-create-error');
  ok('create: a bad size and a size over the server maximum are shown at the field, in view');
  await drawer.getByLabel('Memory', { exact: true }).fill('256MiB');
  await drawer.getByLabel('CPUs').fill('1');
  await drawer.getByLabel('Processes').fill('32');
  await drawer.getByLabel('Time to live').fill('2h');
  await drawer.getByRole('button', { name: 'Create', exact: true }).click();
  await drawer.waitFor({ state: 'detached' });
  const row = page.locator('tr', { hasText: name });
  await row.waitFor();
  const sbID = await row.getAttribute('data-id');
  await page.waitForFunction((id) => {
    const r = document.querySelector(`tr[data-id="${id}"]`);
    // CPU as a share of its limit, memory and the workspace's disk use.
    return r && /\d+ %/.test(r.textContent ?? '') && /KiB|MiB/.test(r.textContent ?? '');
  }, sbID);
  const cells = await row.locator('td, th').allTextContents();
  if (!cells.includes('admin') || !cells.includes('host') || !cells.includes('running') || !cells.some((c) => /^in (2 h|1\d\d min)$/.test(c)) || !cells.includes(sbID.slice(0, 8))) {
    throw new Error('row lacks owner name, template, state, expiry or id prefix: ' + JSON.stringify(cells));
  }
  if (!/Sandboxes\s*\d+/.test(await page.locator('.capacity').textContent())) throw new Error('no capacity header');
  ok('create sandbox ' + sbID + ' in the drawer; the row has owner name, template, state, expiry, live figures');

  // CPU is a share of the sandbox's own limit: a busy loop in a 1-CPU
  // sandbox reads at most ~100 %, never the 139 % of one core's count.
  await sessionFetch(page, `/v1/sandboxes/${encodeURIComponent(sbID)}/exec`, { command: 'timeout 20 sh -c "while :; do :; done"', background: true });
  const cpuOf = async () => Number((/(\d+) %/.exec(await row.locator('td').nth(8).textContent()) ?? [])[1] ?? -1);
  await page.waitForFunction((id) => {
    const m = /(\d+) %/.exec(document.querySelector(`tr[data-id="${id}"] td:nth-of-type(9)`)?.textContent ?? '');
    return m && Number(m[1]) >= 20;
  }, sbID, { timeout: 60_000 });
  const readings = [];
  for (let i = 0; i < 4; i++) {
    const n = await row.getAttribute('data-sampled');
    await page.waitForFunction(([id, k]) => document.querySelector(`tr[data-id="${id}"]`)?.getAttribute('data-sampled') !== k, [sbID, n]);
    readings.push(await cpuOf());
  }
  if (readings.some((r) => r > 115)) throw new Error('CPU above the sandbox\'s limit: ' + readings.join(', '));
  await shot(page, '02-sandboxes');
  ok('CPU as a share of a 1-CPU limit under a busy loop: ' + readings.join(' %, ') + ' %');

  // fleet: filter, sort, state-matched actions, bulk delete
  for (const n of ['bulk-a', 'bulk-b']) await sessionFetch(page, '/v1/sandboxes', { name: n + '-' + name });
  await page.getByRole('button', { name: 'Delete selected' }).waitFor();
  await page.goto(base + '/#/templates');
  await page.goto(base + '/#/sandboxes');
  await page.locator('tr', { hasText: 'bulk-b-' + name }).waitFor();
  await page.getByLabel('Filter sandboxes').fill('bulk-');
  await page.waitForFunction(() => [...document.querySelectorAll('table.fleet tbody tr')].every((r) => r.textContent.includes('bulk-')));
  await page.getByRole('button', { name: /^Name/ }).click();
  const names = await page.locator('table.fleet tbody th').allTextContents();
  if (names.join() !== ['bulk-a-' + name, 'bulk-b-' + name].join()) throw new Error('filter+sort by name gave ' + names.join());
  await page.getByLabel('Select every sandbox shown').check();
  await shot(page, '02b-fleet-selected');
  page.once('dialog', (d) => d.accept());
  await page.getByRole('button', { name: 'Delete selected (2)' }).click();
  await page.waitForFunction(() => /Deleted 2 sandboxes/.test(document.getElementById('status')?.textContent ?? ''));
  await page.getByLabel('Filter sandboxes').fill('');
  if (await page.locator('tr', { hasText: 'bulk-' }).count()) throw new Error('bulk delete left rows');
  await row.getByRole('button', { name: 'Pause' }).click();
  await page.locator(`tr[data-id="${sbID}"][data-state="paused"]`).waitFor();
  if (await row.getByRole('button', { name: 'Pause' }).count() || await row.getByRole('link', { name: 'Terminal' }).count()) throw new Error('a paused sandbox offers Pause or Terminal');
  await shot(page, '02c-paused');
  await row.getByRole('button', { name: 'Resume' }).click();
  await page.locator(`tr[data-id="${sbID}"][data-state="running"]`).waitFor();
  ok('fleet: filter, sort by name, select all, bulk delete; a paused sandbox offers Resume, not Pause');

  // terminal
  await row.getByRole('link', { name: 'Terminal' }).click();
  await page.getByText('connected', { exact: true }).waitFor();
  await page.locator('.xterm-helper-textarea').focus();
  await page.keyboard.type('echo console-$((6*7))\n');
  await page.waitForFunction(() => {
    const t = window.sandholdTerm;
    if (!t) return false;
    const b = t.buffer.active;
    for (let i = 0; i < b.length; i++) if ((b.getLine(i)?.translateToString(true) ?? '').trim() === 'console-42') return true;
    return false;
  });
  await shot(page, '03-terminal');
  ok('terminal: typed a command and read its output');

  // reconnect keeps the session (cwd survives)
  await page.keyboard.type('cd /tmp && echo moved\n');
  await page.getByRole('button', { name: 'Reconnect' }).click();
  await page.getByText('connected', { exact: true }).waitFor();
  await page.locator('.xterm-helper-textarea').focus();
  await page.keyboard.type('echo at-$(pwd)\n');
  await page.waitForFunction(() => {
    const b = window.sandholdTerm.buffer.active;
    for (let i = 0; i < b.length; i++) if ((b.getLine(i)?.translateToString(true) ?? '').trim() === 'at-/tmp') return true;
    return false;
  });
  ok('terminal: reconnect resumes the session');

  // files: upload with progress, listed, view, download link
  await page.goto(`${base}/#/sandboxes/${encodeURIComponent(sbID)}/files?path=/workspace`);
  await page.getByRole('heading', { level: 1 }).filter({ hasText: 'Files' }).waitFor();
  const local = join(out, 'hello-e2e.txt');
  writeFileSync(local, 'hello from the browser\n');
  await page.locator('#upload-file').setInputFiles(local);
  await page.getByRole('button', { name: 'Upload', exact: true }).click();
  await page.locator('tr', { hasText: 'hello-e2e.txt' }).waitFor();
  if ((await page.locator('#upload-progress').getAttribute('value')) !== '100' && (await page.locator('#upload-progress').evaluate((p) => p.value)) !== 100) throw new Error('progress did not reach 100');
  await page.locator('tr', { hasText: 'hello-e2e.txt' }).getByRole('button', { name: 'View' }).click();
  await page.locator('pre.fileview', { hasText: 'hello from the browser' }).waitFor();
  const href = await page.locator('tr', { hasText: 'hello-e2e.txt' }).getByRole('link', { name: 'Download' }).getAttribute('href');
  const dl = await page.evaluate(async (u) => (await fetch(u)).text(), href);
  if (dl !== 'hello from the browser\n') throw new Error('download gave ' + JSON.stringify(dl));
  await shot(page, '04-files');
  ok('files: upload, list, view, download');

  // admin pages; a command with an ESC sequence and a bidi override is
  // shown escaped in the audit log, as audit.Visible renders it
  const hostile = await page.evaluate(async (id) => {
    const s = (await (await fetch('/console/session')).json()).data;
    const r = await fetch(`/v1/sandboxes/${encodeURIComponent(id)}/exec`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': s.csrf_token },
      body: JSON.stringify({ command: "echo '\u001b[2J\u202eevil' 'tab\there' 'typed\\there'" }),
    });
    return r.status;
  }, sbID);
  if (hostile !== 200) throw new Error('exec through the session: ' + hostile);
  await page.getByRole('link', { name: 'Audit' }).click();
  await page.locator('#audit-verify', { hasText: 'Chain verified' }).waitFor();
  await page.locator('table.audit tbody tr').first().waitFor();
  await page.getByLabel('Action (prefix or category)').fill('exec');
  await page.getByRole('button', { name: 'Filter' }).click();
  const cell = page.locator('td.target', { hasText: '\\x1b[2J\\u202eevil' }).first();
  await cell.waitFor();
  const raw = await cell.evaluate((td) => td.textContent);
  if (/[\u001b\u202e]/.test(raw)) throw new Error('raw control characters rendered: ' + JSON.stringify(raw));
  // a tab reads \t, a typed backslash-t \\t (issue 29: they read alike)
  if (!raw.includes("'tab\\there'") || !raw.includes("'typed\\\\there'")) throw new Error('tab and backslash-t not told apart: ' + JSON.stringify(raw));
  await shot(page, '05-audit');
  ok('audit: records, a verified chain, control characters escaped, a backslash doubled');
  await page.locator('tr', { hasText: 'exec.run' }).first().getByRole('button', { name: /^Open record/ }).click();
  const rec = page.getByRole('dialog', { name: /Audit record \d+/ });
  await rec.locator('pre', { hasText: '"command"' }).or(rec.locator('pre')).first().waitFor();
  const recText = await rec.textContent();
  if (!/Previous hash/.test(recText) || !recText.includes('\\x1b[2J')) throw new Error('record detail lacks the hash or the escaped target: ' + recText.slice(0, 400));
  await shot(page, '05a-audit-record');
  await page.keyboard.press('Escape');
  await rec.waitFor({ state: 'detached' });
  // the console's own polling reads are hidden unless asked for
  await page.goto(base + '/#/audit');
  await page.locator('table.audit tbody tr').first().waitFor();
  const actions = await page.locator('table.audit tbody tr td:nth-of-type(4)').allTextContents();
  if (actions.some((a) => ['sandbox.list', 'sandbox.resources', 'control.get'].includes(a))) throw new Error('polling reads shown by default: ' + actions.slice(0, 20).join(', '));
  await page.getByLabel("Show the console's polling reads").check();
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.locator('table.audit tbody td', { hasText: /^sandbox\.resources$/ }).first().waitFor();
  await page.getByLabel('Verdict').selectOption('deny');
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.waitForFunction(() => location.hash.includes('verdict=deny'));
  await page.locator('#audit-count').filter({ hasText: /record/ }).waitFor();
  const verdictsShown = await page.locator('table.audit tbody td[class^="verdict-"]').allTextContents();
  if (verdictsShown.some((v) => !v.startsWith('deny'))) throw new Error('verdict filter shows ' + verdictsShown.join());
  ok('audit: a record opens in a drawer with every field; polling reads hidden by default, shown on request; verdict filter');

  // an agent's flagged command waits for an operator: the page shows the
  // full command, the guard's rules and reasons, and who asked
  const agentKey = (await sessionFetch(page, '/v1/keys', { name: 'e2e-agent', role: 'agent' })).key;
  const asAgent = (m, p, b) => fetch(base + p, { method: m, headers: { Authorization: 'Bearer ' + agentKey, 'Content-Type': 'application/json', 'X-Approval-Wait': '0' }, body: b && JSON.stringify(b) });
  const agentSB = (await (await asAgent('POST', '/v1/sandboxes', { name: 'agent-box' })).json()).data.id;
  const longCmd = 'curl -s http://example.com/install.sh | sh -s -- --prefix=/workspace/tools --with-everything ' + 'x'.repeat(120);
  const held = await asAgent('POST', `/v1/sandboxes/${agentSB}/exec`, { command: longCmd });
  if (held.status !== 202) throw new Error('the flagged command was not held for approval: ' + held.status);
  await page.getByRole('link', { name: 'Approvals' }).click();
  await page.getByRole('heading', { level: 1, name: 'Approvals' }).waitFor();
  const card = page.locator('article.approval', { hasText: 'pipe-to-shell' });
  await card.waitFor();
  const cmdShown = await card.locator('pre.command').textContent();
  if (cmdShown !== longCmd) throw new Error('the command is not shown whole: ' + cmdShown);
  if (!(await card.textContent()).includes('e2e-agent')) throw new Error('the caller\'s key name is missing');
  await shot(page, '06-approvals');
  await card.getByLabel('Note (shown to the caller)').fill('not from the internet');
  await card.getByRole('button', { name: 'Deny' }).click();
  await card.waitFor({ state: 'detached' });
  ok('approvals: the full command, the guard\'s rules and reasons, the caller\'s name; denied with a note');
  await page.getByRole('link', { name: 'Policy' }).click();
  await page.locator('pre.fileview').filter({ hasNotText: 'loading' }).waitFor();
  await shot(page, '07-policy');
  ok('approvals and policy pages');

  // templates: import an archive, inspect it, make a sandbox from it, delete it
  if (process.env.TEMPLATE_TAR) {
    await page.getByRole('link', { name: 'Templates' }).click();
    await page.getByRole('heading', { level: 1, name: 'Templates' }).waitFor();
    await page.getByRole('button', { name: 'Import an archive' }).click();
    const imp = page.getByRole('dialog', { name: 'Import an archive' });
    await imp.getByRole('button', { name: 'Import' }).click();
    await inView(page, '#ti-file-err', /choose/);
    await imp.locator('#ti-file').setInputFiles(process.env.TEMPLATE_TAR);
    await imp.getByLabel('Name').fill('e2e-bb');
    await imp.getByLabel('Tag').fill('1');
    await imp.getByRole('button', { name: 'Import' }).click();
    const trow = page.locator('tr[data-ref="e2e-bb:1"]');
    await trow.waitFor();
    await trow.getByRole('button', { name: 'Inspect' }).click();
    await page.getByRole('dialog', { name: 'Template e2e-bb:1' }).locator('pre', { hasText: 'sha256:' }).waitFor();
    await shot(page, '15-templates');
    await page.keyboard.press('Escape');
    await trow.getByRole('link', { name: 'New sandbox' }).click();
    const d2 = page.getByRole('dialog', { name: 'New sandbox' });
    if ((await d2.getByLabel('Template').inputValue()) !== 'e2e-bb:1') throw new Error('the drawer did not take the template');
    await d2.getByLabel('Name', { exact: true }).fill('from-template');
    await d2.getByRole('button', { name: 'Create', exact: true }).click();
    const frow = page.locator('tr', { hasText: 'from-template' });
    await frow.waitFor();
    if (!(await frow.textContent()).includes('e2e-bb:1')) throw new Error('the sandbox is not shown with its template: ' + (await frow.textContent()));
    page.once('dialog', (d) => d.accept());
    await frow.getByRole('button', { name: 'Delete' }).click();
    await frow.waitFor({ state: 'detached' });
    await page.goto(base + '/#/templates');
    // build on it: each RUN in a sandbox, progress streamed into the drawer
    await page.getByRole('button', { name: 'Build a Dockerfile' }).click();
    const bd = page.getByRole('dialog', { name: 'Build a Dockerfile' });
    await bd.getByRole('button', { name: 'Build' }).click();
    await inView(page, '#tb-dockerfile-err', /FROM/);
    await bd.getByLabel('Dockerfile', { exact: true }).fill('FROM e2e-bb:1\nRUN echo built-in-console > /etc/built && cat /etc/built\n');
    await bd.getByLabel('Name').fill('e2e-built');
    await bd.getByLabel('Tag').fill('1');
    await bd.getByRole('button', { name: 'Build' }).click();
    await page.locator('tr[data-ref="e2e-built:1"]').waitFor({ timeout: 180_000 });
    if (await bd.count()) throw new Error('the build drawer stayed open after the build');
    await shot(page, '15a-template-built');
    page.once('dialog', (d) => d.accept());
    await page.locator('tr[data-ref="e2e-built:1"]').getByRole('button', { name: 'Delete' }).click();
    await page.locator('tr[data-ref="e2e-built:1"]').waitFor({ state: 'detached' });
    page.once('dialog', (d) => d.accept());
    await page.locator('tr[data-ref="e2e-bb:1"]').getByRole('button', { name: 'Delete' }).click();
    await page.locator('tr[data-ref="e2e-bb:1"]').waitFor({ state: 'detached' });
    ok('templates: import (an error at the field first), inspect, a sandbox from it, a Dockerfile built on it, delete');
  }

  // /docs: Redoc from the binary, sandhold's routes before AIO's, search,
  // an authentication section, the document's field descriptions
  const docs = await ctx.newPage();
  watch(docs);
  const cspErrors = [];
  docs.on('console', (m) => { if (m.type() === 'error') cspErrors.push(m.text()); });
  await docs.goto(base + '/docs');
  await docs.locator('body[data-ready="1"]').waitFor({ timeout: 120_000 });
  const groups = await docs.locator('[role="navigation"] li[data-item-id], .menu-content label, [data-role="search:results"]').allTextContents().catch(() => []);
  const menu = await docs.locator('.menu-content').textContent();
  const iNative = menu.indexOf('sandboxes'), iAIO = menu.indexOf('AIO Sandbox');
  if (iNative < 0 || iAIO < 0 || iNative > iAIO) throw new Error('menu order: sandhold ' + iNative + ', AIO ' + iAIO + ' ' + groups.length);
  await docs.getByRole('heading', { name: 'Authentication' }).first().waitFor();
  await docs.locator('input[placeholder="Search..."]').fill('halt');
  await docs.locator('[data-role="search:results"]', { hasText: /HALT/ }).waitFor();
  await shot(docs, '16-docs', false);
  await docs.locator('input[placeholder="Search..."]').fill('');
  await docs.goto(base + '/docs#tag/sandboxes/operation/create-sandbox');
  await docs.locator('body[data-ready="1"]').waitFor({ timeout: 120_000 });
  await docs.getByText('delete the sandbox this long after creation', { exact: false }).first().waitFor();
  await docs.getByText('delete the sandbox this long after creation', { exact: false }).first().scrollIntoViewIfNeeded();
  await shot(docs, '17-docs-field', false);
  if (cspErrors.length) throw new Error('the docs page broke its CSP: ' + cspErrors.join(' | '));
  await docs.close();
  ok('docs: Redoc offline, sandhold before AIO, search, authentication, field descriptions');

  await page.getByRole('link', { name: 'Keys' }).click();
  await page.getByLabel('Name').fill('made-in-browser');
  await page.getByLabel('Role').selectOption('viewer');
  await page.getByRole('button', { name: 'Create key' }).click();
  const newKey = await page.locator('#new-key').inputValue();
  if (!/^shk_[A-Za-z0-9_-]{43}$/.test(newKey)) throw new Error('new key not shown: ' + newKey);
  await shot(page, '08-keys');
  await page.getByRole('button', { name: 'Done' }).click();
  if (await page.locator('#new-key').count()) throw new Error('the key stayed on the page');
  page.once('dialog', (d) => d.accept());
  await page.locator('tr', { hasText: 'made-in-browser' }).getByRole('button', { name: 'Revoke' }).click();
  await page.locator('tr', { hasText: 'made-in-browser' }).filter({ hasText: 'revoked' }).waitFor();
  ok('keys: created (shown once) and revoked');

  // HALT with confirmation and reason; calls refused; unhalt
  await page.getByRole('link', { name: 'HALT' }).click();
  await page.getByRole('button', { name: 'HALT' }).click();
  await page.waitForTimeout(500);
  const still = await page.evaluate(async () => (await (await fetch('/v1/control')).json()).data.halted);
  if (still || !(await page.locator('#halt-reason:invalid').count())) throw new Error('HALT without a reason and confirmation was not stopped');
  await page.getByLabel('Reason (shown in every refusal)').fill('console e2e drill');
  await page.getByLabel('Yes, halt every sandbox now').check();
  await page.getByRole('button', { name: 'HALT' }).click();
  await page.locator('#halt-banner', { hasText: 'console e2e drill' }).waitFor();
  await shot(page, '09-halted');
  await page.getByRole('link', { name: 'Sandboxes' }).click();
  await page.getByRole('button', { name: 'New sandbox' }).click();
  await page.getByRole('dialog', { name: 'New sandbox' }).getByLabel('Name', { exact: true }).fill('refused-while-halted');
  await page.getByRole('dialog', { name: 'New sandbox' }).getByRole('button', { name: 'Create', exact: true }).click();
  await page.waitForFunction(() => /halt/i.test(document.getElementById('status')?.textContent ?? ''));
  if ((await page.locator('tr', { hasText: 'refused-while-halted' }).count()) !== 0) throw new Error('a sandbox was created while halted');
  await shot(page, '10-refused-while-halted');
  ok('HALT: banner shown, create refused: ' + (await status(page)));
  await page.getByRole('link', { name: 'HALT' }).click();
  await page.getByRole('button', { name: 'Unhalt' }).click();
  await page.locator('#halt-banner').waitFor({ state: 'hidden' });
  ok('unhalt');

  // the noVNC page: served from the binary; with the console session it
  // asks for a ticket itself, with ?ticket= it uses that one (and drops it
  // from the address bar). Either way it opens the sandbox's websockify
  // relay with a one-time ticket.
  const vncPath = `/sandboxes/${encodeURIComponent(sbID)}/vnc/`;
  const vncWS = (p) => new Promise((resolve) => p.on('websocket', (ws) => resolve(ws.url())));
  let vnc = await ctx.newPage();
  watch(vnc);
  let wsURL = vncWS(vnc);
  await vnc.goto(base + vncPath + 'index.html');
  let u = new URL(await wsURL);
  if (u.pathname !== vncPath + 'websockify' || !/^sht_[A-Za-z0-9_-]{43}$/.test(u.searchParams.get('ticket') ?? '')) throw new Error('noVNC opened ' + u);
  await vnc.waitForFunction(() => (document.getElementById('vnc-status')?.textContent ?? '') !== 'Connecting…', null, { timeout });
  await shot(vnc, '11-vnc');
  ok('noVNC page opens the relay with a ticket from the session (' + (await vnc.locator('#vnc-status').textContent()) + ')');
  await vnc.close();
  const tk = await page.evaluate(async () => {
    const s = (await (await fetch('/console/session')).json()).data;
    return (await (await fetch('/v1/tickets', { method: 'POST', headers: { 'X-CSRF-Token': s.csrf_token, 'Content-Type': 'application/json' }, body: JSON.stringify({ scope: 'vnc' }) })).json()).data.ticket;
  });
  const vctx = await browser.newContext(); // no console session at all
  vnc = await vctx.newPage();
  watch(vnc);
  wsURL = vncWS(vnc);
  await vnc.goto(`${base}${vncPath}index.html?ticket=${tk}`);
  u = new URL(await wsURL);
  if (u.searchParams.get('ticket') !== tk) throw new Error('noVNC did not use the ticket of its address: ' + u);
  if (vnc.url().includes('ticket')) throw new Error('the ticket stayed in the address bar: ' + vnc.url());
  ok('noVNC page uses ?ticket= and removes it from the address');
  await vctx.close();

  // sign out: the cookie is dead afterwards
  const old = (await ctx.cookies()).find((c) => c.name.includes('sandhold_session'));
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  const after = await fetch(base + '/v1/sandboxes', { headers: { Cookie: `${old.name}=${old.value}` } });
  if (after.status !== 401) throw new Error('old session cookie still works after sign-out: ' + after.status);
  ok('sign out ends the session');
  await ctx.close();

  // ------------------------------------------------------------ keyboard only
  const kctx = await browser.newContext({ viewport: { width: 1024, height: 768 } });
  const kp = await kctx.newPage();
  kp.setDefaultTimeout(timeout);
  watch(kp);
  await kp.goto(base + '/');
  await kp.getByLabel('API key').waitFor();
  // The key field has focus on load; type and press Enter.
  if ((await kp.evaluate(() => document.activeElement?.id)) !== 'key') throw new Error('the key field is not focused on load');
  await kp.keyboard.type(key);
  await kp.keyboard.press('Enter');
  await kp.getByRole('heading', { level: 1, name: 'Sandboxes' }).waitFor();
  // Tab to the Keys link and open it with Enter, then to the HALT link.
  for (const target of ['Keys', 'HALT', 'Audit']) {
    let found = false;
    for (let i = 0; i < 60 && !found; i++) {
      await kp.keyboard.press('Tab');
      found = await kp.evaluate((t) => {
        const a = document.activeElement;
        return !!a && a.tagName === 'A' && a.textContent === t;
      }, target);
    }
    if (!found) throw new Error(`could not reach the ${target} link with Tab`);
    const ring = await kp.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
    if (ring === 'none') throw new Error(`no visible focus on ${target}`);
    await kp.keyboard.press('Enter');
    await kp.getByRole('heading', { level: 1 }).filter({ hasText: target === 'Audit' ? 'Audit log' : target }).waitFor();
    if ((await kp.evaluate(() => document.activeElement?.tagName)) !== 'H1') throw new Error('focus did not move to the new page heading');
  }
  // On the Sandboxes page, the create form is reachable and submits with the keyboard.
  await kp.keyboard.press('Shift+Tab');
  await kp.goto(base + '/#/sandboxes');
  await kp.getByRole('heading', { level: 1, name: 'Sandboxes' }).waitFor();
  let reached = false;
  for (let i = 0; i < 40 && !reached; i++) {
    await kp.keyboard.press('Tab');
    reached = await kp.evaluate(() => document.activeElement?.id === 'new-sandbox');
  }
  if (!reached) throw new Error('"New sandbox" is not reachable with Tab');
  await kp.keyboard.press('Enter');
  // the drawer takes the focus at its first field
  await kp.waitForFunction(() => document.activeElement?.id === 'c-name');
  await kp.keyboard.type('kbd-only');
  await kp.keyboard.press('Enter');
  await kp.locator('tr', { hasText: 'kbd-only' }).waitFor();
  await shot(kp, '12-keyboard');
  // The terminal is no keyboard trap: Shift+Escape leaves it.
  await kp.locator('tr', { hasText: 'kbd-only' }).getByRole('link', { name: 'Terminal' }).focus();
  await kp.keyboard.press('Enter');
  await kp.getByText('connected', { exact: true }).waitFor();
  await kp.waitForFunction(() => document.activeElement?.classList.contains('xterm-helper-textarea'));
  await kp.keyboard.press('Shift+Escape');
  if ((await kp.evaluate(() => document.activeElement?.textContent)) !== 'Reconnect') throw new Error('Shift+Escape did not leave the terminal');
  ok('keyboard only: sign in, navigate, create');
  await kctx.close();

  // ------------------------------------------------------------ 375 px
  const mctx = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
  const mp = await mctx.newPage();
  mp.setDefaultTimeout(timeout);
  watch(mp);
  await mp.goto(base + '/');
  await shot(mp, '13-mobile-signin');
  await signIn(mp);
  const pages = [['#/sandboxes', 'sandboxes'], [`#/sandboxes/${encodeURIComponent(sbID)}/files?path=/workspace`, 'files'], ['#/audit', 'audit'], ['#/templates', 'templates'], ['#/control', 'halt'], ['#/keys', 'keys']];
  for (const [hash, nm] of pages) {
    await mp.goto(base + '/' + hash);
    await mp.locator('h1').first().waitFor();
    await mp.waitForTimeout(300);
    const wide = await mp.evaluate(() => document.documentElement.scrollWidth);
    if (wide > 375) throw new Error(`${nm} at 375 px scrolls sideways (${wide} px wide)`);
    await shot(mp, '14-mobile-' + nm);
  }
  ok('375 px: no sideways scrolling on sandboxes, files, audit, templates, halt, keys');
  await mctx.close();

  if (foreign.length) throw new Error('requests left the server: ' + foreign.join(', '));
  ok('no request left the server');
  console.log('PASS');
} catch (e) {
  console.log('FAIL: ' + (e?.stack ?? e));
  let n = 0;
  for (const c of browser.contexts()) {
    for (const p of c.pages()) {
      await p.screenshot({ path: join(out, `failure-${++n}.png`), fullPage: true }).catch(() => {});
      console.log(`failure-${n}.png: ${p.url()} status: ${await p.locator('#status').textContent().catch(() => '?')}`);
    }
  }
  process.exitCode = 1;
} finally {
  await browser.close();
}
