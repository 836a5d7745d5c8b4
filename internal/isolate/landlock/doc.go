// Package landlock confines what the sandbox's processes may reach through
// the file system and TCP, using the kernel's Landlock LSM (through
// github.com/landlock-lsm/go-landlock). The init applies it to itself, on
// every thread, before it serves requests; every process it starts inherits
// the domain and can only narrow it further.
//
// What it stops: a process that escapes its mount-namespace view (a
// forgotten bind mount, a leaked directory descriptor, a /proc/<pid>/root
// walk into another namespace) still cannot write outside the ReadWrite
// directories or read/execute outside the ReadOnly trees; it cannot bind or
// connect TCP ports other than the listed ones (the egress proxy's, say) even
// with a network namespace that has more than lo; and (ABI 6+) it cannot
// signal processes or reach abstract unix sockets outside its domain, which
// closes the classic "talk to the host's D-Bus/X11 abstract socket" route
// should it ever share a network namespace with the host.
//
// What it does NOT protect: Landlock grants are path-beneath rules, so
// whatever lies under a granted directory is granted, including bind mounts
// the init placed there. It governs opening, creating, renaming, linking,
// truncating, executing and (ABI 5+) device ioctls, not reading or writing an
// already-open descriptor: a descriptor opened before Apply, or passed in over
// a unix socket, keeps its access. It does not restrict UDP, ICMP or unix
// sockets by path here, and its TCP rules do not cover Multipath TCP sockets
// at all — the seccomp layer refuses IPPROTO_MPTCP, which is what makes the
// port list hold. Stat, readlink and chdir are not restricted. It is
// enforced by the kernel per domain, and a kernel bug in it is a bug in the
// boundary.
//
// Below ABI 8 go-landlock enforces on every thread through libpsx (cgo
// builds) or syscall.AllThreadsSyscall (CGO_ENABLED=0, the release build);
// cgo builds also grant read-dir on /proc/<pid>/task, which libpsx lists.
// /proc is governed like any other tree: under ReadOnly ["/"] nothing in
// /proc/self can be written (oom_score_adj, uid_map, ...), so the init must
// do such writes before Apply.
//
// The policy is strict: Apply fails rather than enforcing less than asked.
// It requires Landlock ABI 3 (truncate is governed from there on), and ABI 4
// unless the caller sets AllowAllTCP, because an empty port list means "no
// TCP at all" and an older kernel cannot enforce that. It never uses
// go-landlock's best-effort mode.
package landlock
