package cgroup

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Info describes the cgroup set-up found on the host.
type Info struct {
	// Version is 1 (legacy or hybrid hierarchy) or 2 (unified).
	Version int
	// Controllers are the controllers usable by this package: on v1 every
	// controller with a mounted hierarchy, on v2 those listed in the
	// process's own cgroup.controllers.
	Controllers []string
	// Mounts maps, on v1, each controller to its hierarchy's mount point
	// (co-mounted controllers share one); on v2 the key "unified" holds the
	// cgroup2 mount point.
	Mounts map[string]string
}

// Has reports whether controller c is available.
func (i Info) Has(c string) bool {
	for _, x := range i.Controllers {
		if x == c {
			return true
		}
	}
	return false
}

// requiredV1 and requiredV2 are the controllers New refuses to run without:
// memory (balloons), pids (fork bombs), cpu (busy loops), freezer
// (pause/HALT, and v1 Kill). On v2 the freezer is core (cgroup.freeze),
// checked separately.
var (
	requiredV1 = []string{"memory", "pids", "cpu", "freezer"}
	requiredV2 = []string{"memory", "pids", "cpu"}
)

// Missing lists the controllers New requires that this host lacks (empty
// when New can work), for `sandhold doctor`. On v2 the freezer is part of
// the core (cgroup.freeze) and is checked by New itself.
func (i Info) Missing() []string {
	req := requiredV1
	if i.Version == 2 {
		req = requiredV2
	}
	var out []string
	for _, c := range req {
		if !i.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// Limits are the resource limits of one group. Zero values mean unlimited.
type Limits struct {
	// MemoryBytes caps memory use; swap is always off for the group.
	MemoryBytes int64
	// Pids caps the number of tasks (processes and threads).
	Pids int64
	// CPUMilli is the CPU quota in thousandths of a CPU (1000 = one CPU).
	CPUMilli int64
}

// Bounds of Limits, each with its reason.
const (
	// minMemoryBytes: below 1 MiB a group cannot even exec a shell; such a
	// limit is a caller's unit mistake, refused rather than OOM-looping.
	minMemoryBytes = 1 << 20
	// minCPUMilli: the kernel's smallest CFS quota is 1 ms per 100 ms
	// period (cpu.cfs_quota_us >= 1000), i.e. 10 milli-CPUs.
	minCPUMilli = 10
	// cpuPeriodUs is the CFS period used for every quota: the kernel
	// default (100 ms), so quotas are exact in milli-CPUs.
	cpuPeriodUs = 100000
)

// Validate refuses negative or unrepresentable limits.
func (l Limits) Validate() error {
	switch {
	case l.MemoryBytes < 0:
		return fmt.Errorf("memory limit %d: negative", l.MemoryBytes)
	case l.MemoryBytes > 0 && l.MemoryBytes < minMemoryBytes:
		return fmt.Errorf("memory limit %d: below the minimum of %d bytes", l.MemoryBytes, minMemoryBytes)
	case l.Pids < 0:
		return fmt.Errorf("pids limit %d: negative", l.Pids)
	case l.CPUMilli < 0:
		return fmt.Errorf("cpu limit %d: negative", l.CPUMilli)
	case l.CPUMilli > 0 && l.CPUMilli < minCPUMilli:
		return fmt.Errorf("cpu limit %d milli-CPUs: below the minimum of %d", l.CPUMilli, minCPUMilli)
	case l.CPUMilli > maxCPUMilli:
		return fmt.Errorf("cpu limit %d milli-CPUs: above the maximum of %d", l.CPUMilli, maxCPUMilli)
	}
	return nil
}

// maxCPUMilli: keeps quota = milli*100 µs far from overflow and from the
// kernel's own cap on cfs_quota_us; a million CPUs is no real limit anyway.
const maxCPUMilli = 1_000_000_000

// Stats are a group's current figures, its descendants included.
type Stats struct {
	MemoryBytes int64         // current usage (v1 memory.usage_in_bytes, v2 memory.current)
	MemoryPeak  int64         // high-water mark; 0 where the kernel does not expose it
	MemoryLimit int64         // 0 = unlimited
	OOMKills    int64         // processes killed by the OOM killer in this group
	CPUUsage    time.Duration // CPU time consumed
	Pids        int64         // tasks now in the group
	PidsLimit   int64         // 0 = unlimited
	Frozen      bool
	// MemoryShared: the group has no memory group of its own (made by
	// Group.SubSharingLimits); the memory figures above are left zero,
	// and its tasks' memory and OOM kills show in the ancestor's Stats.
	// CPUUsage stays the group's own (cpuacct).
	MemoryShared bool `json:"-"`
}

// Manager creates and re-adopts the groups below one base group.
type Manager interface {
	Info() Info
	// Create makes <base>/<name> in every hierarchy used, with limits l.
	// It fails with an error wrapping fs.ErrExist if the group exists.
	Create(name string, l Limits) (Group, error)
	// Open re-adopts <base>/<name> (after a server restart). It fails
	// with ErrNotFound if the group does not exist.
	Open(name string) (Group, error)
	// List names the groups under base: what a previous run left behind.
	List() ([]string, error)
	// Rename gives the group from, with its tasks, descendants and
	// limits, the name to (rename(2) of its directory within base in
	// every hierarchy) and returns it: no task migrates. It fails with an
	// error wrapping fs.ErrExist if to exists, and with ErrNoRename where
	// the kernel cannot rename groups (v2, whose cgroupfs has no rename).
	// A failure leaves from as it was.
	Rename(from, to string) (Group, error)
	// Release removes the base group in every hierarchy (on v2 also the
	// levels New made above it) where it holds no group and no task; a
	// base still in use stays, as is. For an owner that is done with it:
	// without it every server run on a fresh data dir and every test
	// leaves an empty group per hierarchy behind, and the kernel keeps
	// paying for each (an empty v1 memory cgroup holds its per-CPU
	// statistics).
	Release()
}

// Group is one cgroup (in every hierarchy used, on v1).
type Group interface {
	Name() string
	// AddProc moves the whole process pid into the group.
	AddProc(pid int) error
	// Procs lists every pid in the group and all descendant groups.
	Procs() ([]int, error)
	// Populated reports whether any task is in the group or below it,
	// with one file read (the exec hot path asks it after every command).
	Populated() (bool, error)
	// OpenProbe holds the file Populated reads open, for a caller that
	// asks after every command of a reused group: each question is then
	// one pread. The caller closes it.
	OpenProbe() (Probe, error)
	SetLimits(Limits) error
	// Freeze stops every task of the group and its descendants and
	// waits (bounded) until the kernel reports the group frozen.
	Freeze() error
	// Thaw undoes Freeze and waits (bounded) until it took effect.
	Thaw() error
	Stats() (Stats, error)
	// OOMKills is Stats' OOMKills alone, for a caller that needs only it
	// (a few file reads fewer): the kills in this group and its live
	// descendants; 0 for a group that shares its ancestor's memory group
	// or where the memory controller is off.
	OOMKills() (int64, error)
	// CPUUsage is Stats' CPUUsage alone, with one file read (v1
	// cpuacct.usage, v2 cpu.stat): the CPU time of every task that ran in
	// the group and its descendants, children that forked away included.
	// It fails with ErrNoCPUAccounting where no v1 cpuacct hierarchy is
	// mounted.
	CPUUsage() (time.Duration, error)
	// Kill kills every process in the group and its descendants and
	// waits (bounded) until they are gone.
	Kill() error
	// Destroy kills, then removes the descendants and the group itself in
	// every hierarchy. Destroying a removed group is not an error.
	Destroy() error
	// Sub creates the child group name (one per execution) with limits l.
	Sub(name string, l Limits) (Group, error)
	// SubSharingLimits creates the child group name like Sub, but, where
	// the host allows it (v1 with the memory controller in a hierarchy of
	// its own, alone or with cpu), without memory and CPU groups of its
	// own: the child and its descendants are charged to, limited by and
	// OOM-killed in this group's memory group and run under this group's
	// CPU quota, and memory or CPU limits for them are refused
	// (l.MemoryBytes and l.CPUMilli must be 0). Every v1 memory group
	// costs the kernel per-shrinker state that grows with the file
	// systems ever mounted on the host, and a CPU group per-CPU scheduler
	// state; a child that exists for its pids limit, its CPU time
	// (cpuacct) or its kill need not pay them. Elsewhere it is Sub (see
	// the package doc for v2).
	SubSharingLimits(name string, l Limits) (Group, error)
	// OpenSub re-adopts the existing child group name (ErrNotFound if
	// absent), and Subs names the existing children: after a restart the
	// server finds the executions a re-adopted sandbox still runs.
	OpenSub(name string) (Group, error)
	Subs() ([]string, error)
	// OpenThreadAttach returns, on v1, the group's `tasks` file in every
	// hierarchy, opened write-only by this process; on v2, the directory
	// of the group's process leaf opened O_PATH for clone3
	// CLONE_INTO_CGROUP. The caller closes them. See the package doc.
	OpenThreadAttach() ([]*os.File, error)
	// Delegate gives host uid/gid (a user namespace's root) what it needs
	// to manage this subtree itself, and no more.
	Delegate(uid, gid int) error
}

// Probe answers Group.Populated from a control file held open (see
// OpenProbe).
type Probe interface {
	Populated() (bool, error)
	Close() error
}

// Errors callers branch on.
var (
	// ErrNotFound: Open of a group that does not exist; the caller then
	// treats the sandbox as gone.
	ErrNotFound = errors.New("cgroup not found")
	// ErrInvalidName: a name that could escape the base or collide with
	// a control file; callers map it to a bad request.
	ErrInvalidName = errors.New("invalid cgroup name")
	// ErrUnsupported: no cgroup support on this platform; callers refuse
	// to start unless isolation is explicitly turned off.
	ErrUnsupported = errors.New("cgroups are not supported on this platform")
	// ErrContainsSelf: Kill or Freeze asked for a group holding the
	// calling process; refused so the server never kills or freezes itself.
	ErrContainsSelf = errors.New("cgroup contains the calling process")
	// ErrParentFrozen: on v1 a group below a frozen group cannot thaw, so
	// its killed tasks cannot exit; the caller thaws the sandbox first
	// (or destroys the whole sandbox).
	ErrParentFrozen = errors.New("a parent cgroup is frozen")
	// ErrNoCPUAccounting: a v1 host without a cpuacct hierarchy; callers
	// fall back to the main process's own CPU time.
	ErrNoCPUAccounting = errors.New("no cpuacct hierarchy")
	// ErrNoRename: Manager.Rename on a host whose cgroups cannot rename
	// a group (cgroup v2).
	ErrNoRename = errors.New("cgroups of this host cannot be renamed")
)

// maxNameLen caps a group name: names become path components on every
// hierarchy, and sandbox/execution ids are far shorter; a long name only
// serves to hit PATH_MAX deep in a tree.
const maxNameLen = 64

// reservedNames are control files without a dot in their name (v1 cgroupfs
// root and group files); a group of that name would fail or be confusing.
var reservedNames = map[string]bool{
	"tasks":             true, // v1 thread list
	"notify_on_release": true, // v1 release hook flag
	"release_agent":     true, // v1 root-only hook path
}

// ValidateName accepts 1..64 characters from [A-Za-z0-9_-]. No dots (so no
// "." or "..", and no clash with any "controller.file" name or with the v2
// ".procs" leaf), no slash, nothing a shell or a log would misread.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidName, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q: byte %d is not in [A-Za-z0-9_-]", ErrInvalidName, name, i)
		}
	}
	if reservedNames[name] {
		return fmt.Errorf("%w: %q is a control file name", ErrInvalidName, name)
	}
	return nil
}

// validateBase accepts a base path relative to the process's own cgroup:
// one or more valid names separated by "/".
func validateBase(base string) error {
	if base == "" {
		return fmt.Errorf("base: %w: empty", ErrInvalidName)
	}
	start := 0
	depth := 0
	for i := 0; i <= len(base); i++ {
		if i == len(base) || base[i] == '/' {
			if err := ValidateName(base[start:i]); err != nil {
				return fmt.Errorf("base %q: %w", base, err)
			}
			depth++
			start = i + 1
		}
	}
	if depth > maxBaseDepth {
		return fmt.Errorf("base %q: deeper than %d levels", base, maxBaseDepth)
	}
	return nil
}

// maxBaseDepth caps the base path: deep cgroup trees cost the kernel on
// every charge, and the server needs one or two levels.
const maxBaseDepth = 4

// Reap kills and removes every group under m's base that keep does not
// claim (a nil keep claims nothing): what a previous run of the server left
// behind. It carries on past a failing group and returns every error joined.
func Reap(m Manager, keep func(name string) bool) (reaped []string, err error) {
	names, err := m.List()
	if err != nil {
		return nil, fmt.Errorf("reap: %w", err)
	}
	var errs []error
	for _, n := range names {
		if keep != nil && keep(n) {
			continue
		}
		g, oerr := openForReap(m, n)
		if oerr != nil {
			errs = append(errs, fmt.Errorf("reap %q: %w", n, oerr))
			continue
		}
		if derr := g.Destroy(); derr != nil {
			errs = append(errs, fmt.Errorf("reap %q: %w", n, derr))
			continue
		}
		reaped = append(reaped, n)
	}
	return reaped, errors.Join(errs...)
}

// reaper is implemented by managers that can open a half-created group
// (present in only some hierarchies) for removal.
type reaper interface {
	openAny(name string) (Group, error)
}

func openForReap(m Manager, name string) (Group, error) {
	if r, ok := m.(reaper); ok {
		return r.openAny(name)
	}
	return m.Open(name)
}
