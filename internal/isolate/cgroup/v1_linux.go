package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// v1Used are the v1 controllers this package puts groups in; cpuacct only
// feeds Stats.CPUUsage and is optional.
var v1Used = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// v1Unlimited is what memory.limit_in_bytes reads when unlimited: the page
// counter maximum rounded to pages. Anything at or above 2^62 is treated
// as unlimited.
const v1UnlimitedFloor = int64(1) << 62

type v1Hier struct {
	controllers []string
	ownDir      string // <mount>/<own cgroup>: where this process sits
	baseDir     string // <ownDir>/<base>
}

type v1Manager struct {
	info  Info
	hiers []v1Hier // distinct hierarchies carrying v1Used controllers
	// lean are the hierarchies of hiers a group made by SubSharingLimits
	// has a directory in: all but those carrying only memory and cpu
	// (nil when memory shares a hierarchy with another controller, where
	// SubSharingLimits is Sub). A cpu hierarchy co-mounted with cpuacct
	// stays: cpuacct gives per-execution CPU time.
	lean []v1Hier
}

// sharable: controllers a SubSharingLimits group leaves to its ancestor.
var sharable = []string{"memory", "cpu"}

func onlySharable(h v1Hier) bool {
	return !slices.ContainsFunc(h.controllers, func(c string) bool {
		return slices.Contains(v1Used, c) && !slices.Contains(sharable, c)
	})
}

var (
	_ Manager = (*v1Manager)(nil)
	_ Group   = (*v1Group)(nil)
)

func newV1(lay layout, base string) (*v1Manager, error) {
	for _, c := range requiredV1 {
		if lay.info.Mounts[c] == "" {
			return nil, fmt.Errorf("cgroup v1: required controller %q is not mounted", c)
		}
	}
	m := &v1Manager{info: lay.info}
	for _, h := range lay.v1 {
		if !slices.ContainsFunc(h.controllers, func(c string) bool { return slices.Contains(v1Used, c) }) {
			continue
		}
		m.hiers = append(m.hiers, v1Hier{controllers: h.controllers, ownDir: h.own, baseDir: filepath.Join(h.own, base)})
	}
	for _, h := range m.hiers {
		if slices.Contains(h.controllers, "memory") && onlySharable(h) {
			for _, k := range m.hiers {
				if !onlySharable(k) {
					m.lean = append(m.lean, k)
				}
			}
			break
		}
	}
	for _, h := range m.hiers {
		if err := os.MkdirAll(h.baseDir, 0o755); err != nil { //nolint:gosec // G301: cgroupfs convention (systemd, runc): anyone may read a group's stats; control files stay root's 0644, and Delegate chowns what a delegate may write
			return nil, fmt.Errorf("cgroup v1: create base in %s hierarchy: %w", strings.Join(h.controllers, ","), err)
		}
	}
	return m, nil
}

func (m *v1Manager) Info() Info { return m.info }

func (m *v1Manager) Release() {
	for _, h := range m.hiers {
		_ = os.Remove(h.baseDir) // rmdir: fails, harmlessly, while a group or task is left
	}
}

// dir returns the directory of group rel in the hierarchy carrying ctrl.
func (m *v1Manager) dir(ctrl, rel string) string {
	for _, h := range m.hiers {
		if slices.Contains(h.controllers, ctrl) {
			return filepath.Join(h.baseDir, rel)
		}
	}
	return ""
}

func (m *v1Manager) Create(name string, l Limits) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return m.create(name, name, name, l)
}

// create makes group rel; sharedRel is its place in the hierarchies it
// shares (see v1Group.sharedRel): rel for a group of its own everywhere.
func (m *v1Manager) create(name, rel, sharedRel string, l Limits) (*v1Group, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("create cgroup %q: %w", rel, err)
	}
	g := &v1Group{m: m, name: name, rel: rel, sharedRel: sharedRel}
	if g.shares() && (l.MemoryBytes != 0 || (l.CPUMilli != 0 && g.dropped("cpu"))) {
		return nil, fmt.Errorf("create cgroup %q: %w", rel, errSharedLimit)
	}
	hiers := g.hiers()
	for i, h := range hiers {
		if err := os.Mkdir(filepath.Join(h.baseDir, rel), 0o755); err != nil { //nolint:gosec // G301: cgroupfs convention (systemd, runc): anyone may read a group's stats; control files stay root's 0644, and Delegate chowns what a delegate may write
			for _, done := range hiers[:i] {
				_ = unix.Rmdir(filepath.Join(done.baseDir, rel))
			}
			return nil, fmt.Errorf("create cgroup %q: %w", rel, err)
		}
	}
	// Swap off for memory reclaim inside the group; memsw (below) makes it
	// a hard rule where swap accounting exists. A group sharing its
	// ancestor's memory group has the ancestor's setting.
	if !g.shares() {
		if err := writeString(m.dir("memory", rel)+"/memory.swappiness", "0"); err != nil {
			_ = g.Destroy()
			return nil, fmt.Errorf("create cgroup %q: %w", rel, err)
		}
	}
	if err := g.SetLimits(l); err != nil {
		_ = g.Destroy()
		return nil, fmt.Errorf("create cgroup %q: %w", rel, err)
	}
	return g, nil
}

func (m *v1Manager) Open(name string) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	var missing []string
	for _, h := range m.hiers {
		if _, err := os.Stat(filepath.Join(h.baseDir, name)); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("open cgroup %q: %w", name, err)
			}
			missing = append(missing, strings.Join(h.controllers, ","))
		}
	}
	switch {
	case len(missing) == len(m.hiers):
		return nil, fmt.Errorf("open cgroup %q: %w", name, ErrNotFound)
	case len(missing) > 0:
		// Half-created by a run that crashed: its limits cannot be
		// trusted, so it is only good for Reap.
		return nil, fmt.Errorf("open cgroup %q: missing in hierarchies %v; reap it", name, missing)
	}
	return &v1Group{m: m, name: name, rel: name, sharedRel: name}, nil
}

func (m *v1Manager) openAny(name string) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return &v1Group{m: m, name: name, rel: name, sharedRel: name}, nil
}

// Rename renames from's directory to to in every hierarchy, in order;
// if one fails, those already renamed are renamed back. The kernel's v1
// rename (cgroup1_rename) moves nothing: the group keeps its tasks,
// children, limits and charges, and /proc/<pid>/cgroup names it anew.
func (m *v1Manager) Rename(from, to string) (Group, error) {
	if err := ValidateName(from); err != nil {
		return nil, err
	}
	if err := ValidateName(to); err != nil {
		return nil, err
	}
	for i, h := range m.hiers {
		// No RENAME_NOREPLACE (kernfs refuses every flag, EINVAL): kernfs
		// itself refuses a name that exists (EEXIST).
		if err := unix.Rename(filepath.Join(h.baseDir, from), filepath.Join(h.baseDir, to)); err != nil {
			var errs []error
			for _, done := range m.hiers[:i] {
				if berr := os.Rename(filepath.Join(done.baseDir, to), filepath.Join(done.baseDir, from)); berr != nil {
					errs = append(errs, berr)
				}
			}
			if errors.Is(err, unix.EEXIST) {
				err = fs.ErrExist
			}
			errs = append([]error{fmt.Errorf("rename cgroup %q to %q in hierarchy %s: %w", from, to, strings.Join(h.controllers, ","), err)}, errs...)
			return nil, errors.Join(errs...)
		}
	}
	return &v1Group{m: m, name: to, rel: to, sharedRel: to}, nil
}

func (m *v1Manager) List() ([]string, error) {
	set := map[string]bool{}
	for _, h := range m.hiers {
		if err := listNames(h.baseDir, set); err != nil {
			return nil, fmt.Errorf("list cgroups: %w", err)
		}
	}
	return sortedNames(set), nil
}

type v1Group struct {
	m    *v1Manager
	name string
	rel  string // path below base: "sbx" or "sbx/exec1"
	// sharedRel is the group's place in the memory hierarchy (and in a
	// cpu hierarchy of its own): rel for a group of its own there; for a
	// group made by SubSharingLimits (and its descendants), the nearest
	// ancestor that has one, whose limits, accounting and OOM killer then
	// cover the group's tasks.
	sharedRel string
}

// errSharedLimit: a memory or CPU limit asked of a group that shares its
// ancestor's memory and CPU groups; refused rather than silently not
// applied.
var errSharedLimit = errors.New("the group shares its ancestor's memory and CPU groups and cannot have memory or CPU limits of its own")

func (g *v1Group) Name() string { return g.name }

// shares reports whether the group is charged to an ancestor's memory
// (and CPU) groups instead of its own.
func (g *v1Group) shares() bool { return g.sharedRel != g.rel }

// hiers are the hierarchies the group has a directory in: all of them, or
// the manager's lean ones for a group that shares its ancestor's.
func (g *v1Group) hiers() []v1Hier {
	if g.shares() {
		return g.m.lean
	}
	return g.m.hiers
}

// dropped reports whether the group has no directory of its own in the
// hierarchy carrying ctrl (it sits in its ancestor's there).
func (g *v1Group) dropped(ctrl string) bool {
	if !g.shares() {
		return false
	}
	return !slices.ContainsFunc(g.m.lean, func(h v1Hier) bool { return slices.Contains(h.controllers, ctrl) })
}

func (g *v1Group) dir(ctrl string) string {
	if g.dropped(ctrl) {
		return g.m.dir(ctrl, g.sharedRel)
	}
	return g.m.dir(ctrl, g.rel)
}

func (g *v1Group) AddProc(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("add pid %d to cgroup %q: invalid pid", pid, g.rel)
	}
	for _, h := range g.hiers() {
		if err := writeString(filepath.Join(h.baseDir, g.rel, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("add pid %d to cgroup %q: %w", pid, g.rel, err)
		}
	}
	if g.shares() {
		// The process must be charged to the memory (and CPU) groups
		// that stand for this one, wherever it was before.
		for _, h := range g.m.hiers {
			if slices.ContainsFunc(g.m.lean, func(k v1Hier) bool { return k.baseDir == h.baseDir }) {
				continue
			}
			if err := writeString(filepath.Join(h.baseDir, g.sharedRel, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
				return fmt.Errorf("add pid %d to cgroup %q: %w", pid, g.rel, err)
			}
		}
	}
	return nil
}

// subtreeDirs lists the group and its descendants in every hierarchy.
func (g *v1Group) subtreeDirs() ([]string, error) {
	var all []string
	for _, h := range g.hiers() {
		dirs, err := walkGroups(filepath.Join(h.baseDir, g.rel))
		if err != nil {
			return nil, err
		}
		all = append(all, dirs...)
	}
	return all, nil
}

func (g *v1Group) Procs() ([]int, error) {
	dirs, err := g.subtreeDirs()
	if err != nil {
		return nil, fmt.Errorf("procs of cgroup %q: %w", g.rel, err)
	}
	set, err := collectPids(dirs, "cgroup.procs")
	if err != nil {
		return nil, fmt.Errorf("procs of cgroup %q: %w", g.rel, err)
	}
	return sortedKeys(set), nil
}

// Populated reads pids.current, which counts the tasks of the whole
// subtree (visiting threads included).
func (g *v1Group) Populated() (bool, error) {
	n, err := readInt(g.dir("pids") + "/pids.current")
	if err != nil {
		return false, fmt.Errorf("tasks of cgroup %q: %w", g.rel, err)
	}
	return n > 0, nil
}

func (g *v1Group) SetLimits(l Limits) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("limits of cgroup %q: %w", g.rel, err)
	}
	if g.shares() {
		if l.MemoryBytes != 0 || (l.CPUMilli != 0 && g.dropped("cpu")) {
			return fmt.Errorf("limits of cgroup %q: %w", g.rel, errSharedLimit)
		}
		return g.setPidsCPU(l)
	}
	mem := g.dir("memory")
	limit := "-1"
	if l.MemoryBytes > 0 {
		limit = strconv.FormatInt(l.MemoryBytes, 10)
	}
	// memsw.limit must stay >= limit at every step: lift memsw first,
	// then set the limit, then pin memsw to it (memory+swap <= limit
	// means no swap at all).
	memsw := mem + "/memory.memsw.limit_in_bytes"
	_, statErr := os.Stat(memsw)
	hasMemsw := statErr == nil
	if hasMemsw {
		if err := writeString(memsw, "-1"); err != nil {
			return fmt.Errorf("limits of cgroup %q: %w", g.rel, err)
		}
	}
	if err := writeString(mem+"/memory.limit_in_bytes", limit); err != nil {
		return fmt.Errorf("limits of cgroup %q: %w", g.rel, err)
	}
	if hasMemsw {
		if err := writeString(memsw, limit); err != nil {
			return fmt.Errorf("limits of cgroup %q: %w", g.rel, err)
		}
	}
	// Socket buffers are not memory.usage on v1: only TCP's can be
	// charged, to a counter of their own that the kernel keeps only once
	// a limit is written. The same figure as the memory limit bounds them
	// per sandbox (past it the group's TCP sockets are under memory
	// pressure and their sends wait); without it one sandbox's
	// connections fill host-wide tcp_mem and every TCP socket on the host
	// suffers. UDP and the other protocols cannot be charged on v1
	// (SECURITY.md, "Shared kernel resources").
	if tcp := mem + "/memory.kmem.tcp.limit_in_bytes"; fileExists(tcp) {
		if err := writeString(tcp, limit); err != nil {
			return fmt.Errorf("limits of cgroup %q: %w", g.rel, err)
		}
	}
	return g.setPidsCPU(l)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// setPidsCPU writes the pids and CPU limits of l.
func (g *v1Group) setPidsCPU(l Limits) error {
	pids := "max"
	if l.Pids > 0 {
		pids = strconv.FormatInt(l.Pids, 10)
	}
	if err := writeString(g.dir("pids")+"/pids.max", pids); err != nil {
		return fmt.Errorf("limits of cgroup %q: %w", g.rel, err)
	}
	if g.dropped("cpu") {
		return nil // the ancestor's CPU group holds the quota
	}

	cpu := g.dir("cpu")
	quota := "-1"
	if l.CPUMilli > 0 {
		quota = strconv.FormatInt(l.CPUMilli*cpuPeriodUs/1000, 10)
	}
	// Written only when they differ (see cpuWrite): the period first, so
	// the quota is read against it.
	if err := cpuWrite(cpu+"/cpu.cfs_period_us", strconv.Itoa(cpuPeriodUs)); err != nil {
		return fmt.Errorf("limits of cgroup %q: %w", g.rel, err)
	}
	if err := cpuWrite(cpu+"/cpu.cfs_quota_us", quota); err != nil {
		return fmt.Errorf("limits of cgroup %q: %w", g.rel, err)
	}
	return nil
}

// cpuWrite writes a CFS bandwidth file (v1 cpu.cfs_period_us and
// cpu.cfs_quota_us, v2 cpu.max) only when it does not already hold want.
// Every such write makes the kernel check the bandwidth of every task
// group on the host (tg_set_cfs_bandwidth → __cfs_schedulable walks the
// whole tree from the root), so with three groups per sandbox and a
// thousand sandboxes each write costs hundreds of microseconds and grows
// with the count; a fresh group already holds the unlimited defaults, and
// a read walks nothing.
func cpuWrite(path, want string) error {
	if cur, err := readString(path); err == nil && strings.TrimSpace(cur) == want {
		return nil
	}
	return writeString(path, want)
}

// freezerState reads freezer.state: THAWED, FREEZING or FROZEN.
func (g *v1Group) freezerState() (string, error) {
	s, err := readString(g.dir("freezer") + "/freezer.state")
	return strings.TrimSpace(s), err
}

func (g *v1Group) setFreezer(want string, polls int) error {
	path := g.dir("freezer") + "/freezer.state"
	if want == "THAWED" {
		// A group under a frozen parent stays FROZEN whatever it is
		// told; say so instead of polling for a state that cannot come.
		if pf, err := readInt(g.dir("freezer") + "/freezer.parent_freezing"); err == nil && pf == 1 {
			return fmt.Errorf("cgroup %q cannot thaw: %w", g.rel, ErrParentFrozen)
		}
	}
	for range polls {
		// Writing again is how v1 retries tasks that could not be frozen
		// on the first pass.
		if err := writeString(path, want); err != nil {
			return err
		}
		st, err := g.freezerState()
		if err != nil {
			return err
		}
		if st == want {
			return nil
		}
		time.Sleep(pollInterval)
	}
	return fmt.Errorf("cgroup %q did not reach %s within %d polls", g.rel, want, polls)
}

func (g *v1Group) freeze(polls int) error { return g.setFreezer("FROZEN", polls) }
func (g *v1Group) thaw() error            { return g.setFreezer("THAWED", maxStatePolls) }

func (g *v1Group) thawAll() error {
	return thawSubtree(g.dir("freezer"), "freezer.state", "THAWED", g.thaw)
}

func (g *v1Group) Freeze() error { return freezeChecked(g.rel, g.Procs, g.freeze) }

func (g *v1Group) Thaw() error { return wrapThaw(g.thaw()) }

func (g *v1Group) Stats() (Stats, error) {
	var s Stats
	if g.shares() {
		// Its memory is its ancestor's, shared with the ancestor's other
		// tasks: none of those figures is this group's.
		s.MemoryShared = true
	} else if err := g.memoryStats(&s); err != nil {
		return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
	}
	var err error
	if acct := g.dir("cpuacct"); acct != "" {
		ns, err := readInt(acct + "/cpuacct.usage")
		if err != nil {
			return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
		}
		s.CPUUsage = time.Duration(ns)
	}
	pids := g.dir("pids")
	if s.Pids, err = readInt(pids + "/pids.current"); err != nil {
		return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
	}
	if s.PidsLimit, err = readInt(pids + "/pids.max"); err != nil {
		return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
	}
	if s.PidsLimit < 0 {
		s.PidsLimit = 0
	}
	st, err := g.freezerState()
	if err != nil {
		return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
	}
	s.Frozen = st == "FROZEN"
	return s, nil
}

// memoryStats fills the memory figures of a group with a memory group of
// its own.
func (g *v1Group) memoryStats(s *Stats) error {
	var err error
	mem := g.dir("memory")
	if s.MemoryBytes, err = readInt(mem + "/memory.usage_in_bytes"); err != nil {
		return err
	}
	if s.MemoryPeak, err = readInt(mem + "/memory.max_usage_in_bytes"); err != nil {
		return err
	}
	if s.MemoryLimit, err = readInt(mem + "/memory.limit_in_bytes"); err != nil {
		return err
	}
	if s.MemoryLimit >= v1UnlimitedFloor {
		s.MemoryLimit = 0
	}
	// v1 counts OOM kills per group only (memory.oom_control is not
	// hierarchical, unlike v2's memory.events); sum the subtree so both
	// back ends mean "this group and its live descendants". Descendants
	// that share this group's memory group have no directory here: their
	// kills are counted in this group's own file.
	s.OOMKills, err = oomKillsV1(mem)
	return err
}

func (g *v1Group) CPUUsage() (time.Duration, error) {
	acct := g.dir("cpuacct")
	if acct == "" {
		return 0, ErrNoCPUAccounting
	}
	ns, err := readInt(acct + "/cpuacct.usage")
	if err != nil {
		return 0, fmt.Errorf("CPU usage of cgroup %q: %w", g.rel, err)
	}
	return time.Duration(ns), nil
}

func (g *v1Group) OOMKills() (int64, error) {
	if g.shares() {
		return 0, nil // as Stats: the ancestor's figure, not this group's
	}
	n, err := oomKillsV1(g.dir("memory"))
	if err != nil {
		return 0, fmt.Errorf("OOM kills of cgroup %q: %w", g.rel, err)
	}
	return n, nil
}

// oomKillsV1 sums memory.oom_control's oom_kill over the memory group mem
// and its live descendants (see memoryStats).
func oomKillsV1(mem string) (int64, error) {
	memDirs, err := walkGroups(mem)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, d := range memDirs {
		n, err := readKeyed(d+"/memory.oom_control", "oom_kill")
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // sub-group removed meanwhile
			}
			return 0, err
		}
		total += n
	}
	return total, nil
}

func (g *v1Group) Kill() error {
	if err := killByFreezing(g, "tasks"); err != nil {
		return fmt.Errorf("cgroup %q: %w", g.rel, err)
	}
	return nil
}

func (g *v1Group) Destroy() error {
	if err := g.Kill(); err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	var errs []error
	for _, h := range g.hiers() {
		if err := rmdirTree(filepath.Join(h.baseDir, g.rel)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("destroy cgroup %q: %w", g.rel, err)
	}
	return nil
}

func (g *v1Group) Sub(name string, l Limits) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if strings.Count(g.rel, "/")+1 >= maxWalkDepth {
		return nil, fmt.Errorf("sub-group of %q: nested deeper than %d", g.rel, maxWalkDepth)
	}
	rel := g.rel + "/" + name
	sharedRel := rel
	if g.shares() {
		// Below a group without memory and CPU groups of its own there
		// is no directory to make them in.
		sharedRel = g.sharedRel
	}
	return g.m.create(name, rel, sharedRel, l)
}

// SubSharingLimits makes a child without memory and CPU groups of its own
// where the memory controller has a hierarchy of its own (alone or with
// cpu, as on this package's v1 hosts): the child's tasks are charged to,
// limited by and OOM-killed in this group's memory group, and run under
// this group's CPU quota (a cpu hierarchy co-mounted with cpuacct is
// kept: per-execution CPU time comes from cpuacct). Elsewhere it is Sub.
func (g *v1Group) SubSharingLimits(name string, l Limits) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if l.MemoryBytes != 0 || l.CPUMilli != 0 {
		return nil, fmt.Errorf("sub-group %q of %q: %w", name, g.rel, errSharedLimit)
	}
	if g.m.lean == nil {
		return g.Sub(name, l)
	}
	if strings.Count(g.rel, "/")+1 >= maxWalkDepth {
		return nil, fmt.Errorf("sub-group of %q: nested deeper than %d", g.rel, maxWalkDepth)
	}
	return g.m.create(name, g.rel+"/"+name, g.sharedRel, l)
}

func (g *v1Group) OpenSub(name string) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	rel := g.rel + "/" + name
	sub := &v1Group{m: g.m, name: name, rel: rel, sharedRel: rel}
	if g.shares() {
		sub.sharedRel = g.sharedRel
	} else if g.m.lean != nil {
		// A child made by SubSharingLimits has no memory directory.
		switch _, err := os.Stat(g.m.dir("memory", rel)); {
		case errors.Is(err, fs.ErrNotExist):
			sub.sharedRel = g.sharedRel
		case err != nil:
			return nil, fmt.Errorf("open cgroup %q: %w", rel, err)
		}
	}
	for _, h := range sub.hiers() {
		if _, err := os.Stat(filepath.Join(h.baseDir, rel)); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("open cgroup %q: %w", rel, ErrNotFound)
			}
			return nil, fmt.Errorf("open cgroup %q: %w", rel, err)
		}
	}
	return sub, nil
}

func (g *v1Group) Subs() ([]string, error) {
	set := map[string]bool{}
	for _, h := range g.hiers() {
		if err := listNames(filepath.Join(h.baseDir, g.rel), set); err != nil {
			return nil, fmt.Errorf("sub-groups of %q: %w", g.rel, err)
		}
	}
	return sortedNames(set), nil
}

// OpenThreadAttach opens the group's tasks file in every hierarchy it has
// a directory in. A group sharing its ancestor's memory group has none in
// the memory hierarchy: a thread attached to it keeps its memory group, so
// the caller attaches only threads already in that ancestor's memory group
// (the init's threads, which live in the sandbox's group).
func (g *v1Group) OpenThreadAttach() ([]*os.File, error) {
	var files []*os.File
	for _, h := range g.hiers() {
		f, err := os.OpenFile(filepath.Join(h.baseDir, g.rel, "tasks"), os.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, o := range files {
				_ = o.Close() // nothing written yet; the open error is the one to report
			}
			return nil, fmt.Errorf("open thread attach of cgroup %q: %w", g.rel, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// Delegate chowns, in every hierarchy, the group directory (so the new
// owner can create child groups) and its tasks and cgroup.procs (so it can
// move its own tasks). Limit files stay root's: the delegate can only
// narrow limits in groups it creates, never lift this group's.
func (g *v1Group) Delegate(uid, gid int) error {
	if uid < 0 || gid < 0 {
		return fmt.Errorf("delegate cgroup %q: invalid owner %d:%d", g.rel, uid, gid)
	}
	for _, h := range g.hiers() {
		d := filepath.Join(h.baseDir, g.rel)
		for _, p := range []string{d, d + "/tasks", d + "/cgroup.procs"} {
			if err := unix.Lchown(p, uid, gid); err != nil {
				return fmt.Errorf("delegate cgroup %q: %w", g.rel, err)
			}
		}
	}
	return nil
}
