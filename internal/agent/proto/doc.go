// Package proto is the protocol the sandhold server speaks to a sandbox's
// init (package sandboxinit's doc tells the init's story): its messages, the
// limits both sides check, and the socket that carries them. The server's
// client, the launcher and the init all link it; it links none of them.
//
// # The protocol
//
// Transport: one AF_UNIX SOCK_SEQPACKET socketpair, inherited by the init as
// fd 3. SEQPACKET keeps message boundaries and carries file descriptors
// (SCM_RIGHTS), so every message is exactly one JSON document of at most
// MaxMessage bytes plus, optionally, descriptors.
//
// Server → init: Request{id, op, …}. Init → server: Response{id, …} for each
// request (in any order; requests are served concurrently), and unsolicited
// events with Kind set ("exit"). Ops:
//
//   - setup (first message, exactly once): the sandbox's parameters. The init
//     does nothing before it arrives, and the server sends it only after the
//     init's pid sits in the sandbox's cgroups, so no sandbox code runs
//     outside its limits. Reply: Ready with the layers applied.
//   - spawn: argv, env (complete: nothing is inherited), cwd, uid, pipes or
//     PTY, per-execution rlimits. Attached descriptors: the cgroup files of
//     the execution's group (see spawn below). Reply: pid (as the sandbox
//     sees it) and descriptors: stdin writer (when asked), stdout and stderr
//     readers — or the PTY master. The server reads output straight from
//     those descriptors; the protocol never copies command output.
//   - exit (event, id = the spawn request's id): exit code or signal and the
//     rusage of the process.
//   - open: open a file inside the sandbox view and pass the descriptor back;
//     stat, lstat, readdir, mkdir, rename, remove, symlink, readlink: the
//     file primitives the workspace API builds on. Paths are absolute paths
//     as the sandbox sees them; they are resolved by the kernel in the init's
//     mount namespace (openat2 with RESOLVE_NO_MAGICLINKS, optionally
//     RESOLVE_NO_SYMLINKS), with the filesystem uid of the sandbox user.
//   - resolve, openread, walk, grep (walk.go): the workspace API's ops —
//     the kernel's name for a path (O_PATH and /proc/self/fd; a dangling
//     symlink followed by hand), a regular file opened for reading with
//     O_NONBLOCK, and bounded walks and searches of a tree (every step
//     relative to an open directory with RESOLVE_BENEATH|NO_SYMLINKS,
//     sensitive names skipped inside the init) that would otherwise cost a
//     round trip per entry.
//   - ping: liveness.
//
// Errors carry an errno name (ENOENT, EACCES, …) and a message with sandbox
// paths only.
package proto
