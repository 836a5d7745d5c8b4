// Shared pieces of the console: element building, the API call, the
// session's state, page switching, the drawer and form errors. Every text
// from the server goes through textContent (never innerHTML) and, where
// it is data an agent controls, through visible().
import { visible } from './visible';

export type Attrs = Record<string, string | boolean | number | EventListener | undefined>;
export type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...kids: Child[]): HTMLElementTagNameMap[K] {
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
export function visibleJSON(v: unknown): string {
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

// bytes in binary units (MiB, GiB), the CLI's family.
export function bytes(n: number | undefined | null): string {
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

// ago is a short relative time ("3 min", "2 h", "in 5 min").
export function ago(t: string | number | Date | undefined | null, now = Date.now()): string {
  if (!t) return '–';
  const ms = new Date(t).getTime();
  if (!Number.isFinite(ms) || ms <= 0) return '–';
  const d = now - ms;
  const a = Math.abs(d) / 1000;
  const s = a < 60 ? `${Math.round(a)} s` : a < 3600 ? `${Math.round(a / 60)} min` : a < 86400 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return d >= 0 ? s : `in ${s}`;
}

// duration parses Go's duration syntax as the server takes it (2h, 90m,
// 1h30m, 45s); NaN when it is not one.
export function duration(s: string): number {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/y;
  const unit: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1e3, m: 6e4, h: 3.6e6 };
  let ms = 0;
  re.lastIndex = 0;
  let m: RegExpExecArray | null;
  let end = 0;
  while ((m = re.exec(s))) {
    ms += Number(m[1]) * unit[m[2]];
    end = re.lastIndex;
  }
  return s && end === s.length ? ms : NaN;
}

export function say(msg: string, bad = false) {
  const s = document.getElementById('status')!;
  s.textContent = visible(msg);
  s.className = 'status' + (bad ? ' bad' : '');
}

// ---------------------------------------------------------------- API

export class APIError extends Error {
  constructor(
    public status: number,
    message: string,
    public code = '',
    public field = '',
  ) {
    super(message);
  }
}

export interface Me {
  key_id: string;
  key_name: string;
  role: string;
  content?: string;
}

// The session's state: the CSRF token lives in memory only.
export const session: { csrf: string; me: Me | null } = { csrf: '', me: null };

// The router (main.ts) is set once; pages ask it to draw the page again
// (after HALT, sign-out, a lost session).
let router: () => unknown = () => {};
export function setRouter(fn: () => unknown) {
  router = fn;
}
export async function reroute() {
  await router();
}

export const isAdmin = () => session.me?.role === 'admin';
export const canWrite = () => !!session.me && session.me.role !== 'viewer';

export async function call<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = session.csrf;
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
    session.me = null;
    session.csrf = '';
    void reroute();
  }
  if (r.status === 202) {
    throw new APIError(202, `waiting for an operator's approval (${visible(env?.data?.approval_id ?? env?.data?.id ?? '')})`, 'approval');
  }
  if (!r.ok || !env || env.success === false) {
    throw new APIError(r.status, env?.message ?? `HTTP ${r.status}`, env?.data?.code ?? '', fieldOf(env));
  }
  return env.data as T;
}

// fieldOf is the request field an error names: huma's validation errors
// carry a location (body.limits.memory), the server's own a field.
function fieldOf(env: any): string {
  const d = env?.data;
  const loc = d?.field ?? d?.errors?.[0]?.location ?? '';
  return String(loc).replace(/^body\./, '');
}

// upload sends body with XMLHttpRequest (fetch reports no upload
// progress), showing progress in bar; it answers the envelope's data or
// throws an APIError like call().
export function upload<T = any>(url: string, body: XMLHttpRequestBodyInit, bar: HTMLProgressElement, contentType = ''): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', url);
    xhr.setRequestHeader('X-CSRF-Token', session.csrf);
    if (contentType) xhr.setRequestHeader('Content-Type', contentType);
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) bar.value = Math.round((e.loaded / e.total) * 100);
    };
    xhr.onload = () => {
      let env: any = null;
      try {
        env = JSON.parse(xhr.responseText);
      } catch {
        /* not JSON */
      }
      if (xhr.status >= 200 && xhr.status < 300 && env?.success !== false) {
        bar.value = 100;
        resolve(env?.data as T);
      } else reject(new APIError(xhr.status, env?.message ?? `HTTP ${xhr.status}`, env?.data?.code ?? '', fieldOf(env)));
    };
    xhr.onerror = () => reject(new APIError(0, 'connection failed'));
    bar.value = 0;
    xhr.send(body);
  });
}

export async function guarded(what: string, fn: () => Promise<unknown>) {
  try {
    await fn();
  } catch (e: any) {
    say(`${what}: ${e.message}`, true);
  }
}

// ---------------------------------------------------------------- pages

let cleanup: (() => void)[] = [];
export function onLeave(fn: () => void) {
  cleanup.push(fn);
}

export function page(title: string, ...kids: Child[]) {
  for (const f of cleanup) f();
  cleanup = [];
  closeDrawer();
  const main = document.getElementById('main')!;
  main.replaceChildren(h('h1', { tabindex: '-1', text: title }), ...kids.filter((k): k is Node | string => k !== null && k !== undefined && k !== false));
  document.title = `${title} — sandhold`;
  (main.querySelector('h1') as HTMLElement).focus();
}

// ---------------------------------------------------------------- drawer

let drawerReturn: HTMLElement | null = null;

// openDrawer shows a panel at the side (a dialog): the page stays in
// view, Escape or Close ends it and the focus returns where it was.
export function openDrawer(title: string, ...kids: Child[]): HTMLElement {
  closeDrawer();
  drawerReturn = document.activeElement as HTMLElement | null;
  const close = h('button', { type: 'button', class: 'secondary', text: 'Close', onclick: () => closeDrawer() });
  const panel = h('aside', { class: 'drawer', id: 'drawer', role: 'dialog', 'aria-modal': 'false', 'aria-labelledby': 'drawer-h' },
    h('div', { class: 'drawer-head' }, h('h2', { id: 'drawer-h', tabindex: '-1', text: title }), close), ...kids);
  panel.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') closeDrawer();
  });
  document.body.append(panel);
  ((panel.querySelector('input, select, textarea') ?? panel.querySelector('h2')) as HTMLElement).focus();
  return panel;
}

export function closeDrawer() {
  const d = document.getElementById('drawer');
  if (!d) return;
  d.remove();
  drawerReturn?.focus?.();
  drawerReturn = null;
}

// ---------------------------------------------------------------- forms

// field is a labelled input with a place for its error right under it
// (aria-describedby), so an error shows at the field, not at the bottom.
export function field(id: string, label: string, input: HTMLElement, hint = ''): HTMLElement {
  const err = h('p', { class: 'field-error', id: id + '-err', hidden: true });
  const kids: Child[] = [h('label', { for: id, text: label }), input];
  if (hint) kids.push(h('p', { class: 'hint', id: id + '-hint', text: hint }));
  kids.push(err);
  input.setAttribute('aria-describedby', [hint ? id + '-hint' : '', id + '-err'].filter(Boolean).join(' '));
  return h('div', { class: 'field', 'data-field': id }, ...kids);
}

export function clearErrors(form: HTMLElement) {
  for (const e of form.querySelectorAll<HTMLElement>('.field-error')) {
    e.hidden = true;
    e.textContent = '';
  }
  for (const i of form.querySelectorAll('[aria-invalid]')) i.removeAttribute('aria-invalid');
  form.querySelector('.form-error')?.remove();
}

// showError puts msg at the input with id (or, without one, at the top of
// the form), marks it invalid, scrolls it into view and focuses it.
export function showError(form: HTMLElement, id: string | null, msg: string) {
  const input = id ? (form.querySelector('#' + id) as HTMLElement | null) : null;
  const err = id ? (form.querySelector('#' + id + '-err') as HTMLElement | null) : null;
  if (input && err) {
    err.textContent = visible(msg);
    err.hidden = false;
    input.setAttribute('aria-invalid', 'true');
    input.scrollIntoView({ block: 'center' });
    input.focus();
    return;
  }
  const top = h('p', { class: 'form-error', role: 'alert', text: visible(msg) });
  form.prepend(top);
  top.scrollIntoView({ block: 'nearest' });
}
