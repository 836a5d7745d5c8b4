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
    }
  }
}

main().catch((e: unknown) => {
  console.error("FAIL exception:", e);
  process.exit(1);
});
