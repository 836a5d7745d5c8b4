// The Templates page: the root file systems sandboxes are made from. List,
// inspect, delete, make a sandbox from one, pull one from a registry or
// import an OCI layout / docker save tarball.
import { visible } from './visible';
import { ago, bytes, call, canWrite, clearErrors, closeDrawer, field, guarded, h, isAdmin, openDrawer, page, say, session, showError, upload, visibleJSON } from './ui';

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
  page('Templates',
    h('p', { class: 'hint', text: 'Immutable root file systems, shared read-only; each sandbox made from one writes to its own layer in its workspace. "host" (the server\'s /usr) is always there.' }),
    writable ? h('div', { class: 'toolbar' }, pullBtn, importBtn) : null,
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
    h('p', { id: 't-progress', class: 'hint', role: 'status' }));
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
    (form.querySelector('#t-progress') as HTMLElement).textContent = 'Pulling… (large images take a while)';
    void (async () => {
      try {
        const t = await call<Template>('POST', '/v1/templates', body);
        say(`Made template ${visible(refOf(t))}`);
        closeDrawer();
        await onDone();
      } catch (e: any) {
        (form.querySelector('#t-progress') as HTMLElement).textContent = '';
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
