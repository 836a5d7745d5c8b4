// An operator signed in to the web console opens links to content an
// attacker's sandbox serves (issue 29, row 1): a fake DevTools server on
// the sandbox's 127.0.0.1:9222 and a page on a preview port, both serving
// HTML whose script reads /console/session's CSRF token and POSTs
// /v1/keys {"role":"admin"}. Run by internal/console's
// TestSignedInOperatorOpeningSandboxContentCreatesNoKey with
//   SANDHOLD_BASE=http://127.0.0.1:port SANDHOLD_ADMIN_KEY=shk_… SANDHOLD_LINKS='["http://…", …]' CHROMIUM=/usr/bin/chromium
// A link's TICKET(scope) is replaced, just before it is opened, by a ticket
// of that scope minted with SANDHOLD_AGENT_KEY (the attacker's own key): a
// ticket lives 30 s, and on a loaded machine the links before it take longer.
// Prints one JSON line: per link the final URL, status and what the page's
// script reported ("attack:…" in the title, or nothing when no script of
// the sandbox's ran), and the keys before and after. Exits 0 when it ran.
import { chromium } from "playwright-core";

const base = process.env.SANDHOLD_BASE;
const key = process.env.SANDHOLD_ADMIN_KEY;
const links = JSON.parse(process.env.SANDHOLD_LINKS || "[]");
if (!base || !key || links.length === 0) {
  console.error("set SANDHOLD_BASE, SANDHOLD_ADMIN_KEY and SANDHOLD_LINKS");
  process.exit(2);
}
const timeout = 30_000;

const agentKey = process.env.SANDHOLD_AGENT_KEY || "";
const withTicket = async (link) => {
  const m = link.match(/TICKET\((\w+)\)/);
  if (!m) return link;
  const r = await fetch(base + "/v1/tickets", {
    method: "POST",
    headers: { Authorization: "Bearer " + agentKey, "Content-Type": "application/json" },
    body: JSON.stringify({ scope: m[1] }),
  });
  if (r.status !== 201) {
    console.error("minting a " + m[1] + " ticket answered " + r.status);
    process.exit(1);
  }
  return link.replace(m[0], encodeURIComponent((await r.json()).data.ticket));
};

const keys = async () => {
  const r = await fetch(base + "/v1/keys", { headers: { "X-API-Key": key } });
  return (await r.json()).data.map((k) => k.name);
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
});
const context = await browser.newContext();
const console_ = await context.newPage();
// Signed in as the operator: the session cookie is in this browser, the
// key is not.
await console_.goto(base + "/");
const signedIn = await console_.evaluate(async (k) => {
  const r = await fetch("/console/session", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ key: k }) });
  return r.status;
}, key);
if (signedIn !== 200) {
  console.error("sign-in answered " + signedIn);
  process.exit(1);
}
const before = await keys();

const results = [];
for (const link of links) {
  const page = await context.newPage();
  let status = 0;
  try {
    const resp = await page.goto(await withTicket(link), { waitUntil: "load", timeout });
    status = resp ? resp.status() : 0;
  } catch (e) {
    status = "error: " + e.message.split("\n")[0];
  }
  // The attacker's script says when it is done (its title); a page where
  // no script of the sandbox's runs (a refusal, JSON) is done at load.
  await page
    .waitForFunction(() => document.title.startsWith("attack:") || !document.querySelector("script[data-attack]"), null, { timeout })
    .catch(() => {});
  const title = await page.title().catch(() => "");
  const body = await page.evaluate(() => document.body?.innerText?.slice(0, 200) ?? "").catch(() => "");
  results.push({ link, url: page.url(), status, title, body });
  await page.close();
}
// SANDHOLD_DESKTOP: the console's Desktop link (the noVNC page on the
// console's origin) — it mints a vnc ticket with the session and moves to
// the content origin, where the desktop connects.
let desktop = null;
if (process.env.SANDHOLD_DESKTOP) {
  const page = await context.newPage();
  await page.goto(process.env.SANDHOLD_DESKTOP, { waitUntil: "load", timeout });
  const status = await page
    .waitForFunction(() => (document.getElementById("vnc-status")?.textContent === "Connected" ? "Connected" : null), null, { timeout: 150_000 })
    .then((h) => h.jsonValue())
    .catch(async () => "not connected: " + (await page.evaluate(() => document.getElementById("vnc-status")?.textContent).catch(() => "?")));
  desktop = { url: page.url(), status };
  await page.close();
}
// The console's own session still works (the links did not end it).
const still = await console_.evaluate(async () => (await fetch("/console/session")).status);
const after = await keys();
await browser.close();
console.log(JSON.stringify({ before, after, still, results, desktop }));
