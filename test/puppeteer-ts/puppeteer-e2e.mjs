// Drives a sandbox's browser through sandhold's DevTools relay with
// Puppeteer (puppeteer-core's connect), the two ways the README documents:
// browserWSEndpoint (the webSocketDebuggerUrl that /json/version answers
// through the relay) with the key header, and the same endpoint with a
// one-time ticket from POST /v1/tickets and no header. Each opens the page
// served inside the sandbox and reads its title. Refused: no credential, a
// forged key, a forged ticket, a ticket used twice.
//
// Run by internal/daemon's TestPuppeteerOverTheCDPRelay with SANDHOLD_URL,
// SANDHOLD_SANDBOX, SANDHOLD_KEY and SANDHOLD_PAGE (a URL the sandbox's own
// browser loads: a server on the sandbox's loopback) set; prints one JSON
// line and exits 0 when every check held.
import puppeteer from "puppeteer-core";

const base = process.env.SANDHOLD_URL;
const sandbox = process.env.SANDHOLD_SANDBOX;
const key = process.env.SANDHOLD_KEY;
const pageURL = process.env.SANDHOLD_PAGE;
if (!base || !sandbox || !key || !pageURL) {
  console.error("set SANDHOLD_URL, SANDHOLD_SANDBOX, SANDHOLD_KEY and SANDHOLD_PAGE");
  process.exit(2);
}
const cdp = `${base}/sandboxes/${sandbox}/cdp`;
const out = {};

// refused reports how a connect that must fail ended: "refused" when the
// server answered the WebSocket upgrade 401, "connected" or the error
// (failures of the test) otherwise.
async function refused(options) {
  try {
    const b = await puppeteer.connect({ ...options, protocolTimeout: 20000 });
    await b.disconnect();
    return "connected";
  } catch (e) {
    const msg = String(e?.message ?? e);
    return /\b401\b/.test(msg) ? "refused" : `failed otherwise: ${msg}`;
  }
}

// title opens pageURL in a new tab of browser and reads its title and
// the text of its #msg; the tab is closed, the browser left running.
async function title(browser) {
  const page = await browser.newPage();
  try {
    await page.goto(pageURL, { waitUntil: "load", timeout: 60000 });
    return { title: await page.title(), msg: await page.$eval("#msg", (e) => e.textContent) };
  } finally {
    await page.close();
  }
}

// The endpoint: /json/version through the relay, with the key.
const version = await fetch(`${cdp}/json/version`, { headers: { "X-API-Key": key } });
const ws = (await version.json()).webSocketDebuggerUrl ?? "";
out.endpoint = ws.startsWith(cdp.replace(/^http/, "ws") + "/devtools/browser/") ? "relayed" : ws;
out.versionWithoutKey = (await fetch(`${cdp}/json/version`)).status;

// Refusals, before any good connect.
out.withoutCredential = await refused({ browserWSEndpoint: ws });
out.forgedKey = await refused({ browserWSEndpoint: ws, headers: { "X-API-Key": "shk_" + "A".repeat(43) } });
out.forgedTicket = await refused({ browserWSEndpoint: `${ws}?ticket=sht_${"B".repeat(43)}` });

// With the key header.
{
  const browser = await puppeteer.connect({ browserWSEndpoint: ws, headers: { "X-API-Key": key } });
  out.withKey = await title(browser);
  await browser.disconnect();
}

// With a one-time ticket, no header; the ticket is used up.
{
  const t = await fetch(`${base}/v1/tickets`, { method: "POST", headers: { "X-API-Key": key, "Content-Type": "application/json" }, body: JSON.stringify({ scope: "cdp" }) });
  const ticket = (await t.json()).data?.ticket ?? "";
  const endpoint = `${ws}?ticket=${encodeURIComponent(ticket)}`;
  const browser = await puppeteer.connect({ browserWSEndpoint: endpoint });
  out.withTicket = await title(browser);
  await browser.disconnect();
  out.ticketAgain = await refused({ browserWSEndpoint: endpoint });
}

console.log(JSON.stringify(out));
const ok =
  out.endpoint === "relayed" &&
  out.versionWithoutKey === 401 &&
  out.withoutCredential === "refused" &&
  out.forgedKey === "refused" &&
  out.forgedTicket === "refused" &&
  out.ticketAgain === "refused" &&
  out.withKey?.title === "served inside" &&
  out.withKey?.msg === "hello from the sandbox" &&
  out.withTicket?.title === "served inside";
process.exit(ok ? 0 : 1);
