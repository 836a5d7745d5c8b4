// Drives a sandbox's browser through sandhold's DevTools relay with
// Playwright's connectOverCDP, as an agent would: the cdp_url plus the key
// header. Run by internal/daemon's TestPlaywrightOverTheCDPRelay with
// SANDHOLD_CDP_URL and SANDHOLD_KEY set; prints one JSON line and exits 0
// when every check held: the default context's page, then a new context's
// (newContext → newPage → goto → evaluate).
import { chromium } from "playwright-core";

const url = process.env.SANDHOLD_CDP_URL;
const key = process.env.SANDHOLD_KEY;
if (!url || !key) {
  console.error("set SANDHOLD_CDP_URL and SANDHOLD_KEY");
  process.exit(2);
}

const out = {};

// Without the key: refused.
try {
  const b = await chromium.connectOverCDP(url, { timeout: 20000 });
  await b.close();
  out.withoutKey = "connected";
} catch (e) {
  out.withoutKey = "refused";
}

const browser = await chromium.connectOverCDP(url, { headers: { "X-API-Key": key }, timeout: 60000 });
const context = browser.contexts()[0] ?? (await browser.newContext());
const page = await context.newPage();
const form = `<!doctype html><title>form</title>
<input id="name"><button id="go" onclick="document.getElementById('out').textContent='hello '+document.getElementById('name').value">go</button>
<p id="out"></p>`;
await page.goto("data:text/html," + encodeURIComponent(form));
await page.fill("#name", "sandhold");
await page.click("#go");
out.text = await page.textContent("#out");
out.title = await page.title();
out.userAgent = await page.evaluate(() => navigator.userAgent);
await page.close();

// A context of its own, as Playwright's own examples do: with the browser
// run --single-process, newPage() in a new context closed the browser.
const own = await browser.newContext({ viewport: { width: 800, height: 600 } });
const p2 = await own.newPage();
await p2.goto("data:text/html," + encodeURIComponent("<!doctype html><title>second</title><p id=x>2</p>"));
out.newContext = await p2.evaluate(() => document.title + ":" + document.getElementById("x").textContent + ":" + innerWidth);
await own.close();
await browser.close();

console.log(JSON.stringify(out));
process.exit(out.withoutKey === "refused" && out.text === "hello sandhold" && out.newContext === "second:2:800" ? 0 : 1);
