// Package e2b serves E2B's API, so the official `e2b` and
// `@e2b/code-interpreter` SDKs drive sandhold's sandboxes with only
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set (docs/e2b.md):
//
//   - the control plane under /e2b (create, connect, list, get, kill,
//     timeout, metrics, pause — a hibernation, or a freeze — and resume,
//     network, snapshots and fork on sandhold's snapshots), authenticated
//     by sandhold keys like every route;
//   - the in-sandbox API under /e2b/sandbox, routed by the E2b-Sandbox-Id
//     and E2b-Sandbox-Port headers: port 49983 is E2B's "envd" — the
//     Connect RPC process and filesystem services (internal/e2b/envdpb,
//     generated from .proto files written from E2B's public protocol
//     description) and its small HTTP API (/health, /files) — and port
//     49999 the code interpreter (/execute, /contexts).
//
// What it stops: a protocol that bypasses the chokepoint. Every E2B call is
// a dispatched tool of the key it acts for — an existing tool where one
// fits (sandbox.create, sandbox.get, sandbox.delete, sandbox.hibernate,
// snapshot.*, file.upload, file.download, file.watch_*, code.execute,
// code.session.*), an e2b.* tool where none does (processes with pids, stdin and terminals; stat, mkdir,
// move, remove; timeouts) — so HALT, roles, the policy and its approvals,
// the rate limits, the command guard (an e2b.process_start is assessed as
// exec.run assesses the same command line; what is written to a process's
// stdin or terminal passes the raw-input rule, shell.input) and the audit
// apply to E2B exactly as to the native API. The in-sandbox API takes no
// key: the SDK sends a per-sandbox access token (token.go), derived from a
// server secret and checked on every request against the key it names,
// which must still be valid; another key's sandbox is "not found".
//
// What it does not stop: what the sandbox lets its code do — the sandbox
// is the boundary, as for every other route.
package e2b
