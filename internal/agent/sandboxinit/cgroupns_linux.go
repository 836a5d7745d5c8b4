package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// The sandbox's cgroup namespace.
//
// A cgroup namespace belongs to each thread, and unshare() changes only the
// calling one; a child is born in the namespace of the thread that forks
// it. The init is a Go program with several threads by the time its code
// runs, and it once unshared on its main thread but forked commands from
// others: every command was in the host's namespace and saw the host's
// cgroup paths, while the layer was reported active.
//
// Now one thread does both. Main locks its goroutine to its thread; that
// thread makes the namespace (after the server placed the init in the
// sandbox's cgroups, so the namespace is rooted there) and then runs
// forkLoop, which forks every command. The init's other threads stay in the
// namespace the init started in; they never fork, and nothing of theirs is
// visible inside (the init is not dumpable, so /proc/1/task is closed to
// sandboxed code). Moving every thread would need either
// syscall.AllThreadsSyscall, which refuses to run in cgo builds (go test
// builds with cgo), or a re-exec of the init from the new namespace, which
// measured as a second start of the whole binary (tens of ms of CPU per
// sandbox).

// An init that can sleep (sleep_linux.go) moves every thread instead
// (enterCgroupNS with allThreads): the thread that executes its keeper is not the
// forking one, and the keeper and the resumed init keep that thread's
// namespace; the seccomp filter forbids unshare and setns afterwards. psx
// makes the call on every thread at once (libpsx in cgo builds), each
// thread getting a namespace of its own rooted at the same group.

// enterCgroupNS makes the sandbox's cgroup namespace on the calling
// (locked) thread and checks it: the thread's namespace is no longer hostNS,
// the one it started in, and /proc/thread-self/cgroup shows the namespace
// root "/" in every hierarchy, so no host path is visible.
func enterCgroupNS(hostNS uint64, allThreads bool) (string, error) {
	if allThreads {
		if _, _, errno := psx.Syscall3(unix.SYS_UNSHARE, unix.CLONE_NEWCGROUP, 0, 0); errno != 0 {
			return "", fmt.Errorf("unshare(CLONE_NEWCGROUP) on every thread: %w", errno)
		}
	} else if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return "", fmt.Errorf("unshare(CLONE_NEWCGROUP): %w", err)
	}
	own, err := nsInode("/proc/thread-self/ns/cgroup")
	if err != nil {
		return "", err
	}
	if own == hostNS {
		return "", errors.New("the forking thread is still in the server's cgroup namespace")
	}
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read /proc/thread-self/cgroup: %w", err)
	}
	if p, ok := hostCgroupPath(string(b)); ok {
		return "", fmt.Errorf("/proc/thread-self/cgroup shows %q, want the namespace root", p)
	}
	if allThreads {
		return "own namespace rooted at the sandbox's group, on every thread of the init", nil
	}
	return "own namespace rooted at the sandbox's group; every command is forked by the init's thread inside it", nil
}

// hostCgroupPath returns the first path in a /proc/self/cgroup listing
// that is not the namespace root "/".
func hostCgroupPath(listing string) (string, bool) {
	for _, line := range strings.Split(strings.TrimSpace(listing), "\n") {
		// "hierarchy-id:controllers:path"; the path may hold colons.
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return line, true
		}
		if parts[2] != "/" {
			return parts[2], true
		}
	}
	return "", false
}

// nsInode is the inode of a namespace link (/proc/…/ns/…): two threads are
// in the same namespace exactly when the inodes are equal.
func nsInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Ino, nil
}
