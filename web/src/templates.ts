// The Templates page: the root file systems sandboxes are made from. List,
// inspect, delete, make a sandbox from one, pull one from a registry or
// import an OCI layout / docker save tarball.
import { visible } from './visible';
import { APIError, ago, bytes, call, canWrite, clearErrors, closeDrawer, field, guarded, h, isAdmin, openDrawer, page, say, session, showError, upload, visibleJSON } from './ui';

interface Template {
  name?: string;
  tag?: string;
  digest: string;
  owner?: string;
  created: string;
  bytes: number;
  layers: number;
  source: string;
}

const refOf = (t: Template) => (t.name ? `${t.name}:${t.tag || 'latest'}` : t.digest);

export async function templatesPage() {
  const tbody = h('tbody');
  const writable = canWrite();
  const pullBtn = h('button', { type: 'button', id: 'pull-template', text: 'Pull an image' });
  const importBtn = h('button', { type: 'button', class: 'secondary', id: 'import-template', text: 'Import an archive' });
  const buildBtn = h('button', { type: 'button', class: 'secondary', id: 'build-template', text: 'Build a Dockerfile' });
  page('Templates',
    h('p', { class: 'hint', text: 'Immutable root file systems, shared read-only; each sandbox made from one writes to its own layer in its workspace. "host" (the server\'s /usr) is always there.' }),
    writable ? h('div', { class: 'toolbar' }, pullBtn, buildBtn, importBtn) : null,
    h('div', { class: 'scroll' }, h('table', { class: 'templates' }, h('caption', { text: 'Templates you can use' }),
      h('thead', {}, h('tr', {}, ...['Name', 'Digest', 'Source', 'Layers', 'Size', 'Made', 'Owner', 'Actions'].map((c) => h('th', { scope: 'col', text: c })))), tbody)));
  const load = async () => {
    const ts = (await call<Template[]>('GET', '/v1/templates')) ?? [];
    tbody.replaceChildren(
      h('tr', { 'data-ref': 'host' }, h('th', { scope: 'row', text: 'host' }), h('td', { text: '–' }), h('td', { text: 'built in' }), h('td', { text: '–' }), h('td', { text: '–' }), h('td', { text: '–' }), h('td', { text: 'public' }),
        h('td', {}, writable ? h('a', { href: '#/sandboxes?template=host', text: 'New sandbox' }) : '')),
      ...ts.map((t) => {
        const ref = refOf(t);
        const actions = h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'secondary', text: 'Inspect', onclick: () => void guarded('Inspect', () => inspect(ref)) }));
        if (writable) {
          actions.append(h('a', { href: `#/sandboxes?template=${encodeURIComponent(ref)}`, text: 'New sandbox' }));
          if (isAdmin() || t.owner === session.me?.key_id) {
            actions.append(h('button', { type: 'button', class: 'danger', text: 'Delete', onclick: () => void guarded('Delete template', async () => {
              if (!confirm(`Delete template ${visible(ref)}? Sandboxes made from it keep running; its layers go when nothing uses them.`)) return;
              await call('DELETE', `/v1/templates/${encodeURIComponent(ref)}`);
              say(`Deleted template ${visible(ref)}`);
              await load();
            }) }));
          }
        }
        return h('tr', { 'data-ref': ref },
          h('th', { scope: 'row', text: visible(t.name ? ref : '(unnamed)') }),
          h('td', {}, h('code', { title: visible(t.digest), text: visible(t.digest.replace('sha256:', '').slice(0, 12)) })),
          h('td', { text: visible(t.source) }), h('td', { text: String(t.layers) }), h('td', { text: bytes(t.bytes) }),
          h('td', { title: visible(t.created), text: `${ago(t.created)} ago` }), h('td', { text: t.owner ? visible(t.owner.slice(0, 10)) : 'public' }),
          h('td', {}, actions));
      }));
  };
  pullBtn.addEventListener('click', () => pullDrawer(load));
  importBtn.addEventListener('click', () => importDrawer(load));
  buildBtn.addEventListener('click', () => buildDrawer(load));
  await guarded('Templates', load);
}

async function inspect(ref: string) {
  const t = await call<any>('GET', `/v1/templates/${encodeURIComponent(ref)}`);
  openDrawer(`Template ${visible(ref)}`, h('pre', { class: 'fileview', tabindex: '0', text: visibleJSON(t) }));
}

function pullDrawer(onDone: () => Promise<void>) {
  const form = h('form', { class: 'drawer-form', 'aria-label': 'Pull an image', novalidate: true },
    field('t-image', 'Image', h('input', { id: 't-image', name: 'image', required: true, placeholder: 'docker.io/library/python:3.12-slim' }), 'from a registry the server allows (SANDBOX_REGISTRIES)'),
    field('t-name', 'Name', h('input', { id: 't-name', name: 'name', required: true, placeholder: 'python' })),
    field('t-tag', 'Tag', h('input', { id: 't-tag', name: 'tag', placeholder: 'latest' })),
    h('div', { class: 'drawer-actions' }, h('button', { type: 'submit', text: 'Pull' })),
    h('pre', { id: 't-progress', class: 'progress-log', role: 'status', 'aria-live': 'polite' }));
  openDrawer('Pull an image', form);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const v = (id: string) => (form.querySelector('#' + id) as HTMLInputElement).value.trim();
    if (!v('t-image')) {
      showError(form, 't-image', 'name an image, like docker.io/library/python:3.12-slim');
      return;
    }
    if (!v('t-name')) {
      showError(form, 't-name', 'name the template (sandboxes are made from name:tag)');
      return;
    }
    const body: Record<string, string> = { image: v('t-image') };
    if (v('t-name')) body.name = v('t-name');
    if (v('t-tag')) body.tag = v('t-tag');
    void (async () => {
      try {
        const t = await makeTemplate(body, form.querySelector('#t-progress') as HTMLElement);
        say(`Made template ${visible(refOf(t))}`);
        closeDrawer();
        await onDone();
      } catch (e: any) {
        showError(form, { image: 't-image', name: 't-name', tag: 't-tag' }[e.field as string] ?? null, e.message);
      }
    })();
  });
}

function importDrawer(onDone: () => Promise<void>) {
  const file = h('input', { id: 'ti-file', name: 'file', type: 'file', accept: '.tar,application/x-tar' });
  const progress = h('progress', { max: '100', value: '0', id: 'ti-progress', 'aria-label': 'Upload progress' });
  const form = h('form', { class: 'drawer-form', 'aria-label': 'Import an archive', novalidate: true },
    field('ti-file', 'OCI layout (as a tar) or docker save tarball', file),
    field('ti-name', 'Name', h('input', { id: 'ti-name', name: 'name', placeholder: 'myimage' })),
    field('ti-tag', 'Tag', h('input', { id: 'ti-tag', name: 'tag', placeholder: 'latest' })),
    h('div', { class: 'drawer-actions' }, h('button', { type: 'submit', text: 'Import' })), progress);
  openDrawer('Import an archive', form);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const f = file.files?.[0];
    if (!f) {
      showError(form, 'ti-file', 'choose a .tar file');
      return;
    }
    const q = new URLSearchParams();
    const v = (id: string) => (form.querySelector('#' + id) as HTMLInputElement).value.trim();
    if (v('ti-name')) q.set('name', v('ti-name'));
    if (v('ti-tag')) q.set('tag', v('ti-tag'));
    upload<Template>('/v1/templates/import?' + q.toString(), f, progress, 'application/x-tar').then((t) => {
      say(`Imported ${visible(t ? refOf(t) : f.name)}`);
      closeDrawer();
      void onDone();
    }, (e) => showError(form, null, `Import: ${e.message}`));
  });
}

// makeTemplate posts body to /v1/templates asking for progress events
// (text/event-stream) and writes each to log; it answers the template or
// throws an APIError, like call().
async function makeTemplate(body: Record<string, unknown>, log: HTMLElement): Promise<Template> {
  log.textContent = '';
  const line = (s: string) => {
    log.textContent = (log.textContent + s + '\n').split('\n').slice(-200).join('\n');
    log.scrollTop = log.scrollHeight;
  };
  const r = await fetch('/v1/templates', { method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', 'X-CSRF-Token': session.csrf }, body: JSON.stringify(body) });
  if (!(r.headers.get('Content-Type') ?? '').startsWith('text/event-stream') || !r.body) {
    const env = await r.json().catch(() => null);
    if (r.ok && env?.success !== false) return env.data as Template;
    throw new APIError(r.status, env?.message ?? `HTTP ${r.status}`, env?.data?.code ?? '', String(env?.data?.field ?? '').replace(/^body\./, ''));
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? '';
      const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null');
      if (event === 'progress') {
        const e = data ?? {};
        // A RUN's output keeps its lines; each is made visible.
        const text = [e.step, e.layers ? `${e.layer}/${e.layers}` : '', e.cached ? 'cached' : '', e.bytes ? bytes(e.bytes) : '', e.message ?? ''].filter(Boolean).join(' ');
        line(text.replace(/\n$/, '').split('\n').map(visible).join('\n'));
      } else if (event === 'done') {
        return data.data as Template;
      } else if (event === 'error') {
        throw new APIError(400, data?.message ?? 'failed', data?.data?.code ?? '', String(data?.data?.field ?? '').replace(/^body\./, ''));
      }
    }
  }
  throw new APIError(0, 'the server ended the stream without an answer');
}

function buildDrawer(onDone: () => Promise<void>) {
  const df = h('textarea', { id: 'tb-dockerfile', name: 'dockerfile', rows: '8', spellcheck: 'false', placeholder: 'FROM python:3.12\nRUN pip install numpy' });
  const mode = h('select', { id: 'tb-network', name: 'network' }, h('option', { value: 'none', text: 'none (no egress)' }), h('option', { value: 'proxy', text: 'proxy (allow-list)' }));
  const form = h('form', { class: 'drawer-form', 'aria-label': 'Build a Dockerfile', novalidate: true },
    field('tb-dockerfile', 'Dockerfile', df, 'FROM a template (or a pulled image), RUN, ENV, ARG, WORKDIR, USER, LABEL, CMD; each RUN runs in a sandbox as you (COPY needs a build context: POST /v1/templates/build)'),
    field('tb-name', 'Name', h('input', { id: 'tb-name', name: 'name', required: true })),
    field('tb-tag', 'Tag', h('input', { id: 'tb-tag', name: 'tag', placeholder: 'latest' })),
    field('tb-network', 'Egress of the RUN steps', mode),
    field('tb-allow', 'Allowed hosts (proxy mode)', h('input', { id: 'tb-allow', name: 'allow', placeholder: 'pypi.org *.pythonhosted.org' })),
    h('div', { class: 'drawer-actions' }, h('button', { type: 'submit', text: 'Build' })),
    h('pre', { id: 'tb-progress', class: 'progress-log', role: 'status', 'aria-live': 'polite' }));
  openDrawer('Build a Dockerfile', form);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const v = (id: string) => (form.querySelector('#' + id) as HTMLInputElement).value.trim();
    if (!/^\s*FROM\s/im.test(df.value)) {
      showError(form, 'tb-dockerfile', 'a Dockerfile starts FROM a template (name:tag, or host)');
      return;
    }
    if (!v('tb-name')) {
      showError(form, 'tb-name', 'name the template');
      return;
    }
    const body: Record<string, unknown> = { dockerfile: df.value, name: v('tb-name'), network: { mode: mode.value, allow: v('tb-allow').split(/\s+/).filter(Boolean) } };
    if (v('tb-tag')) body.tag = v('tb-tag');
    const submit = form.querySelector('button[type=submit]') as HTMLButtonElement;
    submit.disabled = true;
    void (async () => {
      try {
        const t = await makeTemplate(body, form.querySelector('#tb-progress') as HTMLElement);
        say(`Built template ${visible(refOf(t))}`);
        closeDrawer();
        await onDone();
      } catch (e: any) {
        showError(form, { dockerfile: 'tb-dockerfile', name: 'tb-name', tag: 'tb-tag', 'network.mode': 'tb-network' }[e.field as string] ?? null, e.message);
      } finally {
        submit.disabled = false;
      }
    })();
  });
}
