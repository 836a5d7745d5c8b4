// Drives a running sandhold server with a client generated from AIO
// Sandbox's OpenAPI document (openapi-typescript types + openapi-fetch),
// the way an AIO user's TypeScript code would. Type-checked with tsc
// against the generated types, so a call that AIO's spec does not allow
// fails the build. Env: SANDHOLD_URL, SANDHOLD_KEY, SANDHOLD_SANDBOX (a
// sandbox id, also reached at /sandboxes/{id}). Prints one line per check;
// exits 1 on the first failure.
import createClient from "openapi-fetch";
import type { paths } from "./generated/aio.js";

declare const process: { env: Record<string, string | undefined>; exit(code: number): never };

const base = process.env.SANDHOLD_URL ?? "";
const key = process.env.SANDHOLD_KEY ?? "";
const sandbox = process.env.SANDHOLD_SANDBOX ?? "";
if (!base || !key || !sandbox) {
  console.error("SANDHOLD_URL, SANDHOLD_KEY and SANDHOLD_SANDBOX are required");
  process.exit(2);
}

function check(name: string, ok: boolean, detail: unknown): void {
  if (!ok) {
    console.error(`FAIL ${name}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok ${name}`);
}

const headers = { "X-AIO-API-Key": key };
const client = createClient<paths>({ baseUrl: base, headers });
// The same SDK pointed at a given sandbox: base_url = host/sandboxes/{id}.
const scoped = createClient<paths>({ baseUrl: `${base}/sandboxes/${sandbox}`, headers });

function resultText(outputs: { [key: string]: unknown }[] | undefined): string | undefined {
  for (const o of outputs ?? []) {
    if (o.output_type === "execute_result") {
      return (o.data as Record<string, string>)["text/plain"];
    }
  }
  return undefined;
}

async function main(): Promise<void> {
  {
    const { data, response } = await client.GET("/v1/code/info");
    check("code/info", response.status === 200 && !!data?.data?.languages.some((l) => l.language === "python"), data);
  }
  {
    const { data, response } = await client.POST("/v1/code/execute", {
      body: { language: "python", code: "import sys\nprint('hello')\nsys.version_info[0] * 14" },
    });
    const d = data?.data;
    check("code/execute python", response.status === 200 && d?.status === "ok" && d?.stdout === "hello\n" && resultText(d?.outputs) === "42", data);
  }
  {
    const first = await scoped.POST("/v1/code/execute", { body: { language: "python", code: "x = 41", stateful: true } });
    const sid = first.data?.data?.session_id ?? undefined;
    check("code/execute stateful start (/sandboxes/{id})", first.response.status === 200 && !!sid, first.data);
    const second = await scoped.POST("/v1/code/execute", { body: { language: "python", code: "x + 1", stateful: true, session_id: sid } });
    check("code/execute stateful x + 1", resultText(second.data?.data?.outputs) === "42", second.data);
  }
  {
    const { data } = await client.POST("/v1/code/execute", { body: { language: "javascript", code: "[1, 2].map((n) => n * 21)[1]" } });
    check("code/execute javascript", resultText(data?.data?.outputs) === "42", data);
  }
  {
    const { error, response } = await client.POST("/v1/code/execute", { body: { language: "python", code: "1", timeout: 0 } });
    check("code/execute timeout 0 is 422", response.status === 422 && Array.isArray(error?.detail), error);
  }
  {
    const { data } = await client.POST("/v1/jupyter/execute", { body: { code: "print('a')\n6 * 7" } });
    const kinds = (data?.data?.outputs ?? []).map((o) => o.output_type).join(",");
    check("jupyter/execute", data?.data?.status === "ok" && kinds === "stream,execute_result", data);
  }

  // Shell and bash, when the server has them.
  {
    const { data, response } = await client.POST("/v1/shell/exec", { body: { command: "echo shell-ok" } });
    if (response.status === 404) {
      console.log("skip shell/exec: not served");
    } else {
      check("shell/exec", response.status === 200 && (data?.data?.output ?? "").includes("shell-ok"), data);
    }
  }
  {
    const { data, response } = await client.POST("/v1/bash/exec", { body: { command: "echo bash-ok" } });
    if (response.status === 404) {
      console.log("skip bash/exec: not served");
    } else {
      check("bash/exec", response.status === 200 && JSON.stringify(data?.data ?? {}).includes("bash-ok"), data);
    }
  }
  // Files, when the server has them.
  {
    const w = await client.POST("/v1/file/write", { body: { file: "/workspace/ts-client.txt", content: "from typescript\n" } });
    if (w.response.status === 404) {
      console.log("skip file/write and file/read: not served");
    } else {
      check("file/write", w.response.status === 200 && w.data?.success === true, w.data);
      const r = await client.POST("/v1/file/read", { body: { file: "/workspace/ts-client.txt" } });
      const rd = r.data?.data;
      check("file/read", !!rd && "content" in rd && rd.content === "from typescript\n", r.data);
      // A tool-level failure is HTTP 200 with success false and a
      // FileOperationError in data: openapi-fetch puts it in `data`, not
      // `error`, exactly as for AIO.
      const miss = await scoped.POST("/v1/file/read", { body: { file: "/workspace/no-such-file" } });
      const md = miss.data?.data;
      check("file/read missing is 200 success:false (/sandboxes/{id})",
        miss.response.status === 200 && miss.data?.success === false && !!md && "error_type" in md && md.error_type === "not_found", miss.data ?? miss.error);
      // An upload as AIO's TypeScript SDK sends it: the file part first,
      // then the path. It lands at the path, never at a default place.
      const up = await scoped.POST("/v1/file/upload", {
        body: { file: "uploaded from typescript\n", path: "/workspace/ts-upload.txt" },
        bodySerializer: (b) => {
          const f = new FormData();
          f.append("file", new Blob([String(b?.file ?? "")]), "blob");
          f.append("path", String(b?.path ?? ""));
          return f;
        },
      });
      const ud = up.data?.data;
      check("file/upload, file before path (/sandboxes/{id})",
        up.response.status === 200 && up.data?.success === true && !!ud && "file_path" in ud && ud.file_path === "/workspace/ts-upload.txt", up.data ?? up.error);
      const back = await scoped.POST("/v1/file/read", { body: { file: "/workspace/ts-upload.txt" } });
      const bd = back.data?.data;
      check("file/read of the upload", !!bd && "content" in bd && bd.content === "uploaded from typescript\n", back.data);
    }
  }
}

// namespaces runs one call per further AIO namespace sandhold serves,
// each checking what the call did, not only its status.
async function namespaces(): Promise<void> {
  // nodejs: a stateless run prints and returns a value.
  {
    const { data, response } = await client.POST("/v1/nodejs/execute", { body: { code: "console.log('node-ok'); 6 * 7" } });
    const d = data?.data;
    const outs = JSON.stringify(d?.outputs ?? []);
    check("nodejs/execute", response.status === 200 && d?.status === "ok" && outs.includes("node-ok") && outs.includes("42"), data);
  }
  // mcp: the servers, their tools, and a tool call that reads the file
  // written above.
  {
    const servers = await client.GET("/v1/mcp/servers");
    check("mcp/servers", (servers.data?.data ?? []).includes("sandhold"), servers.data);
    const tools = await scoped.GET("/v1/mcp/{server_name}/tools", { params: { path: { server_name: "sandhold" } } });
    check("mcp/{server}/tools (/sandboxes/{id})", JSON.stringify(tools.data?.data ?? {}).includes("file_list"), tools.data);
    const call = await client.POST("/v1/mcp/{server_name}/tools/{tool_name}", {
      params: { path: { server_name: "sandhold", tool_name: "file_list" } },
      body: { path: "/workspace" },
    });
    check("mcp/{server}/tools/file_list", call.data?.success === true && JSON.stringify(call.data?.data ?? {}).includes("ts-client.txt"), call.data);
  }
  // skills: register a directory by path (multipart, as AIO's form), read
  // its metadata back, delete it.
  {
    const w = await client.POST("/v1/file/write", {
      body: { file: "/workspace/ts-skill/SKILL.md", content: "---\nname: ts-skill\ndescription: from the TypeScript client\n---\nSay hi.\n" },
    });
    check("skills: write SKILL.md", w.data?.success === true, w.data);
    const reg = await client.POST("/v1/skills/register", {
      body: { path: "/workspace/ts-skill" },
      bodySerializer: (b) => {
        const f = new FormData();
        f.append("path", String(b?.path ?? ""));
        return f;
      },
    });
    check("skills/register", reg.response.status === 200 && reg.data?.data?.count === 1 && reg.data?.data?.registered?.[0]?.name === "ts-skill", reg.data ?? reg.error);
    const meta = await client.GET("/v1/skills/metadatas", { params: { query: { names: "ts-skill" } } });
    const skill = meta.data?.data?.skills?.[0];
    check("skills/metadatas", skill?.name === "ts-skill" && skill?.metadata?.description === "from the TypeScript client", meta.data);
    const del = await client.DELETE("/v1/skills/{name}", { params: { path: { name: "ts-skill" } } });
    check("skills/{name} delete", del.data?.success === true, del.data);
  }
  // util: HTML to Markdown inside the sandbox.
  {
    await client.POST("/v1/file/write", { body: { file: "/workspace/ts.html", content: "<h1>Title</h1><p>body text</p>" } });
    const { data } = await client.POST("/v1/util/convert_to_markdown", { body: { uri: "/workspace/ts.html" } });
    const md = JSON.stringify(data?.data ?? "");
    check("util/convert_to_markdown", data?.success === true && md.includes("# Title") && md.includes("body text"), data);
  }
  // sandbox hooks and observe.
  {
    const add = await scoped.POST("/v1/sandbox/hooks", { body: { name: "ts-hook", command: "true", timeout: 5 } });
    check("sandbox/hooks register (/sandboxes/{id})", add.data?.data?.name === "ts-hook", add.data);
    const list = await scoped.GET("/v1/sandbox/hooks");
    check("sandbox/hooks list", (list.data?.data ?? []).some((h) => h.name === "ts-hook" && h.command === "true"), list.data);
    const rm = await scoped.DELETE("/v1/sandbox/hooks/{name}", { params: { path: { name: "ts-hook" } } });
    const after = await scoped.GET("/v1/sandbox/hooks");
    check("sandbox/hooks remove", rm.data?.success === true && !(after.data?.data ?? []).some((h) => h.name === "ts-hook"), rm.data);
    const st = await scoped.GET("/v1/sandbox/observe/status");
    check("sandbox/observe/status", st.response.status === 200 && typeof st.data?.data?.running === "boolean" && !!st.data?.data?.mode, st.data);
  }
  // tickets and auth: a ticket authenticates one GET /auth without a key.
  {
    const t = await client.POST("/tickets");
    const ticket = String((t.data as Record<string, unknown> | undefined)?.ticket ?? "");
    check("tickets", t.response.status === 200 && ticket !== "", t.data);
    const bare = createClient<paths>({ baseUrl: base });
    const who = await bare.GET("/auth", { params: { query: { ticket } } as never });
    check("auth with the ticket", who.response.status === 200 && who.data?.status === "authenticated", who.data ?? who.error);
    const again = await bare.GET("/auth", { params: { query: { ticket } } as never });
    check("auth with a used ticket is 401", again.response.status === 401, again.error);
  }
  // The preview proxy (not in AIO's document: plain fetch): a web server
  // started in the sandbox on its loopback is reached through the server.
  {
    const page = await scoped.POST("/v1/file/write", { body: { file: "/workspace/preview.txt", content: "from typescript\n" } });
    check("preview: write a page (/sandboxes/{id})", page.data?.success === true, page.data);
    const start = await scoped.POST("/v1/bash/exec", {
      body: { command: "cd /workspace && exec python3 -m http.server 8005 --bind 127.0.0.1 >/dev/null 2>&1", async_mode: true },
    });
    check("preview: start a server in the sandbox", start.response.status === 200, start.data);
    let body = "";
    let status = 0;
    for (let i = 0; i < 50 && body !== "from typescript\n"; i++) {
      const res = await fetch(`${base}/sandboxes/${sandbox}/proxy/8005/preview.txt`, { headers });
      status = res.status;
      body = await res.text();
      if (body !== "from typescript\n") {
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    check("preview proxy /sandboxes/{id}/proxy/8005/", status === 200 && body === "from typescript\n", { status, body: body.slice(0, 200) });
  }
  // proxy: AIO's proxy namespace on a sandbox in network mode proxy (made
  // with sandhold's own POST /v1/sandboxes, not in AIO's document): the
  // exclude list set and read back, an upstream with credentials set and
  // read back masked, the health check's shape, the upstream removed. On
  // the default sandbox (mode none) the same call is a tool-level failure.
  {
    const none = await client.GET("/v1/proxy/excludes");
    check("proxy/excludes in mode none is 200 success:false", none.response.status === 200 && none.data?.success === false && none.data?.data === null &&
      (none.data?.message ?? "").includes("network mode none"), none.data ?? none.error);

    const upstreamPort = 3999;
    const made = await fetch(`${base}/v1/sandboxes`, {
      method: "POST",
      headers: { ...headers, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "ts-proxy", network: { mode: "proxy", allow: [`localhost:${upstreamPort}`] } }),
    });
    const madeBody = (await made.json()) as { data?: { id?: string } };
    const proxyID = madeBody.data?.id ?? "";
    check("proxy: create a sandbox in network mode proxy", made.status === 201 && proxyID !== "", madeBody);
    const px = createClient<paths>({ baseUrl: `${base}/sandboxes/${proxyID}`, headers });

    const empty = await px.GET("/v1/proxy/excludes");
    check("proxy/excludes empty", empty.data?.success === true && Array.isArray(empty.data?.data) && empty.data?.data?.length === 0, empty.data);
    const add = await px.POST("/v1/proxy/excludes", { body: { pattern: "*.internal.example" } });
    check("proxy/excludes add", add.response.status === 200 && add.data?.success === true, add.data ?? add.error);
    const add2 = await px.POST("/v1/proxy/excludes", { body: { pattern: "10.0.0.0/8" } });
    check("proxy/excludes add a CIDR", add2.data?.success === true, add2.data ?? add2.error);
    const listed = await px.GET("/v1/proxy/excludes");
    const ex = listed.data?.data ?? [];
    check("proxy/excludes lists both", listed.data?.success === true && ex.length === 2 && ex.some((e) => e.includes("internal.example")) && ex.includes("10.0.0.0/8"), listed.data);
    const del = await px.DELETE("/v1/proxy/excludes", { body: { pattern: "10.0.0.0/8" } });
    const after = await px.GET("/v1/proxy/excludes");
    check("proxy/excludes remove", del.data?.success === true && !(after.data?.data ?? []).includes("10.0.0.0/8") && (after.data?.data ?? []).length === 1, [del.data, after.data]);
    const bad = await px.POST("/v1/proxy/excludes", { body: {} as never });
    check("proxy/excludes without pattern is 422", bad.response.status === 422 && Array.isArray(bad.error?.detail), bad.error);

    const password = "ts-fake-pw";
    const set = await px.PUT("/v1/proxy/upstream", { body: { server: `alice:${password}@localhost:${upstreamPort}` } });
    const info = set.data?.data;
    check("proxy/upstream set", set.response.status === 200 && set.data?.success === true && info?.addr === `localhost:${upstreamPort}` &&
      info?.username === "alice" && info?.password === "********" && !JSON.stringify(set.data).includes(password), set.data ?? set.error);
    const got = await px.GET("/v1/proxy/upstream");
    check("proxy/upstream get is masked", got.data?.success === true && got.data?.data?.addr === `localhost:${upstreamPort}` &&
      got.data?.data?.password === "********" && !JSON.stringify(got.data).includes(password), got.data);
    const refused = await px.PUT("/v1/proxy/upstream", { body: { server: "elsewhere.example:3128" } });
    check("proxy/upstream outside the allow list is refused", refused.data?.success !== true && !JSON.stringify(refused.data ?? refused.error).includes(password), refused.data ?? refused.error);
    const health = await px.GET("/v1/proxy/health");
    const h = health.data?.data;
    check("proxy/health", health.data?.success === true && typeof h?.healthy === "boolean" && h?.gost_alive === true && typeof h?.config_consistent === "boolean" &&
      Array.isArray(h?.inconsistencies) && typeof h?.nginx_alive === "boolean" && !JSON.stringify(health.data).includes(password), health.data);
    const rm = await px.DELETE("/v1/proxy/upstream");
    const gone = await px.GET("/v1/proxy/upstream");
    check("proxy/upstream remove", rm.data?.success === true && gone.data?.success === true && gone.data?.data === null, [rm.data, gone.data]);
  }
  // browser: only where Chromium runs inside the sandbox.
  {
    const { data, response } = await scoped.GET("/v1/browser/info");
    if (response.status !== 200 || data?.success !== true) {
      console.log(`skip browser/info: no browser in the sandbox here (${response.status}: ${data?.message ?? ""})`);
    } else {
      check("browser/info", (data?.data?.cdp_url ?? "").includes(`/sandboxes/${sandbox}/cdp`) && (data?.data?.user_agent ?? "").length > 0, data);
    }
  }
}

main()
  .then(namespaces)
  .catch((e: unknown) => {
    console.error("FAIL exception:", e);
    process.exit(1);
  });
