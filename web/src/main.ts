// sandhold's web console. Plain TypeScript and DOM; every text from the
// server goes through textContent (never innerHTML) and, where it is
// data an agent controls (audit records, names, file names, messages),
// through visible(), the same escaping as the server's audit.Visible.
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { escaped, escapedJSON, visible } from './visible';

// ---------------------------------------------------------------- helpers

type Attrs = Record<string, string | boolean | number | EventListener | undefined>;
type Child = Node | string | null | undefined | false;

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...kids: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v as EventListener);
    else if (k === 'text') el.textContent = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of kids) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

// visibleJSON renders a value as JSON with every string made visible.
function visibleJSON(v: unknown): string {
  const walk = (x: unknown, depth: number): unknown => {
    if (depth > 32) return '…';
    if (typeof x === 'string') return visible(x);
    if (Array.isArray(x)) return x.map((e) => walk(e, depth + 1));
    if (x && typeof x === 'object') {
      const o: Record<string, unknown> = {};
      for (const [k, e] of Object.entries(x)) o[visible(k)] = walk(e, depth + 1);
      return o;
    }
    return x;
  };
  return JSON.stringify(walk(v, 0), null, 2);
}

function bytes(n: number | undefined | null): string {
  if (!n) return '0';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let x = n;
  while (x >= 1024 && i < u.length - 1) {
    x /= 1024;
    i++;
  }
  return `${x.toFixed(x < 10 && i > 0 ? 1 : 0)} ${u[i]}`;
}

function say(msg: string, bad = false) {
  const s = document.getElementById('status')!;
  s.textContent = visible(msg);
  s.className = 'status' + (bad ? ' bad' : '');
}

// ---------------------------------------------------------------- API

class APIError extends Error {
  constructor(public status: number, message: string, public code = '') {
    super(message);
  }
}

let csrf = ''; // the session's CSRF token: in memory only
let me: { key_id: string; key_name: string; role: string } | null = null;

async function call<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = csrf;
  let payload: BodyInit | undefined;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const r = await fetch(path, { method, headers, body: payload, credentials: 'same-origin' });
  let env: any = null;
  try {
    env = await r.json();
  } catch {
    /* not JSON */
  }
  if (r.status === 401 && path !== '/console/session') {
    me = null;
    csrf = '';
    route();
  }
  if (r.status === 202) {
    throw new APIError(202, `waiting for an operator's approval (${visible(env?.data?.approval_id ?? env?.data?.id ?? '')})`, 'approval');
  }
  if (!r.ok || !env || env.success === false) {
    throw new APIError(r.status, env?.message ?? `HTTP ${r.status}`, env?.data?.code ?? '');
  }
  return env.data as T;
}

async function guarded(what: string, fn: () => Promise<unknown>) {
  try {
    await fn();
  } catch (e: any) {
    say(`${what}: ${e.message}`, true);
  }
}

// ---------------------------------------------------------------- shell

const isAdmin = () => me?.role === 'admin';

function nav() {
  const top = document.getElementById('top')!;
  top.replaceChildren();
  if (!me) {
    top.append(h('span', { class: 'brand', text: 'sandhold' }));
    return;
  }
  const links: [string, string][] = [['#/sandboxes', 'Sandboxes']];
  if (isAdmin()) links.push(['#/audit', 'Audit'], ['#/approvals', 'Approvals'], ['#/policy', 'Policy'], ['#/control', 'HALT'], ['#/keys', 'Keys']);
  else if (me.role === 'viewer') links.push(['#/audit', 'Audit']);
  const cur = location.hash.split('?')[0] || '#/sandboxes';
  top.append(
    h('span', { class: 'brand', text: 'sandhold' }),
    h('nav', { 'aria-label': 'Main' },
      h('ul', {}, ...links.map(([href, label]) => h('li', {}, h('a', { href, text: label, 'aria-current': cur.startsWith(href) ? 'page' : undefined }))))),
    h('span', { class: 'who', text: `${visible(me.key_name)} (${me.role})` }),
    h('button', { type: 'button', onclick: () => void signOut(), text: 'Sign out' }),
  );
}

async function haltBanner() {
  const b = document.getElementById('halt-banner')!;
  if (!me) {
    b.hidden = true;
    return;
  }
  try {
    const st = await call<{ halted: boolean; reason?: string }>('GET', '/v1/control');
    b.hidden = !st.halted;
    b.textContent = st.halted ? `HALTED: ${visible(st.reason ?? '')} — every non-safe call is refused.` : '';
  } catch {
    b.hidden = true;
  }
}

let cleanup: (() => void)[] = [];

function page(title: string, ...kids: Child[]) {
  for (const f of cleanup) f();
  cleanup = [];
  const main = document.getElementById('main')!;
  main.replaceChildren(h('h1', { tabindex: '-1', text: title }), ...kids);
  document.title = `${title} — sandhold`;
  (main.querySelector('h1') as HTMLElement).focus();
}

async function route() {
  nav();
  if (!me) {
    signInPage();
    return;
  }
  void haltBanner();
  const hash = location.hash || '#/sandboxes';
  const [p, qs] = hash.slice(1).split('?');
  const q = new URLSearchParams(qs ?? '');
  const parts = p.split('/').filter(Boolean);
  say('');
  if (parts[0] === 'sandboxes' && parts.length === 3 && parts[2] === 'terminal') return terminalPage(decodeURIComponent(parts[1]));
  if (parts[0] === 'sandboxes' && parts.length === 3 && parts[2] === 'files') return filesPage(decodeURIComponent(parts[1]), q.get('path') || '/workspace');
  switch (parts[0]) {
    case 'audit':
      return auditPage(q);
    case 'approvals':
      return approvalsPage();
    case 'policy':
      return policyPage();
    case 'control':
      return controlPage();
    case 'keys':
      return keysPage();
    default:
      return sandboxesPage();
  }
}

// ---------------------------------------------------------------- sign in

function signInPage() {
  const key = h('input', { id: 'key', name: 'key', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'signin-h' },
    h('label', { for: 'key', text: 'API key' }), key,
    h('p', { class: 'hint', text: 'The key is exchanged for a session cookie; the browser does not keep it.' }),
    h('button', { type: 'submit', text: 'Sign in' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const k = key.value;
    key.value = '';
    void guarded('Sign in', async () => {
      const info = await call('POST', '/console/session', { key: k });
      csrf = info.csrf_token;
      me = info;
      location.hash = '#/sandboxes';
      await route();
      say('Signed in');
    });
  });
  page('Sign in', form);
  (form.querySelector('h1') as HTMLElement | null)?.setAttribute('id', 'signin-h');
  key.focus();
}

async function signOut() {
  await guarded('Sign out', async () => {
    await call('DELETE', '/console/session');
  });
  me = null;
  csrf = '';
  document.getElementById('halt-banner')!.hidden = true;
  route();
  say('Signed out');
}

// ---------------------------------------------------------------- sandboxes

interface Sandbox {
  id: string;
  name: string;
  owner: string;
  state: string;
  limits: { memory?: number; cpu?: number; pids?: number; disk?: number; cpu_time?: number };
  network: { mode: string; allow?: string[] };
}

interface Stats {
  id: string;
  state: string;
  cgroup: { MemoryBytes: number; MemoryLimit: number; CPUUsage: number; Pids: number; PidsLimit: number };
  disk?: { used_bytes: number; total_bytes: number };
}

// history of samples per sandbox: kept across page visits
const samples = new Map<string, { t: number; cpu: number; mem: number; pids: number; disk: number }[]>();
const maxSamples = 40;

function spark(values: number[], label: string, max?: number): SVGSVGElement {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 100 24');
  svg.setAttribute('class', 'spark');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  const top = Math.max(max ?? 0, ...values, 1e-9);
  const pts = values.map((v, i) => `${values.length < 2 ? 0 : (i * 100) / (values.length - 1)},${23 - (v / top) * 22}`).join(' ');
  const pl = document.createElementNS(ns, 'polyline');
  pl.setAttribute('points', pts);
  svg.append(pl);
  return svg;
}

function limitsText(l: Sandbox['limits']): string {
  const parts = [];
  if (l.memory) parts.push(`mem ${bytes(l.memory)}`);
  if (l.cpu) parts.push(`cpu ${(l.cpu / 1000).toFixed(2)}`);
  if (l.pids) parts.push(`pids ${l.pids}`);
  if (l.disk) parts.push(`disk ${bytes(l.disk)}`);
  return parts.join(', ') || 'server defaults';
}

function createForm(onDone: () => void): HTMLElement {
  const f = (id: string, label: string, attrs: Attrs = {}) =>
    h('div', { class: 'field' }, h('label', { for: id, text: label }), h('input', { id, name: id, ...attrs }));
  const mode = h('select', { id: 'c-mode', name: 'mode' },
    h('option', { value: 'none', text: 'none (no egress)' }), h('option', { value: 'proxy', text: 'proxy (allow-list)' }), h('option', { value: 'host', text: 'host (admin only)' }));
  const allow = h('textarea', { id: 'c-allow', name: 'allow', rows: '2', placeholder: 'pypi.org *.pythonhosted.org' });
  const form = h('form', { class: 'card', 'aria-label': 'Create a sandbox' },
    h('h2', { text: 'Create a sandbox' }),
    h('div', { class: 'grid' },
      f('c-name', 'Name', { maxlength: '128' }),
      f('c-memory', 'Memory', { placeholder: '512MB' }),
      f('c-cpu', 'CPUs', { type: 'number', step: '0.1', min: '0' }),
      f('c-pids', 'Processes', { type: 'number', min: '0' }),
      f('c-disk', 'Disk', { placeholder: '1GB' }),
      f('c-ttl', 'Time to live', { placeholder: '2h' }),
      h('div', { class: 'field' }, h('label', { for: 'c-mode', text: 'Egress' }), mode),
      h('div', { class: 'field wide' }, h('label', { for: 'c-allow', text: 'Allowed hosts (proxy mode; space or newline separated)' }), allow)),
    h('button', { type: 'submit', text: 'Create' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = (id: string) => (form.querySelector('#' + id) as HTMLInputElement).value.trim();
    const limits: Record<string, unknown> = {};
    if (v('c-memory')) limits.memory = v('c-memory');
    if (v('c-cpu')) limits.cpu = Number(v('c-cpu'));
    if (v('c-pids')) limits.pids = Number(v('c-pids'));
    if (v('c-disk')) limits.disk = v('c-disk');
    const body: Record<string, unknown> = { limits, network: { mode: mode.value, allow: allow.value.split(/\s+/).filter(Boolean) } };
    if (v('c-name')) body.name = v('c-name');
    if (v('c-ttl')) body.ttl = v('c-ttl');
    void guarded('Create', async () => {
      const sb = await call<Sandbox>('POST', '/v1/sandboxes', body);
      say(`Created ${visible(sb.name || sb.id)}`);
      form.reset();
      onDone();
    });
  });
  return form;
}

async function sandboxesPage() {
  const tbody = h('tbody');
  const table = h('div', { class: 'scroll' }, h('table', {},
    h('caption', { text: 'Sandboxes, with live CPU, memory and process counts from the cgroups, and workspace disk use' }),
    h('thead', {}, h('tr', {}, ...['Name', 'State', 'Owner', 'Limits', 'CPU', 'Memory', 'Processes', 'Disk', 'Actions'].map((c) => h('th', { scope: 'col', text: c })))),
    tbody));
  const canWrite = me?.role !== 'viewer';
  page('Sandboxes', canWrite ? createForm(() => void refresh()) : null, table);
  let list: Sandbox[] = [];
  let stats = new Map<string, Stats>();
  const rowFor = (sb: Sandbox) => {
    const hist = samples.get(sb.id) ?? [];
    const st = stats.get(sb.id);
    const last = hist[hist.length - 1];
    const act = (label: string, fn: () => Promise<unknown>, cls = '') =>
      h('button', { type: 'button', class: cls, text: label, onclick: () => void guarded(label, async () => { await fn(); await refresh(); }) });
    const id = encodeURIComponent(sb.id);
    const actions = h('div', { class: 'actions' },
      h('a', { href: `#/sandboxes/${id}/terminal`, text: 'Terminal' }),
      h('a', { href: `#/sandboxes/${id}/files`, text: 'Files' }),
      h('a', { href: `/sandboxes/${id}/vnc/index.html`, text: 'Desktop', target: '_blank', rel: 'noopener' }));
    if (canWrite) {
      if (sb.state === 'paused') actions.append(act('Resume', () => call('POST', `/v1/sandboxes/${id}/resume`)));
      else actions.append(act('Pause', () => call('POST', `/v1/sandboxes/${id}/pause`)));
      actions.append(act('Delete', async () => {
        if (!confirm(`Delete sandbox ${visible(sb.name || sb.id)} and its workspace?`)) return;
        await call('DELETE', `/v1/sandboxes/${id}`);
        say('Deleted');
      }, 'danger'));
    }
    return h('tr', { 'data-id': sb.id },
      h('th', { scope: 'row' }, h('span', { text: visible(sb.name || '(unnamed)') }), h('br'), h('code', { text: visible(sb.id) })),
      h('td', { text: visible(st?.state ?? sb.state) }),
      h('td', {}, h('code', { text: visible(sb.owner) })),
      h('td', { text: `${limitsText(sb.limits)}; egress ${visible(sb.network?.mode ?? 'none')}` }),
      h('td', {}, spark(hist.map((x) => x.cpu), 'CPU use over the last minute', 100), h('span', { text: last ? `${last.cpu.toFixed(0)} %` : '–' })),
      h('td', {}, spark(hist.map((x) => x.mem), 'memory over the last minute', st?.cgroup.MemoryLimit || undefined), h('span', { text: last ? bytes(last.mem) : '–' })),
      h('td', {}, spark(hist.map((x) => x.pids), 'processes over the last minute', st?.cgroup.PidsLimit || undefined), h('span', { text: last ? `${last.pids}` : '–' })),
      h('td', {}, spark(hist.map((x) => x.disk), 'workspace disk use over the last minute', st?.disk?.total_bytes || undefined), h('span', { text: last && st?.disk?.total_bytes ? `${bytes(last.disk)} of ${bytes(st.disk.total_bytes)}` : '–' })),
      h('td', {}, actions));
  };
  const render = () => tbody.replaceChildren(...(list.length ? list.map(rowFor) : [h('tr', {}, h('td', { colspan: '9', text: 'No sandboxes yet.' }))]));
  const poll = async () => {
    try {
      const st = await call<Stats[]>('GET', '/v1/sandbox/resources');
      const now = Date.now();
      stats = new Map(st.map((s) => [s.id, s]));
      for (const s of st) {
        const hist = samples.get(s.id) ?? [];
        const prev = hist[hist.length - 1];
        const cpuNs = s.cgroup.CPUUsage;
        const cpu = prev ? Math.max(0, ((cpuNs - (prev as any).raw) / 1e6 / (now - prev.t)) * 100) : 0;
        hist.push({ t: now, cpu, mem: s.cgroup.MemoryBytes, pids: s.cgroup.Pids, disk: s.disk?.used_bytes ?? 0, raw: cpuNs } as any);
        if (hist.length > maxSamples) hist.shift();
        samples.set(s.id, hist);
      }
      render();
    } catch {
      /* the list shows the error */
    }
  };
  const refresh = async () => {
    await guarded('List sandboxes', async () => {
      list = await call<Sandbox[]>('GET', '/v1/sandboxes');
      render();
    });
    await poll();
  };
  await refresh();
  const timer = window.setInterval(() => void poll(), 2000);
  cleanup.push(() => window.clearInterval(timer));
}

// ---------------------------------------------------------------- terminal

async function ticket(): Promise<string> {
  const t = await call<{ ticket: string }>('POST', '/v1/tickets', { scope: 'terminal' });
  return t.ticket;
}

function terminalPage(id: string) {
  const box = h('div', { class: 'term', id: 'terminal', 'aria-label': 'Terminal' });
  const state = h('span', { role: 'status', 'aria-live': 'polite', text: 'connecting…' });
  const reconnectBtn = h('button', { type: 'button', text: 'Reconnect' });
  page(`Terminal — ${visible(id)}`, h('p', { class: 'toolbar' }, h('a', { href: '#/sandboxes', text: '← Sandboxes' }), ' ', state, ' ', reconnectBtn),
    h('p', { class: 'hint', id: 'term-hint', text: 'The terminal takes Tab and most keys; Shift+Escape moves the focus out of it.' }), box);
  const term = new Terminal({ convertEol: false, cursorBlink: true, fontSize: 14, screenReaderMode: true, scrollback: 5000 });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  let ws: WebSocket | null = null;
  let sessionID = '';
  let closed = false;
  let retry = 0;
  let retryTimer = 0;
  const send = (m: unknown) => ws?.readyState === WebSocket.OPEN && ws.send(JSON.stringify(m));
  const connect = async () => {
    window.clearTimeout(retryTimer);
    if (closed) return;
    ws?.close();
    state.textContent = 'connecting…';
    let t: string;
    try {
      t = await ticket();
    } catch (e: any) {
      state.textContent = `cannot connect: ${visible(e.message)}`;
      return;
    }
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const q = new URLSearchParams({ ticket: t, rows: String(term.rows), cols: String(term.cols) });
    if (sessionID) q.set('session_id', sessionID);
    const sock = new WebSocket(`${proto}//${location.host}/sandboxes/${encodeURIComponent(id)}/v1/shell/ws?${q}`);
    ws = sock;
    sock.onmessage = (ev) => {
      let m: any;
      try {
        m = JSON.parse(ev.data);
      } catch {
        return;
      }
      switch (m.type) {
        case 'session_id':
          sessionID = String(m.data ?? '');
          break;
        case 'ready':
          retry = 0;
          state.textContent = 'connected';
          send({ type: 'resize', data: { cols: term.cols, rows: term.rows } });
          break;
        case 'output':
          term.write(String(m.data ?? ''));
          break;
        case 'ping':
          send({ type: 'pong', data: m.data });
          break;
        case 'error':
          term.write(`\r\n\x1b[31m[${visible(m.data)}]\x1b[0m\r\n`);
          break;
      }
    };
    sock.onclose = () => {
      if (ws !== sock || closed) return;
      retry = Math.min(retry + 1, 5);
      const wait = 2 ** retry;
      state.textContent = `disconnected; reconnecting in ${wait} s`;
      retryTimer = window.setTimeout(() => void connect(), wait * 1000);
    };
  };
  // No keyboard trap: Shift+Escape leaves the terminal (WCAG 2.1.2).
  term.attachCustomKeyEventHandler((e) => {
    if (e.type === 'keydown' && e.key === 'Escape' && e.shiftKey) {
      reconnectBtn.focus();
      return false;
    }
    return true;
  });
  term.onData((d) => send({ type: 'input', data: d }));
  term.onResize(({ cols, rows }) => send({ type: 'resize', data: { cols, rows } }));
  const onResize = () => fit.fit();
  window.addEventListener('resize', onResize);
  reconnectBtn.addEventListener('click', () => {
    retry = 0;
    void connect();
  });
  cleanup.push(() => {
    closed = true;
    window.clearTimeout(retryTimer);
    window.removeEventListener('resize', onResize);
    ws?.close();
    term.dispose();
  });
  (window as any).sandholdTerm = term;
  void connect().then(() => term.focus());
}

// ---------------------------------------------------------------- files

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

async function filesPage(id: string, dir: string) {
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
    me?.role !== 'viewer' ? upForm : null,
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
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `${base}/upload`);
    xhr.setRequestHeader('X-CSRF-Token', csrf);
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) progress.value = Math.round((e.loaded / e.total) * 100);
    };
    xhr.onload = () => {
      let env: any = null;
      try {
        env = JSON.parse(xhr.responseText);
      } catch {
        /* */
      }
      if (xhr.status >= 200 && xhr.status < 300 && env?.success !== false) {
        progress.value = 100;
        say(`Uploaded ${visible(file.name)}`);
        input.value = '';
        void guarded('List', load);
      } else say(`Upload: ${visible(env?.message ?? 'HTTP ' + xhr.status)}`, true);
    };
    xhr.onerror = () => say('Upload: connection failed', true);
    progress.value = 0;
    xhr.send(fd);
  });
  await guarded('List', load);
}

// ---------------------------------------------------------------- admin

interface AuditRecord {
  seq: number;
  time: string;
  actor: string;
  role: string;
  client_addr: string;
  action: string;
  target: string;
  sandbox: string;
  verdict: string;
  detail: Record<string, unknown> | null;
}

async function auditPage(q: URLSearchParams) {
  const fields: [string, string, string][] = [['actor', 'Actor (key id)', ''], ['action', 'Action (prefix)', 'auth'], ['sandbox', 'Sandbox', ''], ['since', 'Since', '1h or RFC 3339']];
  const form = h('form', { class: 'card grid', 'aria-label': 'Filter the audit log' },
    ...fields.map(([k, label, ph]) => h('div', { class: 'field' }, h('label', { for: 'a-' + k, text: label }), h('input', { id: 'a-' + k, name: k, placeholder: ph, value: q.get(k) ?? '' }))),
    h('button', { type: 'submit', text: 'Filter' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const nq = new URLSearchParams();
    for (const [k] of fields) {
      const v = (form.querySelector('#a-' + k) as HTMLInputElement).value.trim();
      if (v) nq.set(k, v);
    }
    location.hash = '#/audit?' + nq.toString();
  });
  const verify = h('p', { id: 'audit-verify', role: 'status', text: 'Verifying the chain…' });
  const tbody = h('tbody');
  page('Audit log', verify, form, h('div', { class: 'scroll' }, h('table', { class: 'audit' }, h('caption', { text: 'Audit records, newest first; control and bidi characters are shown escaped, a backslash as \\\\' }),
    h('thead', {}, h('tr', {}, ...['Seq', 'Time', 'Actor', 'Action', 'Target', 'Sandbox', 'Verdict', 'Detail'].map((c) => h('th', { scope: 'col', text: c })))), tbody)));
  if (me?.role !== 'agent') {
    void call<{ ok: boolean; records: number; first_bad?: number; problem?: string }>('GET', '/v1/audit/verify').then(
      (v) => {
        verify.textContent = v.ok ? `Chain verified: ${v.records} records intact.` : `CHAIN BROKEN at record ${v.first_bad}: ${visible(v.problem ?? '')}`;
        verify.className = v.ok ? 'ok' : 'bad';
      },
      (e) => (verify.textContent = `Verification failed: ${visible(e.message)}`));
  } else verify.textContent = 'Agents see their own records; the chain is verified by operators.';
  const aq = new URLSearchParams({ order: 'desc', limit: '200' });
  for (const [k] of fields) if (q.get(k)) aq.set(k, q.get(k)!);
  await guarded('Audit', async () => {
    const res = await call<{ records: AuditRecord[] }>('GET', '/v1/audit?' + aq.toString());
    // The API answers the stored strings; they are shown with escaped()
    // (backslashes doubled), so a tab and a typed backslash-t differ.
    tbody.replaceChildren(...res.records.map((r) => h('tr', {},
      h('td', { text: String(r.seq) }), h('td', { text: escaped(r.time) }), h('td', {}, h('code', { text: escaped(r.actor) })),
      h('td', { text: escaped(r.action) }), h('td', { class: 'target', text: escaped(r.target) }), h('td', { text: escaped(r.sandbox) }),
      h('td', { class: 'verdict-' + visible(r.verdict), text: escaped(r.verdict) }),
      h('td', {}, r.detail ? h('details', {}, h('summary', { text: 'detail' }), h('pre', { text: escapedJSON(r.detail) })) : ''))));
    if (!res.records.length) tbody.append(h('tr', {}, h('td', { colspan: '8', text: 'No records match.' })));
  });
}

// planOf shows what an approved call will run: each step of a custom tool
// (nested ones indented) with its rendered command or arguments, and the
// digest of the definition the approval is bound to.
function planOf(a: any): HTMLElement | string {
  const steps: any[] = Array.isArray(a.steps) ? a.steps : [];
  if (!steps.length) return '';
  const lines = steps.map((st) => {
    const what = st.late ? 'built at run time: ' + visibleJSON(st.arguments) : (st.target ? visible(st.target) : visibleJSON(st.arguments));
    return '  '.repeat(Number(st.depth) || 0) + visible(st.tool) + ': ' + what + (st.truncated ? ' …' : '');
  });
  if (a.digest) lines.push('definition ' + visible(String(a.digest).slice(0, 16)));
  return h('pre', { text: lines.join('\n') });
}

async function approvalsPage() {
  const tbody = h('tbody');
  page('Approvals', h('div', { class: 'scroll' }, h('table', {}, h('caption', { text: 'Calls waiting for an operator' }),
    h('thead', {}, h('tr', {}, ...['Id', 'Caller', 'Tool', 'Target', 'Runs', 'Risk', 'Expires', 'Decision'].map((c) => h('th', { scope: 'col', text: c })))), tbody)));
  const load = async () => {
    const list = await call<any[]>('GET', '/v1/approvals');
    const pending = (list ?? []).filter((a) => a.status === 'pending');
    tbody.replaceChildren(...pending.map((a) => {
      const rid = 'reason-' + a.id;
      const reason = h('input', { id: rid, name: 'reason', maxlength: '512' });
      const decide = (verb: 'approve' | 'deny') => void guarded(verb, async () => {
        await call('POST', `/v1/approvals/${encodeURIComponent(a.id)}/${verb}`, reason.value ? { note: reason.value } : {});
        say(`${verb === 'approve' ? 'Approved' : 'Denied'} ${visible(a.id)}`);
        await load();
      });
      return h('tr', {},
        h('td', {}, h('code', { text: visible(a.id) })), h('td', {}, h('code', { text: visible(a.actor) })), h('td', { text: visible(a.tool) }),
        h('td', { class: 'target', text: visible(a.target) }), h('td', {}, planOf(a)), h('td', { text: visible(a.risk) }), h('td', { text: visible(a.expires_at) }),
        h('td', {}, h('label', { for: rid, text: 'Reason' }), reason,
          h('button', { type: 'button', text: 'Approve', onclick: () => decide('approve') }),
          h('button', { type: 'button', class: 'danger', text: 'Deny', onclick: () => decide('deny') })));
    }));
    if (!pending.length) tbody.append(h('tr', {}, h('td', { colspan: '8', text: 'Nothing is waiting.' })));
  };
  await guarded('Approvals', load);
}

async function policyPage() {
  const pre = h('pre', { tabindex: '0', class: 'fileview', text: 'loading…' });
  page('Policy in force', h('p', { class: 'hint', text: 'Change it with PUT /v1/policy (see the README).' }), pre);
  await guarded('Policy', async () => {
    pre.textContent = visibleJSON(await call('GET', '/v1/policy'));
  });
}

async function controlPage() {
  const st = await call<{ halted: boolean; reason?: string; by?: string; since?: string }>('GET', '/v1/control').catch((e) => {
    say(e.message, true);
    return null;
  });
  const reason = h('input', { id: 'halt-reason', name: 'reason', required: true, maxlength: '512' });
  const confirmBox = h('input', { id: 'halt-confirm', name: 'confirm', type: 'checkbox', required: true });
  const haltForm = h('form', { class: 'card danger-zone', 'aria-label': 'HALT the server' },
    h('p', { text: 'HALT refuses every non-safe call, kills running commands and freezes every sandbox until unhalted.' }),
    h('div', { class: 'field' }, h('label', { for: 'halt-reason', text: 'Reason (shown in every refusal)' }), reason),
    h('div', { class: 'check' }, confirmBox, h('label', { for: 'halt-confirm', text: 'Yes, halt every sandbox now' })),
    h('button', { type: 'submit', class: 'danger', text: 'HALT' }));
  haltForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (!confirmBox.checked || !reason.value.trim()) {
      say('Give a reason and tick the confirmation', true);
      return;
    }
    void guarded('HALT', async () => {
      await call('POST', '/v1/control/halt', { reason: reason.value.trim() });
      say('Halted');
      await route();
    });
  });
  const unhalt = h('button', { type: 'button', text: 'Unhalt', onclick: () => void guarded('Unhalt', async () => {
    await call('POST', '/v1/control/unhalt');
    say('Unhalted');
    await route();
  }) });
  page('HALT',
    st?.halted
      ? h('div', { class: 'card' }, h('p', { class: 'bad', text: `Halted since ${visible(st.since ?? '')} by ${visible(st.by ?? '')}: ${visible(st.reason ?? '')}` }), unhalt)
      : haltForm);
}

async function keysPage() {
  const tbody = h('tbody');
  const shown = h('div', { 'aria-live': 'polite' });
  const name = h('input', { id: 'k-name', name: 'name', required: true, maxlength: '64' });
  const role = h('select', { id: 'k-role', name: 'role' }, h('option', { value: 'agent', text: 'agent' }), h('option', { value: 'viewer', text: 'viewer' }), h('option', { value: 'admin', text: 'admin' }));
  const form = h('form', { class: 'card grid', 'aria-label': 'Create a key' },
    h('div', { class: 'field' }, h('label', { for: 'k-name', text: 'Name' }), name),
    h('div', { class: 'field' }, h('label', { for: 'k-role', text: 'Role' }), role),
    h('button', { type: 'submit', text: 'Create key' }));
  const load = async () => {
    const keys = await call<any[]>('GET', '/v1/keys');
    tbody.replaceChildren(...keys.map((k) => h('tr', {},
      h('td', {}, h('code', { text: visible(k.id) })), h('td', { text: visible(k.name) }), h('td', { text: visible(k.role) }),
      h('td', { text: visible(k.created_at) }), h('td', { text: k.revoked_at ? `revoked ${visible(k.revoked_at)}` : 'active' }),
      h('td', {}, k.revoked_at || k.id === me?.key_id ? '' : h('button', { type: 'button', class: 'danger', text: 'Revoke', onclick: () => void guarded('Revoke', async () => {
        if (!confirm(`Revoke ${visible(k.name)}? Its sessions and terminals end at once.`)) return;
        await call('DELETE', `/v1/keys/${encodeURIComponent(k.id)}`);
        say(`Revoked ${visible(k.name)}`);
        await load();
      }) })))));
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void guarded('Create key', async () => {
      const k = await call<any>('POST', '/v1/keys', { name: name.value.trim(), role: role.value });
      const out = h('input', { id: 'new-key', readonly: true, value: k.key, 'aria-label': 'The new key', size: '50' });
      shown.replaceChildren(h('div', { class: 'card ok' },
        h('p', { text: `Key for ${visible(k.name)} — shown only this once; copy it now.` }), out,
        h('button', { type: 'button', text: 'Copy', onclick: () => void navigator.clipboard?.writeText(k.key).then(() => say('Copied')) }),
        h('button', { type: 'button', text: 'Done', onclick: () => shown.replaceChildren() })));
      out.focus();
      out.select();
      form.reset();
      await load();
    });
  });
  page('Keys', form, shown, h('div', { class: 'scroll' }, h('table', {}, h('caption', { text: 'API keys (secrets are never shown again)' }),
    h('thead', {}, h('tr', {}, ...['Id', 'Name', 'Role', 'Created', 'State', ''].map((c) => h('th', { scope: 'col', text: c })))), tbody)));
  await guarded('Keys', load);
}

// ---------------------------------------------------------------- start

async function start() {
  // #ticket=sht_… : a one-time ticket of scope console (minted with the
  // key, e.g. by a script that opens the console) signs in without the
  // key entering the browser. A fragment never reaches a server or a log;
  // it leaves the address bar at once.
  const m = /^#ticket=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (m) {
    history.replaceState(null, '', location.pathname + '#/sandboxes');
    try {
      const info = await call('POST', '/console/session', { ticket: m[1] });
      csrf = info.csrf_token;
      me = info;
    } catch {
      me = null;
    }
  }
  if (!me) {
    try {
      const info = await call('GET', '/console/session');
      csrf = info.csrf_token;
      me = info;
    } catch {
      me = null;
    }
  }
  window.addEventListener('hashchange', () => void route());
  await route();
}

void start();
