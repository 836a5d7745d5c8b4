package proto

// KernelLimits bound what the kernel counts per user rather than per
// cgroup, for each user of a sandbox (its user and root: commands cannot
// change uid, so a sandbox has at most two). Counts are charged to the
// user inside and, up the chain, to the user namespace's owner — the
// sandbox's own host uid (launcher.AsOwner) — so a sandbox never draws on
// another's or on host root's. Zero fields take the Default* values.
type KernelLimits struct {
	// InotifyInstances and InotifyWatches are the user namespace's
	// user/max_inotify_instances and user/max_inotify_watches.
	InotifyInstances int `json:"inotify_instances,omitempty"`
	InotifyWatches   int `json:"inotify_watches,omitempty"`
	// SigPending (queued signals), MsgQueue (bytes of POSIX message
	// queues) and MemLock (bytes of locked shared memory; mlock is per
	// process) are hard rlimits the init sets on itself, so every
	// command inherits them and none can raise them.
	SigPending uint64 `json:"sigpending,omitempty"`
	MsgQueue   uint64 `json:"msgqueue,omitempty"`
	MemLock    uint64 `json:"memlock,omitempty"`
}

// The defaults of KernelLimits.
const (
	// DefaultInotifyInstances is the kernel's own per-user default.
	DefaultInotifyInstances = 128
	// DefaultInotifyWatches is room for a file watcher over a large
	// project (a tree with node_modules); each watch pins an inode.
	DefaultInotifyWatches = 65536
	// DefaultSigPending is far above what shells and runtimes queue.
	DefaultSigPending = 4096
	// DefaultMsgQueue is the kernel's per-user default (800 KiB).
	DefaultMsgQueue = 819200
	// DefaultMemLock is the kernel's per-user default (8 MiB).
	DefaultMemLock = 8 << 20
)

// WithDefaults fills zero fields.
func (k KernelLimits) WithDefaults() KernelLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def64 := func(v *uint64, d uint64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&k.InotifyInstances, DefaultInotifyInstances)
	def(&k.InotifyWatches, DefaultInotifyWatches)
	def64(&k.SigPending, DefaultSigPending)
	def64(&k.MsgQueue, DefaultMsgQueue)
	def64(&k.MemLock, DefaultMemLock)
	return k
}
