// The noVNC page of a sandbox: /sandboxes/{id}/vnc/index.html.
//
// It connects to /sandboxes/{id}/vnc/websockify with a one-time ticket:
// the one in the page's query (?ticket=…, from POST /v1/tickets), or, when
// the page is opened from the console, one it asks for with the console
// session. The ticket is removed from the address bar at once.
import RFB from '@novnc/novnc';

const status = document.getElementById('vnc-status')!;
const screen = document.getElementById('vnc-screen')!;

function say(s: string) {
  status.textContent = s;
}

function sandboxID(): string | null {
  const m = /^\/sandboxes\/([^/]+)\/vnc\/index\.html$/.exec(location.pathname);
  return m ? decodeURIComponent(m[1]) : null;
}

async function sessionTicket(): Promise<string> {
  const s = await fetch('/console/session', { credentials: 'same-origin' });
  if (!s.ok) throw new Error('no ticket in the address and not signed in to the console');
  const info = (await s.json()).data as { csrf_token: string };
  const t = await fetch('/v1/tickets', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'X-CSRF-Token': info.csrf_token, 'Content-Type': 'application/json' },
    body: JSON.stringify({ scope: 'vnc' }),
  });
  const body = await t.json();
  if (!t.ok || !body.success) throw new Error(body.message || 'could not get a ticket');
  return body.data.ticket as string;
}

async function main() {
  const id = sandboxID();
  if (!id) {
    say('Not a sandbox desktop address.');
    return;
  }
  const q = new URLSearchParams(location.search);
  let ticket = q.get('ticket');
  if (ticket) {
    q.delete('ticket');
    const rest = q.toString();
    history.replaceState(null, '', location.pathname + (rest ? '?' + rest : ''));
  }
  if (!ticket) ticket = await sessionTicket();
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const url = `${proto}//${location.host}/sandboxes/${encodeURIComponent(id)}/vnc/websockify?ticket=${encodeURIComponent(ticket)}`;
  // A VNC password, when the server sets one, is asked for (never taken
  // from the address, which browsers keep in their history).
  const rfb = new RFB(screen, url);
  rfb.scaleViewport = true;
  rfb.resizeSession = true;
  rfb.addEventListener('connect', () => say('Connected'));
  rfb.addEventListener('disconnect', (e: any) => say(e.detail?.clean ? 'Disconnected' : 'Connection lost (reload the page for a new ticket)'));
  rfb.addEventListener('credentialsrequired', () => {
    const p = window.prompt('VNC password');
    if (p !== null) rfb.sendCredentials({ password: p });
  });
  rfb.addEventListener('securityfailure', (e: any) => say('Refused: ' + (e.detail?.reason ?? 'security failure')));
  document.getElementById('vnc-ctrlaltdel')!.addEventListener('click', () => rfb.sendCtrlAltDel());
  (window as any).sandholdVNC = rfb;
}

main().catch((e) => say(String(e.message ?? e)));
