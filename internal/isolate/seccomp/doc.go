// Package seccomp is the sandbox's system-call filter: an allow-list modelled
// on Docker's default profile (Policy, a commented literal table), compiled
// to classic BPF (Assemble, using github.com/elastic/go-seccomp-bpf's
// syscall tables and action values) and installed on every thread of the
// sandbox init (Install: TSYNC, with no_new_privs set), so every process the
// init starts inherits it and can never shed it.
//
// What it stops: the kernel attack surface a sandboxed program does not need
// and that has carried the container escapes and local privilege escalations
// of the last decade — mounting and namespace games (mount, the new mount
// API, unshare/setns, clone with CLONE_NEW* flags, clone3 whose flags the
// filter cannot read), ptrace and cross-process memory access, bpf,
// perf_event_open, userfaultfd (the race-widening primitive of many kernel
// exploits), io_uring, the keyring, file-handle syscalls (open_by_handle_at is
// the "shocker" escape), module and kexec loading, personality flags that
// weaken ASLR or NX, the 32-bit (int 0x80) and x32 system-call entries (other
// syscall tables that an x86-64 filter would otherwise not cover), clock and
// host administration calls, NUMA memory policy calls, packet/raw/vsock
// sockets, terminal input injection (TIOCSTI/TIOCLINUX), and Multipath TCP sockets (which landlock's TCP port rules do not
// cover, so refusing them here is what makes those rules hold). Anything not listed is refused with EPERM, so syscalls added to
// future kernels are denied until someone reviews them.
//
// What it does NOT protect: the syscalls it allows are the kernel's normal
// surface (file systems, networking in the sandbox's own namespace, futexes,
// memory management) and a bug in one of them is still reachable. It does
// not look at paths (landlock and the mount namespace do that), it cannot
// inspect pointer arguments (clone3's struct, ioctl payloads, socket
// options), it filters ioctl request numbers only for terminal input
// injection (TIOCSTI, TIOCLINUX), and it does not limit resources (cgroups
// and rlimits do). It is one layer of several.
//
// Callers of Install must not, afterwards, use exec.Cmd features that make
// Go's syscall package use clone3 (SysProcAttr.UseCgroupFD, CLONE_NEWTIME):
// clone3 answers ENOSYS here and Go's fork path does not fall back.
package seccomp
