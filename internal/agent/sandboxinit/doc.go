// Package sandboxinit is the in-sandbox init ("sandhold init", the lean
// cmd/sandhold-init): PID 1 of every sandbox. It runs inside the sandbox
// and links none of the server's code (TestEachSideLinksOnlyItsOwn in
// package agent); the server's side of it is package agent, the messages
// they exchange are package proto, and the process that clones inits is
// package launcher (the same program, chosen by Entry).
//
// # Why an init
//
// A sandbox is one long-lived process inside fresh user, mount, pid, ipc,
// uts, net and cgroup namespaces, running Main: the lean program
// cmd/sandhold-init from a sealed memfd (package initbin) in a `make build`
// binary, else the sandhold binary re-executed as "sandhold init". It is PID 1 of the sandbox. It builds the sandbox's root
// (internal/isolate/rootfs), drops every capability from the bounding set,
// sets no_new_privs, applies landlock and finally the seccomp filter, and then
// serves the server. Every later operation — start a command, open a PTY,
// open/stat/list/rename a file — is a request to this init and runs inside
// the sandbox, so containment holds by construction: the server never
// resolves a sandbox path on the host and never forks a sandboxed command
// itself. Killing the init ends everything in the sandbox (the kernel kills
// a pid namespace with its init).
//
// # The protocol
//
// One AF_UNIX SOCK_SEQPACKET socketpair carries JSON requests and
// replies and the descriptors that go with them (package proto).
//
// # Placing an execution in its own cgroup
//
// One execution's whole process tree must be killable on a timeout —
// setsid'ed and double-forked children included — so every spawn goes into a
// cgroup of its own below the sandbox's. Go cannot run code between fork and
// exec, so the init moves the forking thread instead: its main thread, the
// one that made the sandbox's cgroup namespace (a namespace belongs to a
// thread, and a child is born in its forking thread's), moves itself ("0"
// written to a "tasks" file names the writing thread) into the execution
// group's "tasks" files (cgroup v1; the server opened
// them as host root and attached them to the spawn request, and v1 checks
// the opener's credentials), forks and execs (the child inherits the
// thread's cgroups and namespace), and returns to the sandbox's own group
// through the home files before the reply leaves (the server attaches those
// of the hierarchies the execution group has: the thread never leaves the
// sandbox's group in the others). If it cannot return, the
// init ends: that thread cannot be replaced, and a kill of the execution's
// group would otherwise take the init along at a random later moment.
//
// cgroup v2 has no per-thread membership outside threaded subtrees, and
// clone3 CLONE_INTO_CGROUP is unavailable because the seccomp filter makes
// clone3 fail with ENOSYS (its flags cannot be inspected). There the server
// attaches the group's cgroup.procs, opened as host root, and the init moves
// the child right after fork. A child that forks within those microseconds
// leaves a grandchild in the sandbox's group: it is still killed with the
// sandbox and counted against its limits, but not by the execution's
// timeout. This path is untested on this project's cgroup-v1 CI hosts.
//
// # Descriptors
//
// A command starts with exactly 0, 1 and 2 (its pipes, /dev/null or its
// terminal). The init closes every descriptor it inherited beyond its own
// 0-4 before it does anything else (fds.CloseInherited; 4 is not open: the
// workspace comes with the setup request, close-on-exec), closes the inherited
// protocol descriptor once it holds a close-on-exec duplicate, and opens
// everything else close-on-exec; the server marks what it inherited
// close-on-exec at start (fds.CloseOnExecFrom).
package sandboxinit
