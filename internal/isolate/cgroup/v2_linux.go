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

const (
	// v2Leaf holds a group's own processes (see the package doc's v2
	// layout). User names cannot contain '.', so it never collides.
	v2Leaf = ".procs"
	// v2ServerLeaf receives the server's own processes when its cgroup
	// must start distributing controllers.
	v2ServerLeaf = "server"
	// maxMigrateRounds: passes moving the server's cgroup's processes into
	// v2ServerLeaf; processes forking meanwhile need another pass, a
	// handful is plenty for a server starting up.
	maxMigrateRounds = 10
)

// v2Controllers are enabled for every group's children.
var v2Controllers = []string{"memory", "pids", "cpu"}

type v2Manager struct {
	info    Info
	baseDir string
	// made are the directories New made for base, outermost first.
	made []string
	// ctrls are the controllers groups get: v2Controllers in production
	// (New refuses to run without them); tests on a host whose unified
	// hierarchy has none use nil to exercise the core files alone.
	ctrls []string
}

func (m *v2Manager) has(c string) bool { return slices.Contains(m.ctrls, c) }

var (
	_ Manager = (*v2Manager)(nil)
	_ Group   = (*v2Group)(nil)
)

func newV2(lay layout, base string) (*v2Manager, error) {
	if lay.v2 == nil {
		return nil, errors.New("cgroup v2: no unified hierarchy")
	}
	for _, c := range requiredV2 {
		if !slices.Contains(lay.v2.controllers, c) {
			return nil, fmt.Errorf("cgroup v2: required controller %q is not available in this process's cgroup", c)
		}
	}
	own := lay.v2.own
	if filepath.Base(own) == v2ServerLeaf && distributes(filepath.Dir(own), v2Controllers) {
		// An earlier New in this process (or a previous server run that
		// left its supervisor here) already moved us into the leaf: the
		// groups belong beside it, not below it.
		own = filepath.Dir(own)
	}
	if err := enableControllers(own, v2Controllers, true); err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	m := &v2Manager{info: lay.info, baseDir: filepath.Join(own, base), ctrls: v2Controllers}
	// Every level between own and base must distribute the controllers.
	dir := own
	for _, part := range strings.Split(base, "/") {
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) { //nolint:gosec // G301: cgroupfs convention (systemd, runc): anyone may read a group's stats; control files stay root's 0644, and Delegate chowns what a delegate may write
			return nil, fmt.Errorf("cgroup v2: create base: %w", err)
		}
		m.made = append(m.made, dir)
		if err := enableControllers(dir, v2Controllers, false); err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
	}
	if _, err := os.Stat(m.baseDir + "/cgroup.freeze"); err != nil {
		return nil, fmt.Errorf("cgroup v2: required controller %q is not available (no cgroup.freeze; kernel older than 5.2?)", "freezer")
	}
	return m, nil
}

// distributes reports whether dir already enables ctrls for its children.
func distributes(dir string, ctrls []string) bool {
	cur, err := readString(dir + "/cgroup.subtree_control")
	if err != nil {
		return false
	}
	have := strings.Fields(cur)
	for _, c := range ctrls {
		if !slices.Contains(have, c) {
			return false
		}
	}
	return true
}

// enableControllers makes dir distribute ctrls to its children. If
// dir holds processes (the no-internal-process rule answers EBUSY) and
// migrate is set, they are moved into dir/v2ServerLeaf first.
func enableControllers(dir string, ctrls []string, migrate bool) error {
	cur, err := readString(dir + "/cgroup.subtree_control")
	if err != nil {
		return fmt.Errorf("enable controllers in %s: %w", dir, err)
	}
	have := strings.Fields(cur)
	var add []string
	for _, c := range ctrls {
		if !slices.Contains(have, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	werr := writeString(dir+"/cgroup.subtree_control", strings.Join(add, " "))
	if werr == nil {
		return nil
	}
	if !migrate || !errors.Is(werr, unix.EBUSY) {
		return fmt.Errorf("enable controllers in %s: %w", dir, werr)
	}
	leaf := filepath.Join(dir, v2ServerLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) { //nolint:gosec // G301: cgroupfs convention (systemd, runc): anyone may read a group's stats; control files stay root's 0644, and Delegate chowns what a delegate may write
		return fmt.Errorf("enable controllers in %s: %w", dir, err)
	}
	for range maxMigrateRounds {
		procs, err := collectPids([]string{dir}, "cgroup.procs")
		if err != nil {
			return fmt.Errorf("enable controllers in %s: %w", dir, err)
		}
		if len(procs) == 0 {
			break
		}
		for _, p := range sortedKeys(procs) {
			// ESRCH: exited meanwhile; anything else shows on the retry.
			_ = writeString(leaf+"/cgroup.procs", strconv.Itoa(p))
		}
	}
	if err := writeString(dir+"/cgroup.subtree_control", strings.Join(add, " ")); err != nil {
		return fmt.Errorf("enable controllers in %s after moving its processes to %s: %w", dir, v2ServerLeaf, err)
	}
	return nil
}

func (m *v2Manager) Info() Info { return m.info }

func (m *v2Manager) Create(name string, l Limits) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return m.create(name, name, l)
}

func (m *v2Manager) create(name, rel string, l Limits) (*v2Group, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("create cgroup %q: %w", rel, err)
	}
	g := &v2Group{m: m, name: name, rel: rel}
	if err := os.Mkdir(g.dir(), 0o755); err != nil { //nolint:gosec // G301: cgroupfs convention (systemd, runc): anyone may read a group's stats; control files stay root's 0644, and Delegate chowns what a delegate may write
		return nil, fmt.Errorf("create cgroup %q: %w", rel, err)
	}
	// The group starts unsealed (processes live in it directly) so that an
	// init cloned into it with CLONE_NEWCGROUP gets the group itself as
	// its cgroup namespace root; see seal.
	if err := g.SetLimits(l); err != nil {
		_ = rmdirTree(g.dir())
		return nil, fmt.Errorf("create cgroup %q: %w", rel, err)
	}
	return g, nil
}

func (m *v2Manager) Open(name string) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	g := &v2Group{m: m, name: name, rel: name}
	if _, err := os.Stat(g.dir()); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open cgroup %q: %w", name, ErrNotFound)
		}
		return nil, fmt.Errorf("open cgroup %q: %w", name, err)
	}
	return g, nil
}

func (m *v2Manager) openAny(name string) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return &v2Group{m: m, name: name, rel: name}, nil
}

func (m *v2Manager) Release() {
	for i := len(m.made) - 1; i >= 0; i-- {
		if os.Remove(m.made[i]) != nil { // rmdir: fails while a group or task is left
			return
		}
	}
}

// Rename fails: the cgroup2 file system has no rename (its kernfs
// operations offer none; rename(2) answers EPERM).
func (m *v2Manager) Rename(from, to string) (Group, error) {
	return nil, fmt.Errorf("rename cgroup %q to %q: %w", from, to, ErrNoRename)
}

func (m *v2Manager) List() ([]string, error) {
	set := map[string]bool{}
	if err := listNames(m.baseDir, set); err != nil {
		return nil, fmt.Errorf("list cgroups: %w", err)
	}
	return sortedNames(set), nil
}

type v2Group struct {
	m    *v2Manager
	name string
	rel  string
}

func (g *v2Group) Name() string { return g.name }
func (g *v2Group) dir() string  { return filepath.Join(g.m.baseDir, g.rel) }
func (g *v2Group) leaf() string { return filepath.Join(g.dir(), v2Leaf) }

// procsDir is where the group's own processes live: the group itself
// until it is sealed, its leaf afterwards.
func (g *v2Group) procsDir() string {
	if _, err := os.Stat(g.leaf()); err == nil {
		return g.leaf()
	}
	return g.dir()
}

// seal prepares the group for sub-groups with their own controllers: v2
// lets a group distribute controllers only while it holds no process, so
// its processes (the init) move into the leaf first, then the controllers
// are enabled. Processes moved by host root keep their cgroup namespace,
// whose root stays the group: the init then sees its leaf as "/.procs"
// and every execution group below its root, as clone3 CLONE_INTO_CGROUP
// from inside the namespace requires.
func (g *v2Group) seal() error {
	if _, err := os.Stat(g.leaf()); err == nil && distributes(g.dir(), g.m.ctrls) {
		return nil
	}
	if err := os.Mkdir(g.leaf(), 0o755); err != nil && !errors.Is(err, fs.ErrExist) { //nolint:gosec // G301: cgroupfs convention (systemd, runc): anyone may read a group's stats; control files stay root's 0644, and Delegate chowns what a delegate may write
		return fmt.Errorf("seal cgroup %q: %w", g.rel, err)
	}
	// A delegated group hands its leaf to the same owner.
	var st unix.Stat_t
	if err := unix.Stat(g.dir(), &st); err == nil && st.Uid != 0 {
		if err := g.chownDelegated(g.leaf(), int(st.Uid), int(st.Gid)); err != nil {
			return fmt.Errorf("seal cgroup %q: %w", g.rel, err)
		}
	}
	var err error
	for range maxMigrateRounds {
		procs, cerr := collectPids([]string{g.dir()}, "cgroup.procs")
		if cerr != nil {
			return fmt.Errorf("seal cgroup %q: %w", g.rel, cerr)
		}
		for _, p := range sortedKeys(procs) {
			_ = writeString(g.leaf()+"/cgroup.procs", strconv.Itoa(p)) // ESRCH: gone
		}
		if err = enableControllers(g.dir(), g.m.ctrls, false); err == nil || !errors.Is(err, unix.EBUSY) {
			break // EBUSY: a process forked into the group meanwhile
		}
	}
	if err != nil {
		return fmt.Errorf("seal cgroup %q: %w", g.rel, err)
	}
	return nil
}

func (g *v2Group) AddProc(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("add pid %d to cgroup %q: invalid pid", pid, g.rel)
	}
	if err := writeString(g.procsDir()+"/cgroup.procs", strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("add pid %d to cgroup %q: %w", pid, g.rel, err)
	}
	return nil
}

func (g *v2Group) subtreeDirs() ([]string, error) { return walkGroups(g.dir()) }

func (g *v2Group) Procs() ([]int, error) {
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

// Populated reads the "populated" field of cgroup.events, which covers
// the whole subtree.
func (g *v2Group) Populated() (bool, error) {
	n, err := readKeyed(filepath.Join(g.dir(), "cgroup.events"), "populated")
	if err != nil {
		return false, fmt.Errorf("tasks of cgroup %q: %w", g.rel, err)
	}
	return n > 0, nil
}

func (g *v2Group) SetLimits(l Limits) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("limits of cgroup %q: %w", g.rel, err)
	}
	d := g.dir()
	var writes [][2]string // file, value
	if g.m.has("memory") {
		mem := "max"
		if l.MemoryBytes > 0 {
			mem = strconv.FormatInt(l.MemoryBytes, 10)
		}
		writes = append(writes, [2]string{"memory.max", mem})
		// memory.swap.max is absent when the kernel does no swap
		// accounting; then there is nothing to turn off per group.
		if _, err := os.Stat(d + "/memory.swap.max"); err == nil {
			writes = append(writes, [2]string{"memory.swap.max", "0"})
		}
	} else if l.MemoryBytes > 0 {
		return fmt.Errorf("limits of cgroup %q: no memory controller", g.rel)
	}
	if g.m.has("pids") {
		pids := "max"
		if l.Pids > 0 {
			pids = strconv.FormatInt(l.Pids, 10)
		}
		writes = append(writes, [2]string{"pids.max", pids})
	} else if l.Pids > 0 {
		return fmt.Errorf("limits of cgroup %q: no pids controller", g.rel)
	}
	if g.m.has("cpu") {
		quota := "max"
		if l.CPUMilli > 0 {
			quota = strconv.FormatInt(l.CPUMilli*cpuPeriodUs/1000, 10)
		}
		writes = append(writes, [2]string{"cpu.max", quota + " " + strconv.Itoa(cpuPeriodUs)})
	} else if l.CPUMilli > 0 {
		return fmt.Errorf("limits of cgroup %q: no cpu controller", g.rel)
	}
	for _, w := range writes {
		write := writeString
		if w[0] == "cpu.max" {
			write = cpuWrite // see there: a write walks every task group
		}
		if err := write(d+"/"+w[0], w[1]); err != nil {
			return fmt.Errorf("limits of cgroup %q: %w", g.rel, err)
		}
	}
	return nil
}

func (g *v2Group) setFrozen(want bool, polls int) error {
	v, w := "0", int64(0)
	if want {
		v, w = "1", 1
	}
	if err := writeString(g.dir()+"/cgroup.freeze", v); err != nil {
		return err
	}
	for range polls {
		f, err := readKeyed(g.dir()+"/cgroup.events", "frozen")
		if err != nil {
			return err
		}
		if f == w {
			return nil
		}
		time.Sleep(pollInterval)
	}
	return fmt.Errorf("cgroup %q did not reach frozen=%s within %d polls", g.rel, v, polls)
}

func (g *v2Group) freeze(polls int) error { return g.setFrozen(true, polls) }
func (g *v2Group) thaw() error            { return g.setFrozen(false, maxStatePolls) }

func (g *v2Group) thawAll() error {
	return thawSubtree(g.dir(), "cgroup.freeze", "0", g.thaw)
}

func (g *v2Group) Freeze() error { return freezeChecked(g.rel, g.Procs, g.freeze) }

func (g *v2Group) Thaw() error { return wrapThaw(g.thaw()) }

func (g *v2Group) CPUUsage() (time.Duration, error) {
	us, err := readKeyed(g.dir()+"/cpu.stat", "usage_usec") // core file, no controller needed
	if err != nil {
		return 0, fmt.Errorf("CPU usage of cgroup %q: %w", g.rel, err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

func (g *v2Group) OOMKills() (int64, error) {
	if !g.m.has("memory") {
		return 0, nil
	}
	// Hierarchical, as in Stats.
	n, err := readKeyed(g.dir()+"/memory.events", "oom_kill")
	if err != nil {
		return 0, fmt.Errorf("OOM kills of cgroup %q: %w", g.rel, err)
	}
	return n, nil
}

func (g *v2Group) Stats() (Stats, error) {
	var s Stats
	var err error
	d := g.dir()
	if g.m.has("memory") {
		if s.MemoryBytes, err = readInt(d + "/memory.current"); err != nil {
			return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
		}
		if p, err := readInt(d + "/memory.peak"); err == nil { // Linux 5.19+
			s.MemoryPeak = p
		}
		if s.MemoryLimit, err = readInt(d + "/memory.max"); err != nil {
			return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
		}
		if s.MemoryLimit < 0 {
			s.MemoryLimit = 0
		}
		// Hierarchical (unless mounted with memory_localevents): the
		// group's figure includes its executions' kills.
		if s.OOMKills, err = readKeyed(d+"/memory.events", "oom_kill"); err != nil {
			return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
		}
	}
	us, err := readKeyed(d+"/cpu.stat", "usage_usec") // core file, no controller needed
	if err != nil {
		return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
	}
	s.CPUUsage = time.Duration(us) * time.Microsecond
	if g.m.has("pids") {
		if s.Pids, err = readInt(d + "/pids.current"); err != nil {
			return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
		}
		if s.PidsLimit, err = readInt(d + "/pids.max"); err != nil {
			return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
		}
		if s.PidsLimit < 0 {
			s.PidsLimit = 0
		}
	}
	fr, err := readKeyed(d+"/cgroup.events", "frozen")
	if err != nil {
		return s, fmt.Errorf("stats of cgroup %q: %w", g.rel, err)
	}
	s.Frozen = fr == 1
	return s, nil
}

func (g *v2Group) Kill() error {
	kill := g.dir() + "/cgroup.kill"
	if _, err := os.Stat(kill); err != nil {
		// Before Linux 5.14: the v1 way, with the v2 freezer.
		if err := killByFreezing(g, "cgroup.threads"); err != nil {
			return fmt.Errorf("cgroup %q: %w", g.rel, err)
		}
		return nil
	}
	procs, err := g.Procs()
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if slices.Contains(procs, os.Getpid()) {
		return fmt.Errorf("kill cgroup %q: %w", g.rel, ErrContainsSelf)
	}
	if len(procs) == 0 {
		return nil
	}
	for range maxKillRounds {
		if err := writeString(kill, "1"); err != nil {
			return fmt.Errorf("kill cgroup %q: %w", g.rel, err)
		}
		for range emptyPollsPerRound {
			procs, err := g.Procs()
			if err != nil {
				return fmt.Errorf("kill: %w", err)
			}
			if len(procs) == 0 {
				return nil
			}
			time.Sleep(pollInterval)
		}
	}
	return fmt.Errorf("kill cgroup %q: not empty after %d rounds", g.rel, maxKillRounds)
}

func (g *v2Group) Destroy() error {
	if err := g.Kill(); err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	if err := rmdirTree(g.dir()); err != nil {
		return fmt.Errorf("destroy cgroup %q: %w", g.rel, err)
	}
	return nil
}

func (g *v2Group) Sub(name string, l Limits) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if strings.Count(g.rel, "/")+2 >= maxWalkDepth { // +1 for the leaf level
		return nil, fmt.Errorf("sub-group of %q: nested deeper than %d", g.rel, maxWalkDepth)
	}
	if err := g.seal(); err != nil {
		return nil, err
	}
	return g.m.create(name, g.rel+"/"+name, l)
}

// SubSharingLimits is Sub on v2 (see the package doc): a child is in every
// controller its parent's cgroup.subtree_control enables, and the memory
// and CPU limits it is asked for must be 0, as on v1.
func (g *v2Group) SubSharingLimits(name string, l Limits) (Group, error) {
	if l.MemoryBytes != 0 || l.CPUMilli != 0 {
		return nil, fmt.Errorf("sub-group %q of %q: %w", name, g.rel, errSharedLimit)
	}
	return g.Sub(name, l)
}

func (g *v2Group) OpenSub(name string) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	sub := &v2Group{m: g.m, name: name, rel: g.rel + "/" + name}
	if _, err := os.Stat(sub.dir()); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open cgroup %q: %w", sub.rel, ErrNotFound)
		}
		return nil, fmt.Errorf("open cgroup %q: %w", sub.rel, err)
	}
	return sub, nil
}

func (g *v2Group) Subs() ([]string, error) {
	set := map[string]bool{}
	if err := listNames(g.dir(), set); err != nil { // skips the ".procs" leaf
		return nil, fmt.Errorf("sub-groups of %q: %w", g.rel, err)
	}
	return sortedNames(set), nil
}

// OpenThreadAttach returns the directory the group's own processes live
// in (the group before it is sealed, its leaf after), opened O_PATH, for
// clone3's cgroup field with CLONE_INTO_CGROUP.
func (g *v2Group) OpenThreadAttach() ([]*os.File, error) {
	d := g.procsDir()
	fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open thread attach of cgroup %q: %w", g.rel, err)
	}
	return []*os.File{os.NewFile(uintptr(fd), d)}, nil
}

// v2DelegateFiles are the files a delegatee must own, per the kernel's
// cgroup-v2 "Model of Delegation" (also listed in /sys/kernel/cgroup/delegate).
var v2DelegateFiles = []string{"cgroup.procs", "cgroup.threads", "cgroup.subtree_control"}

// Delegate chowns the group directory (and its leaf, once sealed) and
// their delegation files: the owner can then create children, move its
// processes between them, and set their limits, but never this group's
// own limits.
func (g *v2Group) Delegate(uid, gid int) error {
	if uid < 0 || gid < 0 {
		return fmt.Errorf("delegate cgroup %q: invalid owner %d:%d", g.rel, uid, gid)
	}
	dirs := []string{g.dir()}
	if _, err := os.Stat(g.leaf()); err == nil {
		dirs = append(dirs, g.leaf())
	}
	for _, d := range dirs {
		if err := g.chownDelegated(d, uid, gid); err != nil {
			return fmt.Errorf("delegate cgroup %q: %w", g.rel, err)
		}
	}
	return nil
}

func (g *v2Group) chownDelegated(dir string, uid, gid int) error {
	files := v2DelegateFiles
	if s, err := readString("/sys/kernel/cgroup/delegate"); err == nil {
		files = strings.Fields(s)
	}
	if err := unix.Lchown(dir, uid, gid); err != nil {
		return err
	}
	for _, f := range files {
		if strings.ContainsAny(f, "/\x00") || strings.HasPrefix(f, ".") {
			continue // the kernel's list, but keep it to plain file names
		}
		if err := unix.Lchown(dir+"/"+f, uid, gid); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	return nil
}
