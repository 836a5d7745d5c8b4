// The files page: list, view, download and upload (with progress) in a
// sandbox's file system, through the AIO file routes of that sandbox.
import { visible } from './visible';
import { bytes, call, canWrite, guarded, h, page, say, upload } from './ui';

interface FileInfo {
  name: string;
  path: string;
  is_directory: boolean;
  size: number | null;
  modified_time: string | null;
}

function joinPath(dir: string, name: string) {
  return dir.replace(/\/+$/, '') + '/' + name;
}

export async function filesPage(id: string, dir: string) {
  const sid = encodeURIComponent(id);
  const base = `/sandboxes/${sid}/v1/file`;
  const tbody = h('tbody');
  const viewer = h('section', { 'aria-label': 'File content' });
  const input = h('input', { type: 'file', id: 'upload-file', name: 'file' });
  const progress = h('progress', { max: '100', value: '0', id: 'upload-progress', 'aria-label': 'Upload progress' });
  const upForm = h('form', { class: 'card', 'aria-label': 'Upload a file' },
    h('label', { for: 'upload-file', text: `Upload into ${visible(dir)}` }), input, h('button', { type: 'submit', text: 'Upload' }), progress);
  const parent = dir.replace(/\/[^/]+\/?$/, '') || '/';
  const go = (p: string) => `#/sandboxes/${sid}/files?path=${encodeURIComponent(p)}`;
  page(`Files — ${visible(id)}`,
    h('p', { class: 'toolbar' }, h('a', { href: '#/sandboxes', text: '← Sandboxes' }), ' ', h('a', { href: go(parent), text: 'Up' }), ' ', h('code', { text: visible(dir) })),
    canWrite() ? upForm : null,
    h('div', { class: 'scroll' }, h('table', {}, h('caption', { text: `Contents of ${visible(dir)}` }),
      h('thead', {}, h('tr', {}, ...['Name', 'Size', 'Modified', 'Actions'].map((c) => h('th', { scope: 'col', text: c })))), tbody)),
    viewer);
  const load = async () => {
    const res = await call<{ files: FileInfo[]; truncated: boolean }>('POST', `${base}/list`, { path: dir });
    const files = [...(res.files ?? [])].sort((a, b) => Number(b.is_directory) - Number(a.is_directory) || a.name.localeCompare(b.name));
    tbody.replaceChildren(...files.map((f) => {
      const p = f.path || joinPath(dir, f.name);
      const actions = h('div', { class: 'actions' });
      if (!f.is_directory) {
        actions.append(
          h('a', { href: `${base}/download?path=${encodeURIComponent(p)}`, download: f.name, text: 'Download' }),
          h('button', { type: 'button', text: 'View', onclick: () => void guarded('View', async () => {
            const r = await call<{ content: string }>('POST', `${base}/read`, { file: p });
            viewer.replaceChildren(h('h2', { text: visible(p) }), h('pre', { class: 'fileview', tabindex: '0', text: visible(r.content).replace(/\\n/g, '\n').replace(/\\t/g, '\t') }));
            (viewer.querySelector('h2') as HTMLElement).setAttribute('tabindex', '-1');
            (viewer.querySelector('h2') as HTMLElement).focus();
          }) }));
      }
      return h('tr', {},
        h('th', { scope: 'row' }, f.is_directory ? h('a', { href: go(p), text: visible(f.name) + '/' }) : h('span', { text: visible(f.name) })),
        h('td', { text: f.is_directory ? '' : bytes(f.size ?? 0) }),
        h('td', { text: visible(f.modified_time ?? '') }),
        h('td', {}, actions));
    }));
    if (!files.length) tbody.append(h('tr', {}, h('td', { colspan: '4', text: 'Empty.' })));
    if (res.truncated) say('The listing was truncated.');
  };
  upForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const file = input.files?.[0];
    if (!file) {
      say('Choose a file first', true);
      return;
    }
    const fd = new FormData();
    fd.append('path', joinPath(dir, file.name)); // path must come before the file
    fd.append('file', file);
    void upload(`${base}/upload`, fd, progress).then(() => {
      say(`Uploaded ${visible(file.name)}`);
      input.value = '';
      void guarded('List', load);
    }, (e) => say(`Upload: ${visible(e.message)}`, true));
  });
  await guarded('List', load);
}
