// The noVNC page of a sandbox: /sandboxes/{id}/vnc/index.html.
//
// It connects to the relay beside it (/sandboxes/{id}/vnc/websockify, or
// /websockify on the content host 5900-{id}.<domain>) with a one-time
// ticket of scope vnc: the one in the page's query (?ticket=…, from POST
// /v1/tickets), or, when the page is opened from the console, one it asks
// for with the console session — and when the server has a sandbox-content
// origin, it then moves to its page there. The ticket is removed from the
// address bar at once.
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

interface Session {
  csrf_token: string;
  content?: { host?: string; listener?: string };
}

// session is the console's session, when this page is on the console's
// origin and signed in (null elsewhere: the content origin has none).
async function session(): Promise<Session | null> {
  try {
    const s = await fetch('/console/session', { credentials: 'same-origin' });
    if (!s.ok) return null;
    return (await s.json()).data as Session;
  } catch {
    return null;
  }
}

async function sessionTicket(s: Session): Promise<string> {
  const t = await fetch('/v1/tickets', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'X-CSRF-Token': s.csrf_token, 'Content-Type': 'application/json' },
    body: JSON.stringify({ scope: 'vnc' }),
  });
  const body = await t.json();
  if (!t.ok || !body.success) throw new Error(body.message || 'could not get a ticket');
  return body.data.ticket as string;
}

// contentPage is this desktop's page on the sandbox-content origin, when
// the server has one: the desktop is what the sandbox controls, so it is
// shown there, never on the console's origin.
function contentPage(s: Session, id: string): string | null {
  if (s.content?.host) return s.content.host.replace('{port}', '5900').replace('{id}', encodeURIComponent(id)) + '/index.html';
  if (s.content?.listener) return `${s.content.listener}/sandboxes/${encodeURIComponent(id)}/vnc/index.html`;
  return null;
}

async function main() {
  const q = new URLSearchParams(location.search);
  let ticket = q.get('ticket');
  if (ticket) {
    q.delete('ticket');
    const rest = q.toString();
    history.replaceState(null, '', location.pathname + (rest ? '?' + rest : ''));
  }
  if (!ticket) {
    const id = sandboxID();
    const s = await session();
    if (!id || !s) {
      say('No ticket in the address: open the desktop from the console.');
      return;
    }
    ticket = await sessionTicket(s);
    const there = contentPage(s, id);
    if (there) {
      location.replace(`${there}?ticket=${encodeURIComponent(ticket)}`);
      return;
    }
  }
  // The relay beside this page: /sandboxes/{id}/vnc/websockify on a path
  // form, /websockify on the content host 5900-{id}.
  const ws = new URL('websockify', location.href);
  ws.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  ws.search = `?ticket=${encodeURIComponent(ticket)}`;
  ws.hash = '';
  const url = ws.toString();
  // A VNC password, when the server sets one, is asked for (never taken
  // from the address, which browsers keep in their history).
  const rfb = new RFB(screen, url);
  rfb.scaleViewport = true;
  rfb.resizeSession = true;
  rfb.addEventListener('connect', () => say('Connected'));
  rfb.addEventListener('disconnect', (e: any) => say(e.detail?.clean ? 'Disconnected' : 'Connection lost (open the desktop again from the console for a new ticket)'));
  rfb.addEventListener('credentialsrequired', () => {
    const p = window.prompt('VNC password');
    if (p !== null) rfb.sendCredentials({ password: p });
  });
  rfb.addEventListener('securityfailure', (e: any) => say('Refused: ' + (e.detail?.reason ?? 'security failure')));
  document.getElementById('vnc-ctrlaltdel')!.addEventListener('click', () => rfb.sendCtrlAltDel());
  (window as any).sandholdVNC = rfb;
}

main().catch((e) => say(String(e.message ?? e)));
