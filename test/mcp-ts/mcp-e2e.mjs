// sandhold's /mcp driven by the official TypeScript MCP SDK.
//
//   MCP_TEST_KEY=<agent key> node mcp-e2e.mjs http://127.0.0.1:8080
//
// Connects over streamable HTTP with the key (and is refused without it),
// lists tools, runs sandbox_execute_bash, sees a tool error, and — when the
// server has POST /v1/tools/custom — defines a custom tool and waits for
// notifications/tools/list_changed to list it. Prints one line per step;
// exits non-zero on the first failure. internal/mcp's Go tests run it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const base = process.argv[2];
const key = process.env.MCP_TEST_KEY;
if (!base || !key) {
  console.error("usage: MCP_TEST_KEY=<key> node mcp-e2e.mjs <server base URL>");
  process.exit(2);
}
const endpoint = new URL("/mcp", base);

function fail(msg) {
  throw new Error(msg);
}

function text(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function connect(apiKey) {
  const headers = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
  const client = new Client({ name: "sandhold-ts-e2e", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(endpoint, { requestInit: { headers } });
  await withTimeout(client.connect(transport), 30000, "connect");
  return client;
}

async function main() {
  // 1. No key: refused.
  let refused = false;
  try {
    const c = await connect(undefined);
    await c.close();
  } catch (err) {
    refused = /401|Unauthorized|authentication/i.test(String(err?.message ?? err));
    if (!refused) fail(`connect without a key failed, but not with 401: ${err}`);
  }
  if (!refused) fail("connected without a key");
  console.log("ok: refused without a key");

  // 2. With the key: connect, list tools.
  const client = await connect(key);
  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    changed++;
  });
  const names = async () => (await client.listTools()).tools.map((t) => t.name);
  const tools = await names();
  for (const want of ["sandbox_execute_bash", "sandbox_get_context", "exec_run", "sandbox_create"]) {
    if (!tools.includes(want)) fail(`${want} not listed: ${tools.join(", ")}`);
  }
  if (tools.some((n) => n.includes("."))) fail(`a tool name has a dot: ${tools.join(", ")}`);
  console.log(`ok: ${tools.length} tools listed`);

  // 3. sandbox_execute_bash.
  const res = await withTimeout(
    client.callTool({ name: "sandbox_execute_bash", arguments: { cmd: "echo hi", timeout: 300 } }),
    330000,
    "sandbox_execute_bash",
  );
  const out = JSON.parse(text(res));
  if (res.isError || out.output.trim() !== "hi" || out.exit_code !== 0) {
    fail(`sandbox_execute_bash: ${text(res)}`);
  }
  console.log("ok: sandbox_execute_bash echo hi -> hi");

  // 4. A bad call is a tool error, not a protocol error.
  const bad = await client.callTool({ name: "sandbox_execute_bash", arguments: {} });
  if (!bad.isError || !/cmd/.test(text(bad))) fail(`bad call: ${JSON.stringify(bad)}`);
  console.log(`ok: tool error: ${text(bad)}`);

  // 5. A custom tool appears after tools/list_changed.
  const name = `ts_probe_${process.pid}`;
  const def = await fetch(new URL("/v1/tools/custom", base), {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      name,
      description: "say hello from a custom tool",
      inputSchema: { type: "object", properties: {} },
      call: { tool: "exec.run", arguments: { command: "echo from-custom" } },
    }),
  });
  if (def.status === 404 || def.status === 405) {
    console.log(`skip: custom tools: POST /v1/tools/custom answered ${def.status} (route not on this server)`);
  } else {
    if (def.status !== 201 && def.status !== 200) fail(`define custom tool: ${def.status} ${await def.text()}`);
    const deadline = Date.now() + 20000;
    // Custom tools have their own namespace in MCP: custom_<name>.
    const mcpName = `custom_${name}`;
    while (changed === 0 || !(await names()).includes(mcpName)) {
      if (Date.now() > deadline) fail(`custom tool not listed after list_changed (notifications: ${changed})`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const cr = await withTimeout(client.callTool({ name: mcpName, arguments: {} }), 330000, "custom tool");
    if (cr.isError || !text(cr).includes("from-custom")) fail(`custom tool call: ${text(cr)}`);
    console.log(`ok: custom tool ${name} listed as ${mcpName} after ${changed} list_changed notification(s) and called`);
    await fetch(new URL(`/v1/tools/custom/${name}`, base), {
      method: "DELETE",
      headers: { Authorization: `Bearer ${key}` },
    });
  }
  await client.close();
  console.log("PASS");
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`FAIL: ${err?.stack ?? err}`);
    process.exit(1);
  },
);
