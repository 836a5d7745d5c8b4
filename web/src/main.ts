// sandhold's web console: the navigation, sign-in and the router. The
// pages live beside it (sandboxes.ts, templates.ts, terminal.ts, files.ts,
// audit.ts, admin.ts) and share ui.ts. Every text from the server goes
// through textContent (never innerHTML) and, where it is data an agent
// controls (audit records, names, file names, messages), through
// visible(), the same escaping as the server's audit.Visible.
import { visible } from './visible';
import { call, guarded, h, isAdmin, page, say, session, setRouter, type Me } from './ui';
import { sandboxesPage } from './sandboxes';
import { templatesPage } from './templates';
import { terminalPage } from './terminal';
import { filesPage } from './files';
import { approvalsPage, auditPage } from './audit';
import { controlPage, keysPage, policyPage } from './admin';

function nav() {
  const top = document.getElementById('top')!;
  top.replaceChildren();
  const me = session.me;
  if (!me) {
    top.append(h('span', { class: 'brand', text: 'sandhold' }));
    return;
  }
  const links: [string, string][] = [['#/sandboxes', 'Sandboxes'], ['#/templates', 'Templates']];
  if (isAdmin()) links.push(['#/audit', 'Audit'], ['#/approvals', 'Approvals'], ['#/policy', 'Policy'], ['#/control', 'HALT'], ['#/keys', 'Keys']);
  else if (me.role === 'viewer') links.push(['#/audit', 'Audit']);
  const cur = location.hash.split('?')[0] || '#/sandboxes';
  top.append(
    h('span', { class: 'brand', text: 'sandhold' }),
    h('nav', { 'aria-label': 'Main' },
      h('ul', {}, ...links.map(([href, label]) => h('li', {}, h('a', { href, text: label, 'aria-current': cur.startsWith(href) ? 'page' : undefined }))),
        h('li', {}, h('a', { href: '/docs', text: 'API docs', target: '_blank', rel: 'noopener' })))),
    h('span', { class: 'who', text: `${visible(me.key_name)} (${me.role})` }),
    h('button', { type: 'button', onclick: () => void signOut(), text: 'Sign out' }),
  );
}

async function haltBanner() {
  const b = document.getElementById('halt-banner')!;
  if (!session.me) {
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

export async function route() {
  nav();
  if (!session.me) {
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
    case 'templates':
      return templatesPage();
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
      return sandboxesPage({ template: q.get('template') ?? undefined });
  }
}

// ---------------------------------------------------------------- sign in

function signedIn(info: Me & { csrf_token: string }) {
  session.csrf = info.csrf_token;
  session.me = info;
}

function signInPage() {
  const key = h('input', { id: 'key', name: 'key', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const form = h('form', { class: 'card signin', 'aria-labelledby': 'signin-h' },
    h('label', { for: 'key', text: 'API key' }), key,
    h('p', { class: 'hint', text: 'The key is exchanged for a session cookie; the browser does not keep it.' }),
    h('button', { type: 'submit', text: 'Sign in' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const k = key.value;
    key.value = '';
    void guarded('Sign in', async () => {
      signedIn(await call('POST', '/console/session', { key: k }));
      location.hash = '#/sandboxes';
      await route();
      say('Signed in');
    });
  });
  page('Sign in', form);
  document.querySelector('#main h1')?.setAttribute('id', 'signin-h');
  key.focus();
}

async function signOut() {
  await guarded('Sign out', async () => {
    await call('DELETE', '/console/session');
  });
  session.me = null;
  session.csrf = '';
  document.getElementById('halt-banner')!.hidden = true;
  await route();
  say('Signed out');
}

// ---------------------------------------------------------------- start

async function start() {
  setRouter(route);
  // #ticket=sht_… : a one-time ticket of scope console (minted with the
  // key, e.g. by a script that opens the console) signs in without the
  // key entering the browser. A fragment never reaches a server or a log;
  // it leaves the address bar at once.
  const m = /^#ticket=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (m) {
    history.replaceState(null, '', location.pathname + '#/sandboxes');
    try {
      signedIn(await call('POST', '/console/session', { ticket: m[1] }));
    } catch {
      session.me = null;
    }
  }
  if (!session.me) {
    try {
      signedIn(await call('GET', '/console/session'));
    } catch {
      session.me = null;
    }
  }
  window.addEventListener('hashchange', () => void route());
  await route();
}

void start();
