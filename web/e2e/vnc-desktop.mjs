// Opens a sandbox's noVNC page (/sandboxes/{id}/vnc/index.html) in the
// distribution's Chromium, through playwright-core, and takes screenshots
// for internal/console's TestNoVNCPageShowsTheDesktop, which decodes them:
//   BASE_URL=http://127.0.0.1:port SANDBOX=sb… KEY_A=shk_… KEY_B=shk_… CHROMIUM=/usr/bin/chromium \
//   OUT_DIR=dir COLOR=r,g,b node vnc-desktop.mjs
// KEY_A owns the sandbox, KEY_B is another agent. COLOR is the page the
// sandbox's browser shows; ONLY_DESKTOP=1 stops after the owner's desktop.
// Prints one "result: {json}" line per case and "PASS" at the end; the Go
// test judges the pixels.
import { chromium } from 'playwright-core';
import { join } from 'node:path';

const base = process.env.BASE_URL;
const sb = process.env.SANDBOX;
const out = process.env.OUT_DIR;
const color = (process.env.COLOR || '').split(',').map(Number);
if (!base || !sb || !out || !process.env.KEY_A || !process.env.KEY_B || color.length !== 3) {
  throw new Error('BASE_URL, SANDBOX, KEY_A, KEY_B, OUT_DIR and COLOR are required');
}
const timeout = 90_000;
const page = `${base}/sandboxes/${encodeURIComponent(sb)}/vnc/index.html`;

// ticket asks the server for a one-time ticket (30 s) with key.
async function ticket(key) {
  const r = await fetch(base + '/v1/tickets', { method: 'POST', headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' }, body: JSON.stringify({ scope: 'vnc' }) });
  const body = await r.json();
  if (!r.ok || !body.success) throw new Error('ticket: ' + r.status + ' ' + JSON.stringify(body));
  return body.data.ticket;
}

// share is the fraction of the canvas's pixels within 24 of rgb, from
// the canvas itself (sampled every 7th pixel).
function share([r, g, b]) {
  const c = document.querySelector('#vnc-screen canvas');
  if (!c || !c.width || !c.height) return 0;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  let all = 0;
  for (let i = 0; i < d.length; i += 4 * 7) {
    all++;
    if (Math.abs(d[i] - r) < 24 && Math.abs(d[i + 1] - g) < 24 && Math.abs(d[i + 2] - b) < 24) n++;
  }
  return n / all;
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});
const foreign = [];
async function open(name, url) {
  // A fresh context each time: no console session cookie, so only the
  // address's ticket can authenticate the page.
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 1024 } });
  const p = await ctx.newPage();
  p.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(base) && !u.startsWith(base.replace('http', 'ws'))) foreign.push(u);
  });
  p.on('pageerror', (e) => console.log(name + ': page error: ' + e.message));
  await p.goto(url);
  return { ctx, p };
}
const status = (p) => p.evaluate(() => document.getElementById('vnc-status')?.textContent ?? '');

try {
  // The owner's ticket: the page connects and the canvas shows the
  // sandbox's desktop, with the page its browser displays.
  {
    const { ctx, p } = await open('desktop', `${page}?ticket=${await ticket(process.env.KEY_A)}`);
    await p.waitForFunction(() => document.getElementById('vnc-status')?.textContent === 'Connected', null, { timeout });
    await p.waitForFunction(share, color, { timeout, polling: 500 });
    await p.screenshot({ path: join(out, 'vnc-desktop-page.png') });
    const box = await p.evaluate(() => {
      const r = (e) => { const b = e?.getBoundingClientRect(); return b ? [b.width, b.height] : null; };
      const c = document.querySelector('#vnc-screen canvas');
      return { main: r(document.getElementById('vnc-screen')), screen: r(c?.parentElement), canvas: r(c), backing: c ? [c.width, c.height] : null };
    });
    console.log('layout: ' + JSON.stringify(box));
    const canvas = p.locator('#vnc-screen canvas');
    await canvas.screenshot({ path: join(out, 'vnc-desktop.png'), timeout: 10_000 });
    console.log('result: ' + JSON.stringify({ name: 'desktop', status: await status(p), share: await p.evaluate(share, color) }));
    await ctx.close();
  }
  if (process.env.ONLY_DESKTOP) {
    console.log('PASS');
    process.exit(0);
  }
  // Without a valid ticket: no desktop. Each page must settle on a
  // status other than Connected; its screenshot is judged by the test.
  const used = await ticket(process.env.KEY_A);
  {
    // spend the ticket first
    const { ctx, p } = await open('spend', `${page}?ticket=${used}`);
    await p.waitForFunction(() => document.getElementById('vnc-status')?.textContent === 'Connected', null, { timeout });
    await ctx.close();
  }
  const bad = [
    ['no-ticket', page],
    ['bogus-ticket', `${page}?ticket=sht_${'A'.repeat(43)}`],
    ['used-ticket', `${page}?ticket=${used}`],
    ['other-key', `${page}?ticket=${await ticket(process.env.KEY_B)}`],
  ];
  for (const [name, url] of bad) {
    const { ctx, p } = await open(name, url);
    await p.waitForFunction(() => {
      const s = document.getElementById('vnc-status')?.textContent ?? '';
      return s !== '' && s !== 'Connecting…';
    }, null, { timeout });
    // A refused relay is reported at once; give a late frame the chance
    // to show up anyway before judging.
    await p.waitForTimeout(2000);
    await p.screenshot({ path: join(out, `vnc-${name}.png`) });
    console.log('result: ' + JSON.stringify({ name, status: await status(p), share: await p.evaluate(share, color) }));
    await ctx.close();
  }
  if (foreign.length) throw new Error('requests left the server: ' + foreign.join(', '));
  console.log('PASS');
} finally {
  await browser.close();
}
