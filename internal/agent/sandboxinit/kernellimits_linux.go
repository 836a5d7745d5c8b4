package sandboxinit

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/rootfs"
)

// nsKinds are the namespaces a sandbox may not make (0 each), a second
// wall behind seccomp, which refuses unshare, setns and clone with
// CLONE_NEW* to every command; the init has made its own (the cgroup
// namespace) before these are written. Mount namespaces are not among
// them: the root's build goes on making anonymous ones (open_tree clones
// for the /proc masks) after /proc is written, and seccomp refuses
// open_tree, fsmount, unshare and clone's CLONE_NEWNS to every command.
// Time namespaces are newer than some kernels (5.6).
var nsKinds = []struct {
	name     string
	optional bool
}{
	{"user", false}, {"pid", false}, {"net", false}, {"ipc", false}, {"uts", false},
	{"cgroup", false}, {"time", true},
}

// sysctls are the user namespace's own limits, written by the init as
// its owner (rootfs.Spec.Sysctls). fanotify is refused by seccomp too;
// its counts exist from 5.13.
func sysctls(k proto.KernelLimits) []rootfs.Sysctl {
	k = k.WithDefaults()
	out := []rootfs.Sysctl{
		{Name: "user/max_inotify_instances", Value: strconv.Itoa(k.InotifyInstances)},
		{Name: "user/max_inotify_watches", Value: strconv.Itoa(k.InotifyWatches)},
		{Name: "user/max_fanotify_groups", Value: "0", Optional: true},
		{Name: "user/max_fanotify_marks", Value: "0", Optional: true},
	}
	for _, ns := range nsKinds {
		out = append(out, rootfs.Sysctl{Name: "user/max_" + ns.name + "_namespaces", Value: "0", Optional: ns.optional})
	}
	return out
}

// applyRlimits lowers the init's own hard and soft limits of the counts
// the kernel keeps per user as rlimits; every command inherits them and
// none can raise a hard limit (that needs CAP_SYS_RESOURCE in the host's
// user namespace). A limit already lower stays.
func applyRlimits(k proto.KernelLimits) error {
	k = k.WithDefaults()
	for _, r := range []struct {
		res  int
		name string
		v    uint64
	}{
		{unix.RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING", k.SigPending},
		{unix.RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE", k.MsgQueue},
		{unix.RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK", k.MemLock},
	} {
		var cur unix.Rlimit
		if err := unix.Getrlimit(r.res, &cur); err != nil {
			return fmt.Errorf("read %s: %w", r.name, err)
		}
		v := min(r.v, cur.Max)
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("set %s: %w", r.name, err)
		}
	}
	return nil
}

// kernelCounts checks that the sandbox's user namespace is owned by the
// sandbox's own host uid (it sees its owner as its uid 0; host root would
// be the overflow id) and applies the rlimits; it returns the layer's
// detail.
func kernelCounts(k proto.KernelLimits, maxPTYs int) (string, error) {
	owner, err := ownUserNSOwner()
	if err != nil {
		return "", err
	}
	if owner != 0 {
		return "", fmt.Errorf("the user namespace is owned by an id it does not map (uid %d inside): its kernel counts are charged to another user", owner)
	}
	if err := applyRlimits(k); err != nil {
		return "", err
	}
	k = k.WithDefaults()
	return fmt.Sprintf("user namespace owned by the sandbox's own host uid, which every per-user kernel count is charged to (not root's, not another sandbox's); "+
		"per sandbox user: %d inotify instances, %d inotify watches, %d queued signals, %d bytes of message queues, %d bytes of locked memory; "+
		"no new namespaces; %d terminals", k.InotifyInstances, k.InotifyWatches, k.SigPending, k.MsgQueue, k.MemLock, maxPTYs), nil
}

// nsGetOwnerUID is NS_GET_OWNER_UID (linux/nsfs.h): the owner of a user
// namespace, as the caller's namespace sees it.
const nsGetOwnerUID = 0xb704

// ownUserNSOwner is the owner of the calling process's user namespace as
// the namespace itself sees it: 0 when the namespace is owned by the host
// id its uid 0 maps to (launcher.AsOwner), the overflow uid (65534) when the
// owner is an id the namespace does not map, such as host root.
func ownUserNSOwner() (uint32, error) {
	fd, err := unix.Open("/proc/self/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open user namespace: %w", err)
	}
	defer fds.Close(fd)
	var uid uint32
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), nsGetOwnerUID, uintptr(unsafe.Pointer(&uid))); e != 0 { //nolint:gosec // G103: the ioctl writes one uint32
		return 0, fmt.Errorf("NS_GET_OWNER_UID: %w", e)
	}
	return uid, nil
}
