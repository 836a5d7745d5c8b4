package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Caps on what is read from the kernel, each with its reason.
const (
	// maxControlFileBytes: the largest control file read (cgroup.procs of
	// a group at maxPidsPerGroup pids is ~500 KiB); anything larger means
	// something is wrong and is refused instead of buffered.
	maxControlFileBytes = 4 << 20
	// maxProcLines: /proc/self/mountinfo and /proc/self/cgroup lines read;
	// hosts with thousands of mounts exist, a million lines do not.
	maxProcLines = 100000
	// maxPidsPerGroup: pids collected from one group's subtree; pid_max's
	// default ceiling on 64-bit is 4M, but a sandbox runs at most its
	// pids.max (tens to thousands) and 65536 keeps a listing cheap.
	maxPidsPerGroup = 1 << 16
)

// v1Controllers are the controller names a v1 "cgroup" mount may carry in
// its super options; other options (rw, name=systemd, clone_children...)
// are not controllers.
var v1Controllers = map[string]bool{
	"cpu": true, "cpuacct": true, "cpuset": true, "memory": true, "devices": true,
	"freezer": true, "net_cls": true, "net_prio": true, "blkio": true,
	"perf_event": true, "hugetlb": true, "pids": true, "rdma": true, "misc": true,
}

type mountEntry struct {
	root       string // root of the mount within its hierarchy
	mountPoint string
	fsType     string
	superOpts  []string
}

// parseMountinfo parses /proc/<pid>/mountinfo text, keeping cgroup mounts.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 0; sc.Scan(); n++ {
		if n >= maxProcLines {
			return nil, fmt.Errorf("mountinfo: more than %d lines", maxProcLines)
		}
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 6 || len(fields) < sep+4 {
			continue // malformed line: not something we can use
		}
		fsType := fields[sep+1]
		if fsType != "cgroup" && fsType != "cgroup2" {
			continue
		}
		out = append(out, mountEntry{
			root:       unescapeMountinfo(fields[3]),
			mountPoint: unescapeMountinfo(fields[4]),
			fsType:     fsType,
			superOpts:  strings.Split(fields[sep+3], ","),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return out, nil
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space,
// \011, \012, \134) in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

type procCgroup struct {
	controllers []string // empty for the v2 line ("0::/path")
	path        string
}

// parseProcCgroup parses /proc/<pid>/cgroup text ("id:ctrl,ctrl:/path").
func parseProcCgroup(r io.Reader) ([]procCgroup, error) {
	var out []procCgroup
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 0; sc.Scan(); n++ {
		if n >= maxProcLines {
			return nil, fmt.Errorf("proc cgroup: more than %d lines", maxProcLines)
		}
		line := sc.Text()
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("proc cgroup: malformed line %q", line)
		}
		if !strings.HasPrefix(parts[2], "/") {
			return nil, fmt.Errorf("proc cgroup: path %q is not absolute", parts[2])
		}
		var ctrls []string
		if parts[1] != "" {
			ctrls = strings.Split(parts[1], ",")
		}
		out = append(out, procCgroup{controllers: ctrls, path: parts[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("proc cgroup: %w", err)
	}
	return out, nil
}

// hierarchy is one mounted cgroup hierarchy as seen by this process.
type hierarchy struct {
	mountPoint  string
	controllers []string // v1 controllers on this mount; nil for v2
	own         string   // absolute directory of this process's own cgroup
}

type layout struct {
	info  Info
	v1    []hierarchy // one per distinct v1 hierarchy that carries controllers
	v2    *hierarchy
	v2Err error // why v2 is unusable, for the error New reports
}

// ownDir maps a cgroup path from /proc/self/cgroup onto a mount of that
// hierarchy whose root is mountRoot.
func ownDir(mountPoint, mountRoot, cgPath string) (string, error) {
	if strings.Contains(cgPath, "/../") || strings.HasSuffix(cgPath, "/..") || strings.HasPrefix(cgPath, "/..") {
		return "", fmt.Errorf("cgroup path %q has a parent component", cgPath)
	}
	if strings.HasSuffix(cgPath, " (deleted)") {
		return "", fmt.Errorf("own cgroup %q was removed", cgPath)
	}
	rel := cgPath
	if mountRoot != "/" {
		if cgPath != mountRoot && !strings.HasPrefix(cgPath, mountRoot+"/") {
			return "", fmt.Errorf("own cgroup %q is outside the mounted subtree %q", cgPath, mountRoot)
		}
		rel = strings.TrimPrefix(cgPath, mountRoot)
	}
	return filepath.Join(mountPoint, rel), nil
}

// buildLayout combines the parsed mount table and /proc/self/cgroup. read
// reads a file below a cgroup mount (cgroup.controllers), so tests can run
// it on fixtures.
func buildLayout(mounts []mountEntry, cgs []procCgroup, read func(string) (string, error)) (layout, error) {
	var lay layout
	v1Mounts := map[string]string{}
	var v1Ctrls []string
	for _, m := range mounts {
		if m.fsType != "cgroup" {
			continue
		}
		var ctrls []string
		for _, o := range m.superOpts {
			if v1Controllers[o] {
				ctrls = append(ctrls, o)
			}
		}
		if len(ctrls) == 0 || v1Mounts[ctrls[0]] != "" {
			continue // named hierarchy (name=systemd) or a second mount of one already seen
		}
		h := hierarchy{mountPoint: m.mountPoint, controllers: ctrls}
		for _, pc := range cgs {
			if len(pc.controllers) > 0 && slices.Contains(pc.controllers, ctrls[0]) {
				dir, err := ownDir(m.mountPoint, m.root, pc.path)
				if err != nil {
					return lay, fmt.Errorf("%s hierarchy: %w", strings.Join(ctrls, ","), err)
				}
				h.own = dir
			}
		}
		if h.own == "" {
			continue // not in /proc/self/cgroup: a hierarchy from another namespace
		}
		for _, c := range ctrls {
			v1Mounts[c] = m.mountPoint
			v1Ctrls = append(v1Ctrls, c)
		}
		lay.v1 = append(lay.v1, h)
	}
	for _, m := range mounts {
		if m.fsType != "cgroup2" || lay.v2 != nil {
			continue
		}
		for _, pc := range cgs {
			if len(pc.controllers) != 0 {
				continue
			}
			dir, err := ownDir(m.mountPoint, m.root, pc.path)
			if err != nil {
				lay.v2Err = fmt.Errorf("unified hierarchy: %w", err)
				break
			}
			h := &hierarchy{mountPoint: m.mountPoint, own: dir}
			cs, err := read(filepath.Join(dir, "cgroup.controllers"))
			if err != nil {
				lay.v2Err = fmt.Errorf("unified hierarchy: %w", err)
				break
			}
			h.controllers = strings.Fields(cs)
			lay.v2 = h
			break
		}
	}

	v1Complete := true
	for _, c := range requiredV1 {
		if v1Mounts[c] == "" {
			v1Complete = false
		}
	}
	v2Complete := lay.v2 != nil
	for _, c := range requiredV2 {
		if lay.v2 == nil || !slices.Contains(lay.v2.controllers, c) {
			v2Complete = false
		}
	}
	switch {
	case v1Complete || (len(lay.v1) > 0 && !v2Complete):
		// Legacy or hybrid host: the v1 hierarchies carry the controllers
		// (a hybrid's unified mount only tracks processes).
		lay.info = Info{Version: 1, Controllers: v1Ctrls, Mounts: v1Mounts}
	case lay.v2 != nil:
		lay.info = Info{Version: 2, Controllers: slices.Clone(lay.v2.controllers),
			Mounts: map[string]string{"unified": lay.v2.mountPoint}}
	case lay.v2Err != nil:
		return lay, lay.v2Err
	default:
		return lay, errors.New("no cgroup filesystem is mounted")
	}
	slices.Sort(lay.info.Controllers)
	return lay, nil
}

func detectLayout() (layout, error) {
	mf, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return layout{}, fmt.Errorf("detect cgroups: %w", err)
	}
	defer mf.Close() //nolint:errcheck // read-only procfs file
	mounts, err := parseMountinfo(mf)
	if err != nil {
		return layout{}, fmt.Errorf("detect cgroups: %w", err)
	}
	cf, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return layout{}, fmt.Errorf("detect cgroups: %w", err)
	}
	defer cf.Close() //nolint:errcheck // read-only procfs file
	cgs, err := parseProcCgroup(cf)
	if err != nil {
		return layout{}, fmt.Errorf("detect cgroups: %w", err)
	}
	lay, err := buildLayout(mounts, cgs, readString)
	if err != nil {
		return layout{}, fmt.Errorf("detect cgroups: %w", err)
	}
	return lay, nil
}

// Detect reports the cgroup version and controllers of this host, as seen
// from this process. It does not create anything.
func Detect() (Info, error) {
	lay, err := detectLayout()
	if err != nil {
		return Info{}, err
	}
	return lay.info, nil
}

// New returns a Manager whose groups live at <own cgroup>/<base> in every
// hierarchy used, creating base if needed. It fails closed, naming the
// controller, when memory, pids, cpu or the freezer is unavailable.
func New(base string) (Manager, error) {
	if err := validateBase(base); err != nil {
		return nil, err
	}
	lay, err := detectLayout()
	if err != nil {
		return nil, err
	}
	if lay.info.Version == 1 {
		return newV1(lay, base)
	}
	return newV2(lay, base)
}

// ---- file helpers ----

func readString(path string) (string, error) {
	f, err := os.Open(path) //nolint:gosec // G304: cgroupfs/procfs paths this package builds, never user input
	if err != nil {
		return "", err
	}
	defer f.Close() //nolint:errcheck // opened read-only
	b, err := io.ReadAll(io.LimitReader(f, maxControlFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxControlFileBytes {
		return "", fmt.Errorf("read %s: larger than %d bytes", path, maxControlFileBytes)
	}
	return string(b), nil
}

// writeString writes s to a control file in one write(2), as cgroupfs
// expects.
func writeString(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0) //nolint:gosec // G304: cgroupfs control files this package builds, never user input
	if err != nil {
		return err
	}
	_, werr := f.WriteString(s)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %q to %s: %w", s, path, werr)
	}
	return cerr
}

// readInt reads a file holding one integer or "max" (returned as -1).
func readInt(path string) (int64, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	s = strings.TrimSpace(s)
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

// readKeyed returns the value of key in a "key value" per line file
// (memory.oom_control, memory.events, cpu.stat, cgroup.events).
func readKeyed(path, key string) (int64, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s %s: %w", path, key, err)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("%s: no %q field", path, key)
}

// parsePids parses a cgroup.procs/tasks listing into set, refusing to grow
// set beyond maxPidsPerGroup.
func parsePids(s string, set map[int]bool) error {
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		p, err := strconv.Atoi(line)
		if err != nil || p <= 0 {
			return fmt.Errorf("bad pid %q", line)
		}
		if !set[p] && len(set) >= maxPidsPerGroup {
			return fmt.Errorf("more than %d pids", maxPidsPerGroup)
		}
		set[p] = true
	}
	return nil
}

// Caps on walking a group's subtree.
const (
	// maxGroupsWalked: groups visited below one group (executions of one
	// sandbox, and whatever a delegated root made); a sandbox has tens.
	maxGroupsWalked = 4096
	// maxWalkDepth: nesting below one group; executions are one level,
	// a delegated root may add a few.
	maxWalkDepth = 16
)

// walkGroups returns dir and every cgroup directory below it, parents
// before children. Directories that vanish during the walk are skipped.
func walkGroups(dir string) ([]string, error) {
	out := []string{dir}
	type item struct {
		path  string
		depth int
	}
	queue := []item{{dir, 0}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		ents, err := os.ReadDir(it.path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("list %s: %w", it.path, err)
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			if it.depth+1 > maxWalkDepth {
				return nil, fmt.Errorf("list %s: groups nested deeper than %d", dir, maxWalkDepth)
			}
			if len(out) >= maxGroupsWalked {
				return nil, fmt.Errorf("list %s: more than %d groups", dir, maxGroupsWalked)
			}
			p := filepath.Join(it.path, e.Name())
			out = append(out, p)
			queue = append(queue, item{p, it.depth + 1})
		}
	}
	return out, nil
}

// listNames lists the valid group names directly below dir.
func listNames(dir string, into map[string]bool) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range ents {
		if !e.IsDir() || ValidateName(e.Name()) != nil {
			continue
		}
		if !into[e.Name()] && len(into) >= maxGroupsWalked {
			return fmt.Errorf("list %s: more than %d groups", dir, maxGroupsWalked)
		}
		into[e.Name()] = true
	}
	return nil
}

func sortedNames(set map[string]bool) []string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// rmdirTree removes dir and every group below it, children first. A group
// whose last task is still exiting answers EBUSY for a moment, so each
// rmdir is retried, bounded.
func rmdirTree(dir string) error {
	dirs, err := walkGroups(dir)
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := rmdirRetry(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}
