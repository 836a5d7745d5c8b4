package launcher

import (
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// SysProcAttr is how every init is cloned: all namespaces but the
// cgroup one (the init makes that itself once it sits in its group), its
// id maps, root of the new user namespace, its own session, killed with
// its parent. The clone runs as the sandbox's own host uid (AsOwner),
// which then owns the user namespace.
func SysProcAttr(hostUID, hostGID uint32, hostNetwork bool) *syscall.SysProcAttr {
	var netns uintptr = unix.CLONE_NEWNET
	if hostNetwork {
		netns = 0
	}
	return &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
			unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | netns,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(hostUID), Size: IDRange}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(hostGID), Size: IDRange}},
		GidMappingsEnableSetgroups: true,
		// Become the namespace's root: without this the init keeps host
		// uid 0, which is unmapped inside, and has no capabilities there.
		Credential: &syscall.Credential{Uid: 0, Gid: 0},
		Setsid:     true,
		// If the server dies, its sandboxes die with it (and the pid
		// namespace takes every process inside along); a restarted server
		// reaps their cgroups and starts them again on demand.
		Pdeathsig: syscall.SIGKILL,
	}
}

// The owner of a sandbox's user namespace.
//
// The kernel charges what it counts per user — inotify instances and
// watches, queued signals (RLIMIT_SIGPENDING), locked shared memory
// (RLIMIT_MEMLOCK), POSIX message queue bytes (RLIMIT_MSGQUEUE),
// processes (RLIMIT_NPROC), namespaces — to the user inside the namespace
// and then up the chain to the namespace's owner in its parent
// (kernel/ucount.c: inc_ucount and inc_rlimit_ucounts walk
// ns->ucounts, which create_user_ns takes from the creator's euid). Cloned
// by host root, every sandbox drew on root's counts: one sandbox holding
// 128 inotify instances left root, the server and every other sandbox
// with none. So each init is cloned by a thread whose ids are its
// sandbox's own unprivileged host uid and gid (the first of its range,
// uid 0 inside), and the counts of a sandbox are that uid's alone.
//
// The thread keeps its capabilities (SECBIT_NO_SETUID_FIXUP): the same
// clone writes the new namespace's id maps, which needs CAP_SETUID and
// CAP_SETGID over the parent namespace (the server still writes them; the
// maps are the same). The thread is locked while it holds those ids, and
// threads the runtime starts meanwhile come from its template thread, not
// from a locked one, so no other goroutine runs with them.

// secbitNoSetuidFixup is SECBIT_NO_SETUID_FIXUP (linux/securebits.h):
// changing uids leaves the capability sets alone.
const secbitNoSetuidFixup = 1 << 2

// AsOwner runs f, which clones an init with CLONE_NEWUSER, on a thread
// whose real, effective, saved and file-system ids are uid and gid for the
// call: the new user namespace is then owned by uid. (Tests also use it to
// act on a sandbox as its owner.)
//
// The thread is locked to a goroutine of its own for the call and has
// root's ids again before it is given back. If they cannot be restored,
// the goroutine ends with it locked, so the runtime ends the thread and
// nothing else ever runs with its ids; the init then gets its
// parent-death signal where it follows this thread (a clone without
// CLONE_PARENT, as the server's own clone does), and the launch fails either way.
func AsOwner(uid, gid uint32, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, secbitNoSetuidFixup, 0, 0, 0); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("keep capabilities across the owner's ids: %w", err)
			return
		}
		err := asIDs(uid, gid)
		if err == nil {
			err = f()
		}
		if rerr := restoreRoot(); rerr != nil {
			done <- fmt.Errorf("restore the cloning thread's ids: %w", rerr) // the thread ends, locked
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// asIDs sets the calling thread's ids (raw calls: syscall.Setresuid and
// unix.Setresuid change every thread of the process).
func asIDs(uid, gid uint32) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("take the sandbox's host gid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("take the sandbox's host uid: %w", e)
	}
	return nil
}

// restoreRoot gives the calling thread root's ids back (it kept
// CAP_SETUID and CAP_SETGID through SECBIT_NO_SETUID_FIXUP) and clears
// the securebit.
func restoreRoot() error {
	if err := asIDs(0, 0); err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_SECUREBITS, 0, 0, 0, 0)
}
