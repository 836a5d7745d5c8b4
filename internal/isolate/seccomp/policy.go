package seccomp

import "fmt"

// Action is what the filter does with a syscall that a table row matches.
type Action int

const (
	// Allow lets the syscall run.
	Allow Action = iota + 1
	// DenyEPERM makes the syscall fail with EPERM without running it. It is
	// the default action: unconditioned rows with it document the decision
	// and are not compiled (they would only repeat the default);
	// conditioned ones carve exceptions out of a later allow row.
	DenyEPERM
	// DenyENOSYS makes the syscall fail with ENOSYS, which tells libc the
	// call does not exist so it falls back to an older one (clone3 → clone).
	DenyENOSYS
)

func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case DenyEPERM:
		return "errno(EPERM)"
	case DenyENOSYS:
		return "errno(ENOSYS)"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Op compares one 64-bit syscall argument with a value.
type Op int

const (
	// Equal: arg == value, all 64 bits (a caller cannot smuggle bits into
	// the upper half of an int argument that the kernel truncates).
	Equal Op = iota + 1
	// BitsClear: arg & value == 0.
	BitsClear
	// BitsAny: arg & value != 0.
	BitsAny
	// EqualLow32: the low 32 bits of arg == value. For int arguments that
	// the kernel truncates (an ioctl request): a deny row must not be
	// dodged by setting high bits the kernel then drops.
	EqualLow32
	// MaskedEqualLow32: the low 32 bits of arg, masked with Mask, ==
	// value. For a field packed with flags into an int argument (the type
	// of socket(2) beside SOCK_NONBLOCK and SOCK_CLOEXEC): the field must
	// be exactly one value, whatever flag bits ride along.
	MaskedEqualLow32
)

// Cond is one argument condition of a table row.
type Cond struct {
	Arg   uint32 // argument index, 0..5
	Op    Op
	Value uint64
	// Mask is the field MaskedEqualLow32 compares; other operations
	// ignore it.
	Mask uint32
}

// Rule is one row of the policy table.
type Rule struct {
	Names []string // syscall names (x86-64 table)
	// When, if not empty, restricts the row: it matches a call if every
	// condition of at least one alternative holds. Empty means always.
	When   [][]Cond
	Action Action
	Why    string // the reason for the row, shown in review and docs
}

// Table is the whole policy: rows in evaluation order and the action for
// every syscall no compiled row matches.
type Table struct {
	Default Action
	Rules   []Rule
}

// Linux x86-64 ABI numbers, spelled out so the table (and its golden test)
// compiles on every GOOS; golang.org/x/sys/unix has them only on Linux.
const (
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000

	afUNIX    = 1
	afINET    = 2
	afINET6   = 10
	afNETLINK = 16

	errnoENOSYS = 38

	tiocsti   = 0x5412
	tioclinux = 0x541c

	// ipprotoMPTCPBit is the bit that sets IPPROTO_MPTCP (262 = 0x106)
	// apart from every real IP protocol number (all below 256).
	ipprotoMPTCPBit = 0x100

	// sockTypeMask is SOCK_TYPE_MASK: the socket type is the low nibble
	// of socket(2)'s type word, the flags (SOCK_NONBLOCK, SOCK_CLOEXEC)
	// sit above it and the kernel refuses any other bit.
	sockTypeMask  = 0xf
	sockStream    = 1
	sockDgram     = 2
	sockSeqpacket = 5
)

// Flag words used by conditioned rows.
const (
	// cloneNamespaceFlags are the CLONE_NEW* bits of clone(2)'s flags word,
	// the mask Docker uses. CLONE_NEWTIME (0x80) is absent on purpose: in
	// clone(2) that bit belongs to the exit signal, and new time namespaces
	// can only be asked for with clone3 (denied) or unshare (denied).
	cloneNamespaceFlags = cloneNewNS | cloneNewCgroup | cloneNewUTS | cloneNewIPC |
		cloneNewUser | cloneNewPID | cloneNewNet

	// personalityQuery asks personality(2) for the current value without
	// changing it.
	personalityQuery = 0xffffffff
)

// Policy returns the sandbox's syscall table. Each call returns a fresh
// copy, so callers may not change the policy of others.
func Policy() Table {
	return Table{
		Default: DenyEPERM,
		Rules: []Rule{
			{
				// A conditioned deny row is compiled and must come before
				// the row that allows the syscall; it costs other syscalls
				// one comparison.
				Action: DenyEPERM,
				Why: "terminal input injection: TIOCSTI pushes bytes into a terminal's input queue and TIOCLINUX can paste " +
					"the console selection, so a sandboxed process holding a terminal it shares with someone outside " +
					"(an inherited session, an operator's PTY) could type commands into their shell (CVE-2017-5226 in bubblewrap). " +
					"Matched on the low 32 bits only, because the kernel truncates the request number to an int",
				Names: []string{"ioctl"},
				When:  [][]Cond{{{Arg: 1, Op: EqualLow32, Value: tiocsti}}, {{Arg: 1, Op: EqualLow32, Value: tioclinux}}},
			},

			// ---- allowed, hottest first: the BPF program is a linear
			// chain, so what most programs call most often is tested first.
			{Action: Allow, Why: "I/O, polling and the futexes every runtime spins on", Names: []string{
				"read", "write", "futex", "epoll_pwait", "epoll_wait", "epoll_ctl",
				"nanosleep", "clock_gettime", "sched_yield", "getpid", "gettid",
				"close", "mmap", "munmap", "madvise", "mprotect", "openat",
				"newfstatat", "fstat", "statx", "lseek", "pread64", "pwrite64",
				"readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2",
				"recvfrom", "sendto", "recvmsg", "sendmsg", "recvmmsg", "sendmmsg",
				"ppoll", "poll", "pselect6", "select", "epoll_pwait2", "fcntl",
				// ioctl is allowed, as in Docker, except the two terminal
				// injection requests refused by the first row: the devices
				// a sandbox can open are its own (TIOCSCTTY, TIOCSWINSZ,
				// FIONREAD, ...).
				"ioctl",
				"futex_waitv", "futex_wait", "futex_wake", "futex_requeue",
			}},
			{Action: Allow, Why: "signals; tgkill/sigaltstack/rt_sigaction are the Go runtime's preemption and crash handling", Names: []string{
				"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
				"rt_sigtimedwait", "rt_sigsuspend", "rt_sigqueueinfo",
				"rt_tgsigqueueinfo", "sigaltstack", "kill", "tkill", "tgkill",
				"pause", "alarm", "restart_syscall",
			}},
			{Action: Allow, Why: "memory management of ordinary programs and JITs (V8 uses pkeys and membarrier)", Names: []string{
				"brk", "mremap", "msync", "mincore", "remap_file_pages",
				"mlock", "mlock2", "mlockall", "munlock", "munlockall",
				"pkey_alloc", "pkey_free", "pkey_mprotect", "membarrier",
				"memfd_create", "mseal", "cachestat",
				// glibc 2.39+ allocates CET shadow stacks with it.
				"map_shadow_stack",
			}},
			{Action: Allow, Why: "process lifecycle; the init forks, execs, waits and reaps with these (pidfds included)", Names: []string{
				"execve", "execveat", "fork", "vfork", "exit", "exit_group",
				"wait4", "waitid", "pidfd_open", "pidfd_send_signal",
				"set_tid_address", "set_robust_list", "get_robust_list",
				// Thread-local storage setup (ARCH_SET_FS) by glibc and Go.
				"arch_prctl",
				// Restartable sequences, registered by glibc for every thread.
				"rseq",
				// prctl is allowed whole, as in Docker: the dangerous options
				// need capabilities the sandbox does not have, and the init
				// uses PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP.
				"prctl",
				// Only ever lowers privileges here: the capability bounding
				// set is empty and no_new_privs is set.
				"capget", "capset",
				// Lowering limits is free; raising past the hard limit needs
				// CAP_SYS_RESOURCE, which the sandbox does not hold.
				"getrlimit", "setrlimit", "prlimit64", "getrusage", "times",
			}},
			{Action: Allow, Why: "identity and sessions; the init switches to the command's uid/gid and starts sessions for PTYs", Names: []string{
				"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
				"getgroups", "setuid", "setgid", "setreuid", "setregid",
				"setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid",
				"setsid", "setpgid", "getpgid", "getpgrp", "getsid", "getppid",
			}},
			{Action: Allow, Why: "file system calls; what a path may reach is landlock's and the mount namespace's job", Names: []string{
				"open", "openat2", "creat", "close_range", "dup", "dup2", "dup3",
				"access", "faccessat", "faccessat2", "stat", "lstat", "statfs",
				"fstatfs", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
				"readlink", "readlinkat", "mkdir", "mkdirat", "rmdir", "unlink",
				"unlinkat", "rename", "renameat", "renameat2", "link", "linkat",
				"symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "fchmodat2",
				"chown", "fchown", "lchown", "fchownat", "umask", "truncate",
				"ftruncate", "fallocate", "fsync", "fdatasync", "sync_file_range",
				"sync", "syncfs", "flock", "utime", "utimes", "utimensat",
				"futimesat", "pipe", "pipe2", "sendfile", "splice", "tee",
				"vmsplice", "copy_file_range", "readahead", "fadvise64",
				// Creating device nodes needs CAP_MKNOD; fifos and sockets
				// (mkfifo, Python's multiprocessing) do not.
				"mknod", "mknodat",
				"getxattr", "lgetxattr", "fgetxattr", "getxattrat", "setxattr",
				"lsetxattr", "fsetxattr", "setxattrat", "listxattr", "llistxattr",
				"flistxattr", "listxattrat", "removexattr", "lremovexattr",
				"fremovexattr", "removexattrat",
				"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
				"eventfd", "eventfd2", "signalfd", "signalfd4",
				"timerfd_create", "timerfd_settime", "timerfd_gettime",
				"epoll_create", "epoll_create1",
				// Legacy POSIX AIO (not io_uring): allowed by Docker, used by
				// databases.
				"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
				"io_pgetevents",
			}},
			{Action: Allow, Why: "time and timers (reading only; setting clocks is denied below)", Names: []string{
				"clock_getres", "clock_nanosleep", "gettimeofday", "time",
				"getitimer", "setitimer", "timer_create", "timer_settime",
				"timer_gettime", "timer_getoverrun", "timer_delete",
			}},
			{Action: Allow, Why: "scheduling hints; raising priority needs CAP_SYS_NICE, which the sandbox lacks", Names: []string{
				"sched_getaffinity", "sched_setaffinity", "sched_getparam",
				"sched_setparam", "sched_getscheduler", "sched_setscheduler",
				"sched_get_priority_max", "sched_get_priority_min",
				"sched_rr_get_interval", "sched_getattr", "sched_setattr",
				"getpriority", "setpriority", "ioprio_get", "ioprio_set", "getcpu",
			}},
			{Action: Allow, Why: "System V and POSIX IPC; the sandbox has its own IPC namespace", Names: []string{
				"msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
				"semtimedop", "semctl", "shmget", "shmat", "shmdt", "shmctl",
				"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
				"mq_notify", "mq_getsetattr",
			}},
			{Action: Allow, Why: "sockets once created (the family check is on socket below); socketpair only makes AF_UNIX pairs, used for SCM_RIGHTS", Names: []string{
				"socketpair", "bind", "listen", "accept", "accept4", "connect",
				"getsockname", "getpeername", "getsockopt", "setsockopt", "shutdown",
			}},
			{Action: Allow, Why: "system information and randomness", Names: []string{
				"uname", "sysinfo", "getrandom",
			}},
			{Action: Allow, Why: "self-sandboxing only ever narrows: a program may add its own seccomp filter or landlock domain", Names: []string{
				"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
			}},
			{
				Action: Allow,
				Why: "thread and process creation without namespace flags (Go, glibc fallback, fork, posix_spawn); " +
					"a flags word with any CLONE_NEW* bit falls through to EPERM",
				Names: []string{"clone"},
				When:  [][]Cond{{{Arg: 0, Op: BitsClear, Value: cloneNamespaceFlags}}},
			},
			{
				Action: Allow,
				Why: "socket families ordinary programs use: unix, IPv4/IPv6 (but never SOCK_RAW or Multipath TCP), netlink (getifaddrs, ip). " +
					"AF_PACKET, AF_VSOCK (the hypervisor's channel), AF_ALG and the rest fall through to EPERM. " +
					"Raw and packet sockets need CAP_NET_RAW, which commands lack, but the sandbox's user namespace owns its " +
					"network namespace, so its root could hold it; AF_PACKET's CVE history is why we close it here too",
				Names: []string{"socket"},
				When: append([][]Cond{
					{{Arg: 0, Op: Equal, Value: afUNIX}},
					{{Arg: 0, Op: Equal, Value: afNETLINK}},
				}, inetSocketTypes()...),
			},
			{
				Action: Allow,
				Why: "personality: only the values Docker allows (PER_LINUX, PER_LINUX32, UNAME26 variants, query). " +
					"ADDR_NO_RANDOMIZE and READ_IMPLIES_EXEC would weaken ASLR and NX for the exploit's next exec",
				Names: []string{"personality"},
				When: [][]Cond{
					{{Arg: 0, Op: Equal, Value: 0x0}},
					{{Arg: 0, Op: Equal, Value: 0x8}},
					{{Arg: 0, Op: Equal, Value: 0x20000}},
					{{Arg: 0, Op: Equal, Value: 0x20008}},
					{{Arg: 0, Op: Equal, Value: personalityQuery}},
				},
			},
			{
				Action: DenyENOSYS,
				Why: "clone3 keeps its flags in a struct the filter cannot read, so CLONE_NEW* could not be checked; " +
					"ENOSYS makes glibc (pthread_create, posix_spawn) fall back to clone, which is checked",
				Names: []string{"clone3"},
			},

			// ---- denied (the default action). These rows are the review
			// record of what is refused and why; they are not compiled.
			{Action: DenyEPERM, Why: "mounting and the new mount API: reshaping the file system view is how container escapes start", Names: []string{
				"mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig",
				"fsmount", "fspick", "move_mount", "open_tree", "open_tree_attr", "mount_setattr",
			}},
			{Action: DenyEPERM, Why: "namespaces: new user namespaces hand out capabilities over fresh kernel surface; setns joins others", Names: []string{
				"unshare", "setns",
			}},
			{Action: DenyEPERM, Why: "access to other processes' memory, descriptors and state", Names: []string{
				"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
				"kcmp", "process_madvise", "process_mrelease",
			}},
			{Action: DenyEPERM, Why: "kernel attack surface favoured by exploits: eBPF, perf, userfaultfd (race widening), io_uring", Names: []string{
				"bpf", "perf_event_open", "userfaultfd",
				"io_uring_setup", "io_uring_enter", "io_uring_register",
			}},
			{Action: DenyEPERM, Why: "the kernel keyring is not namespaced", Names: []string{
				"keyctl", "add_key", "request_key",
			}},
			{Action: DenyEPERM, Why: "file handles bypass path resolution (the 'shocker' escape)", Names: []string{
				"open_by_handle_at", "name_to_handle_at",
			}},
			{Action: DenyEPERM, Why: "loading code into the kernel or replacing it", Names: []string{
				"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
			}},
			{Action: DenyEPERM, Why: "host administration: power, swap, accounting, quotas, kernel log, terminals", Names: []string{
				"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
				"syslog", "vhangup", "sethostname", "setdomainname",
			}},
			{Action: DenyEPERM, Why: "clocks are not namespaced (except through time namespaces, also denied)", Names: []string{
				"settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
			}},
			{Action: DenyEPERM, Why: "NUMA memory policy (Docker gates these behind CAP_SYS_NICE)", Names: []string{
				"mbind", "migrate_pages", "move_pages", "set_mempolicy",
				"get_mempolicy", "set_mempolicy_home_node",
			}},
			{Action: DenyEPERM, Why: "x86 hardware access: I/O ports and the LDT (the 16-bit segment games of old exploits)", Names: []string{
				"iopl", "ioperm", "modify_ldt",
			}},
			{Action: DenyEPERM, Why: "obsolete or unneeded interfaces with a CVE history", Names: []string{
				"lookup_dcookie", "nfsservctl", "fanotify_init", "fanotify_mark",
				"uselib", "ustat", "sysfs", "_sysctl", "vserver",
			}},
		},
	}
}

// inetSocketTypes are the alternatives of the socket row for AF_INET and
// AF_INET6: the type's low nibble (SOCK_TYPE_MASK) is exactly STREAM (1),
// DGRAM (2) or SEQPACKET (5), with any SOCK_NONBLOCK/SOCK_CLOEXEC bits
// beside it; RAW (3), RDM (4), DCCP (6), the obsolete SOCK_PACKET (10) and
// every other value fall through to EPERM. (A test of single bits, as
// before, let SOCK_PACKET through: 10 has bit 0 clear; the kernel's
// CAP_NET_RAW check was all that stopped it.) protocol & 0x100 == 0
// refuses IPPROTO_MPTCP (262): landlock's TCP port rules do not cover
// Multipath TCP sockets, so allowing them would let a sandbox bind and
// connect to any port; Go's net package and curl fall back to plain TCP.
// Testing only the low words keeps the checks immune to high bits the
// kernel truncates away.
func inetSocketTypes() [][]Cond {
	var alts [][]Cond
	for _, family := range []uint64{afINET, afINET6} {
		for _, typ := range []uint64{sockStream, sockDgram, sockSeqpacket} {
			alts = append(alts, []Cond{
				{Arg: 0, Op: Equal, Value: family},
				{Arg: 1, Op: MaskedEqualLow32, Mask: sockTypeMask, Value: typ},
				{Arg: 2, Op: BitsClear, Value: ipprotoMPTCPBit},
			})
		}
	}
	return alts
}
