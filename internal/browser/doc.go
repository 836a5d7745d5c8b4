// Package browser runs Chromium inside a sandbox and relays its DevTools
// and desktop (VNC) to authenticated clients.
//
// # Where the browser runs
//
// Chromium (Debian's chromium package, from the host's read-only /usr) runs
// INSIDE the sandbox as the sandbox user, one per sandbox, started on first
// use: it is a process the init spawned, in the sandbox's cgroups (memory,
// pids, cpu), namespaces, landlock domain and seccomp filter, exactly like a
// command. It speaks DevTools over a pipe (--remote-debugging-pipe:
// descriptors 3 and 4, made by the init at the spawn, held by the browser
// and the server only) and listens on no port, so nothing in the sandbox
// can stand in for it by binding a port first, and nothing outside can
// reach it at all. The server serves the DevTools endpoint itself over
// that pipe (devtools.go), to clients that presented a key or a one-time
// ticket for the sandbox's owner.
//
// # Why --no-sandbox
//
// Chromium's own sandbox needs to create user and pid namespaces (or a
// setuid helper) and install its own seccomp-bpf filters. sandhold's
// seccomp filter forbids creating namespaces inside a sandbox (unshare,
// clone with namespace flags, setns), no_new_privs makes a setuid helper
// inert, and the bounding set is empty: the zygote cannot start, so
// Chromium runs with --no-sandbox. What Chromium's sandbox would give — a
// compromised renderer that cannot read the user's files, reach the
// network or attack the kernel freely — sandhold's layers give to the
// whole browser: the mount namespace and read-only root (nothing of the
// host's but /usr), landlock (writes only in /workspace, /tmp, /dev/shm),
// the network namespace and egress proxy, the seccomp filter, the cgroup
// limits and the id mapping (uid 1000 inside is an unprivileged id
// outside). What is lost is separation between the sites in one browser:
// a compromised renderer can read other tabs' data and the profile, which
// is the sandbox's own data anyway.
//
// # Limits
//
// A browser is many threads, and cgroup pids count threads: Chromium runs
// multi-process (79 threads at rest on Chromium 156, about 9 more per
// browser context), which alone would overflow the default
// SANDBOX_MAX_PROCESSES of 50. In a sandbox whose limit is below
// browserPids it brings an allowance of its own (browserPids, more when
// headful; sandbox.GrantPids) that raises the sandbox's pids limits while
// it runs and is returned when it ends, so the sandbox's commands keep
// their own limit beside it. It never runs --single-process: that fits
// fewer pids, but a second browser context (Playwright's newContext)
// closes such a browser.
// /dev/shm is small in a sandbox, so Chromium keeps its shared memory in
// /tmp (--disable-dev-shm-usage), within the sandbox's /tmp cap. A browser
// that dies of the memory limit, the process limit or anything else is
// reported with the reason, and the next use starts it again.
//
// # Network
//
// The browser inherits the sandbox's network mode: in mode none only
// file:, data: and the sandbox's own loopback load (the namespace has no
// route anywhere else); in mode proxy every request goes through the
// init's egress listener (--proxy-server) to the server's allow-list
// proxy, which checks and audits it; mode host is refused (the DevTools
// port would be on the host's loopback, shared by every host-mode sandbox).
package browser
