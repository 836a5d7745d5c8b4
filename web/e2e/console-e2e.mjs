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
const shot = async (page, name) => page.screenshot({ path: join(out, name + '.png'), fullPage: true });

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

  // create a sandbox with limits
  const name = 'e2e-' + Date.now().toString(36);
  await page.getByLabel('Name', { exact: true }).fill(name);
  await page.getByLabel('Memory').fill('256MB');
  await page.getByLabel('Processes').fill('32');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  const row = page.locator('tr', { hasText: name });
  await row.waitFor();
  const sbID = await row.getAttribute('data-id');
  await page.waitForFunction((id) => {
    const r = document.querySelector(`tr[data-id="${id}"]`);
    // CPU from the cgroup, and the workspace's disk use against its quota.
    return r && /\d+ %/.test(r.textContent ?? '') && / of [\d.]+/.test(r.textContent ?? '');
  }, sbID);
  await shot(page, '02-sandboxes');
  ok('create sandbox ' + sbID + ' and see live figures');

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
  await page.getByLabel('Action (prefix)').fill('exec');
  await page.getByRole('button', { name: 'Filter' }).click();
  const cell = page.locator('td.target', { hasText: '\\x1b[2J\\u202eevil' }).first();
  await cell.waitFor();
  const raw = await cell.evaluate((td) => td.textContent);
  if (/[\u001b\u202e]/.test(raw)) throw new Error('raw control characters rendered: ' + JSON.stringify(raw));
  // a tab reads \t, a typed backslash-t \\t (issue 29: they read alike)
  if (!raw.includes("'tab\\there'") || !raw.includes("'typed\\\\there'")) throw new Error('tab and backslash-t not told apart: ' + JSON.stringify(raw));
  await shot(page, '05-audit');
  ok('audit: records, a verified chain, control characters escaped, a backslash doubled');

  await page.getByRole('link', { name: 'Approvals' }).click();
  await page.getByRole('heading', { level: 1, name: 'Approvals' }).waitFor();
  await page.locator('table tbody tr').first().waitFor();
  await shot(page, '06-approvals');
  await page.getByRole('link', { name: 'Policy' }).click();
  await page.locator('pre.fileview').filter({ hasNotText: 'loading' }).waitFor();
  await shot(page, '07-policy');
  ok('approvals and policy pages');

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
  await page.getByLabel('Name', { exact: true }).fill('refused-while-halted');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
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
    reached = await kp.evaluate(() => document.activeElement?.id === 'c-name');
  }
  if (!reached) throw new Error('the create form is not reachable with Tab');
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
  const pages = [['#/sandboxes', 'sandboxes'], [`#/sandboxes/${encodeURIComponent(sbID)}/files?path=/workspace`, 'files'], ['#/audit', 'audit'], ['#/control', 'halt'], ['#/keys', 'keys']];
  for (const [hash, nm] of pages) {
    await mp.goto(base + '/' + hash);
    await mp.locator('h1').first().waitFor();
    await mp.waitForTimeout(300);
    const wide = await mp.evaluate(() => document.documentElement.scrollWidth);
    if (wide > 375) throw new Error(`${nm} at 375 px scrolls sideways (${wide} px wide)`);
    await shot(mp, '14-mobile-' + nm);
  }
  ok('375 px: no sideways scrolling on sandboxes, files, audit, halt, keys');
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
