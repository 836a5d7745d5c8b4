// Package rootfs builds a sandbox's root file system inside a fresh user and
// mount namespace and pivots into it.
//
// What it stops: a sandboxed process seeing or changing the host's files.
// The root is a small tmpfs holding read-only binds of the host's /usr (and
// the merged-/usr links), a synthetic /etc with no host secrets (a few
// non-secret host files bound read-only, listed in etcBinds with a reason
// each), a fresh /proc of the sandbox's pid namespace with the usual
// sensitive entries masked, a minimal /dev (null, zero, full, random,
// urandom, tty, a private devpts instance, shm), a size-capped /tmp and the
// sandbox's /workspace bound read-write from its persistent host directory.
// After pivot_root and a lazy unmount of the old root, no host path is
// reachable by name; the root itself is remounted read-only.
//
// A template sandbox's root is an overlay instead (overlay_linux.go): the
// template's read-only layers below, the sandbox's writable layer above, so
// that it sees the template's userland and not the host's.
//
// What it does not stop on its own: reading what /usr holds (it is the
// host's, read-only), kernel attack surface (seccomp), writes the mount
// flags allow (landlock narrows them further), resource exhaustion
// (cgroups).
package rootfs

// Spec is what one sandbox root needs.
type Spec struct {
	// Hostname of the sandbox (also written to /etc/hostname and hosts).
	Hostname string
	// UID and GID of the sandbox user, as the namespace sees them.
	UID, GID int
	// WorkspaceFD is a detached mount of the sandbox's persistent
	// workspace directory (DetachedMount), attached at /workspace.
	WorkspaceFD int
	// TmpBytes and ShmBytes cap /tmp and /dev/shm.
	TmpBytes, ShmBytes int64
	// Overlay, if set, makes the root an overlay of a template's layers
	// instead of the host's /usr (overlay_linux.go).
	Overlay *Overlay
	// MaxPTYs caps the terminals of the sandbox's devpts instance (its
	// max= option): every instance draws on the host's one pool
	// (kernel.pty.max), which one sandbox must not empty. 0: no cap of
	// its own.
	MaxPTYs int
	// Sysctls are written through the sandbox's fresh /proc before its
	// /proc/sys is made read-only: settings of the sandbox's own
	// namespaces (its user namespace's user/max_*, its network
	// namespace's net/...), which the init may write as their owner.
	Sysctls []Sysctl
}

// Sysctl is one setting under /proc/sys.
type Sysctl struct {
	// Name is the path below /proc/sys ("user/max_inotify_watches").
	Name  string
	Value string
	// Optional settings are skipped where the kernel has none of that
	// name (it predates them).
	Optional bool
}

// Overlay is a template root: read-only layers shared by every sandbox of
// the template, and the sandbox's own writable layer.
type Overlay struct {
	// LayerFDs are detached mounts of the template's layers, the lowest
	// first (DetachedLayer: read-only, nosuid, nodev, id-mapped into the
	// sandbox's user namespace). At most MaxLayers.
	LayerFDs []int
	// WritableFD is a detached mount of a directory holding "upper" and
	// "work", the overlay's upper and work directories, owned by the
	// namespace's root (the sandbox's writable layer, in its quota'd
	// workspace image: WritableDirs).
	WritableFD int
}

// MaxLayers caps the layers of one overlay root: each is a descriptor of
// the setup message and a path in the overlay's mount options (one page).
const MaxLayers = 120

// Names of the writable layer's directories inside Overlay.WritableFD.
const (
	UpperDir = "upper"
	WorkDir  = "work"
)

// Workspace is where the persistent directory appears in the sandbox.
const Workspace = "/workspace"
