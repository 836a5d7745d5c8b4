// The terminal page: xterm.js over the shell WebSocket, opened with a
// one-time ticket (a WebSocket cannot send the CSRF header).
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { visible } from './visible';
import { call, h, onLeave, page } from './ui';

async function ticket(): Promise<string> {
  const t = await call<{ ticket: string }>('POST', '/v1/tickets', { scope: 'terminal' });
  return t.ticket;
}

export function terminalPage(id: string) {
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
  onLeave(() => {
    closed = true;
    window.clearTimeout(retryTimer);
    window.removeEventListener('resize', onResize);
    ws?.close();
    term.dispose();
  });
  (window as any).sandholdTerm = term;
  void connect().then(() => term.focus());
}
