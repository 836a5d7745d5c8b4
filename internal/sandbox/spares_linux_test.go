package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// initPid is a running sandbox's init pid.
func initPid(t *testing.T, s *Sandbox) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst == nil {
		t.Fatal("sandbox not running")
	}
	return s.inst.Pid
}

// readySpares are the pids of the ready spares, oldest first.
func readySpares(m *Manager) []int {
	var out []int
	for _, sp := range m.spares.Ready() {
		out = append(out, sp.Pid())
	}
	return out
}

// postureFacts is what a sandbox's security rests on, seen from the host
// (its init's process) and from a command inside, with what names the
// sandbox (its id, host ids, pids, mount ids) taken out: a sandbox from a
// spare and one from a fresh init must not differ in any of it.
func postureFacts(t *testing.T, s *Sandbox) map[string]string {
	t.Helper()
	pid := initPid(t, s)
	base := hostBase(s.rec.Slot)
	facts := map[string]string{}
	read := func(name string) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	statusKeys := regexp.MustCompile(`^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|Seccomp_filters|Speculation_Store_Bypass|SpeculationIndirectBranch|Cpus_allowed_list|Mems_allowed_list):`)
	norm := func(text string) string {
		// newManager's cgroup base, named by the test.
		text = strings.ReplaceAll(text, fmt.Sprintf("st%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")), "<cgbase>")
		text = strings.ReplaceAll(text, s.rec.ID, "<id>")
		return strings.ReplaceAll(text, fmt.Sprint(base), "<base>")
	}
	for _, line := range strings.Split(read("status"), "\n") {
		if statusKeys.MatchString(line) {
			k, v, _ := strings.Cut(line, ":")
			facts["init status "+k] = norm(strings.Join(strings.Fields(v), " "))
		}
	}
	for _, f := range []string{"uid_map", "gid_map", "setgroups", "limits", "cgroup", "oom_score_adj", "personality"} {
		facts["init "+f] = norm(strings.Join(strings.Fields(read(f)), " "))
	}
	// Every namespace is the init's own, the user namespace owned by its
	// range's first id.
	for _, ns := range []string{"user", "mnt", "pid", "ipc", "uts", "net", "cgroup"} {
		mine, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		host, err2 := os.Readlink("/proc/self/ns/" + ns)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		facts["init ns "+ns+" own"] = fmt.Sprint(mine != host)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		t.Fatal(err)
	}
	var owner uint32
	_, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), nsGetOwnerUID, uintptr(unsafe.Pointer(&owner))) //nolint:gosec // G103: the ioctl writes one uint32
	_ = f.Close()
	if e != 0 {
		t.Fatal(e)
	}
	facts["init user ns owner"] = norm(fmt.Sprint(owner))
	for k, v := range cgroupFacts(t, pid) {
		facts[k] = norm(v)
	}
	// Inside: a command's own view (credentials, capabilities, seccomp,
	// limits, mounts by point, type and options, hostname, cgroup
	// namespace), and the init's as PID 1.
	r := run(t, s, ExecRequest{Command: `grep -E '^(Uid|Gid|Groups|Cap|NoNewPrivs|Seccomp)' /proc/self/status /proc/1/status; ` +
		`cat /proc/self/limits /proc/self/uid_map /proc/self/gid_map /proc/self/cgroup; hostname; id; ` +
		`awk '{for(i=7;$i!="-";i++);print $5, $6, $(i+1), $(i+3)}' /proc/self/mountinfo | sed 's/,size=[0-9]*k//'`})
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("probe: %+v", r)
	}
	for i, line := range strings.Split(r.Stdout, "\n") {
		facts[fmt.Sprintf("inside %03d", i)] = norm(line)
	}
	return facts
}

// cgroupSetting are the control files of a v1 group that hold a setting
// (a limit, a weight, a flag), not a statistic.
var cgroupSetting = regexp.MustCompile(`(limit_in_bytes|\.max|swappiness|shares|cfs_period_us|cfs_quota_us|rt_runtime_us|rt_period_us|use_hierarchy|move_charge_at_immigrate|oom_control|freezer\.state|self_freezing|notify_on_release|clone_children)$`)

// cgroupFacts are the cgroups of the init pid on the host, in each
// hierarchy the server uses: the group, its sub-groups, and of each its
// settings (cgroupSetting), owners and modes.
func cgroupFacts(t *testing.T, pid int) map[string]string {
	t.Helper()
	info, err := cgroup.Detect()
	if err != nil || info.Version != 1 {
		return nil // the names in /proc/<pid>/cgroup are compared anyway
	}
	facts := map[string]string{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrl := ""
		for _, c := range strings.Split(parts[1], ",") {
			if slices.Contains([]string{"memory", "pids", "cpu", "cpuacct", "freezer"}, c) {
				ctrl = c
			}
		}
		if ctrl == "" || info.Mounts[ctrl] == "" {
			continue
		}
		top := filepath.Join(info.Mounts[ctrl], parts[2])
		err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(top, path)
			key := "cgroup " + parts[1] + " " + rel
			var st unix.Stat_t
			if err := unix.Lstat(path, &st); err != nil {
				return err
			}
			facts[key+" owner"] = fmt.Sprintf("%d:%d %o", st.Uid, st.Gid, st.Mode)
			if d.IsDir() || !cgroupSetting.MatchString(d.Name()) {
				return nil
			}
			v, err := os.ReadFile(path) //nolint:gosec // G304: a cgroup file of the test's own sandbox
			if err != nil {
				return err
			}
			text := string(v)
			if d.Name() == "memory.oom_control" {
				// Only its setting; under_oom and oom_kill are counts.
				text, _, _ = strings.Cut(text, "\n")
			}
			facts[key] = strings.TrimSpace(text)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(facts) == 0 {
		t.Fatalf("no cgroup of pid %d found", pid)
	}
	return facts
}

// TestSpareInitIsLikeAFreshOne: a sandbox whose init was a spare and one
// whose init was cloned for it have the same security posture, from the
// host and from inside: ids and maps, the user namespace's owner,
// capabilities, no_new_privs, seccomp, rlimits, cgroups, namespaces,
// mounts. The spare's sandbox really got the spare (its pid), and the
// fresh one none.
func TestSpareInitIsLikeAFreshOne(t *testing.T) {
	// Limits of its own, none of them a spare's group's (newSpares):
	// a bind that does not write them shows.
	spec := Spec{Network: Network{Mode: NetworkNone}, Limits: Limits{MemoryBytes: 300 << 20, Pids: 40, CPUMilli: 700}}
	var fa, fb map[string]string
	// Each manager in a subtest of its own: its cgroups under a base of
	// their own.
	t.Run("spare", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.SpareInits = 1
		m := newManager(t, cfg, nil)
		waitFor(t, func() bool { return len(readySpares(m)) == 1 })
		spare := readySpares(m)[0]
		s := create(t, m, spec)
		if got := initPid(t, s); got != spare {
			t.Fatalf("the sandbox's init is pid %d, want the spare %d", got, spare)
		}
		fa = postureFacts(t, s)
	})
	t.Run("fresh", func(t *testing.T) {
		m := newManager(t, testConfig(t), nil)
		s := create(t, m, spec)
		if len(readySpares(m)) != 0 {
			t.Fatal("a manager without spares has one")
		}
		fb = postureFacts(t, s)
	})
	if t.Failed() {
		return
	}
	if len(fa) < 40 {
		t.Fatalf("only %d facts gathered: %v", len(fa), fa)
	}
	for k, v := range fa {
		if fb[k] != v {
			t.Errorf("%s: from a spare %q, fresh %q", k, v, fb[k])
		}
	}
	for k, v := range fb {
		if _, ok := fa[k]; !ok {
			t.Errorf("%s: fresh %q, missing from the spare's", k, v)
		}
	}
}

// TestSparesAreRefilledAndEnd: a create takes the oldest spare; another
// is cloned once it is done; the status counts it; Close kills every
// spare.
func TestSparesAreRefilledAndEnd(t *testing.T) {
	cfg := testConfig(t)
	cfg.SpareInits = 2
	m := newManager(t, cfg, nil)
	waitFor(t, func() bool { return len(readySpares(m)) == 2 })
	if got, want := m.PoolStatus().Spares, (SpareStatus{Ready: 2, Target: 2}); got != want {
		t.Fatalf("status %+v, want %+v", got, want)
	}
	before := readySpares(m)
	s := create(t, m, Spec{})
	if got := initPid(t, s); got != before[0] {
		t.Fatalf("init pid %d, want the oldest spare %d", got, before[0])
	}
	waitFor(t, func() bool { return len(readySpares(m)) == 2 })
	if got, want := m.PoolStatus().Spares, (SpareStatus{Ready: 2, Target: 2, Taken: 1}); got != want {
		t.Fatalf("status after a create %+v, want %+v", got, want)
	}
	after := readySpares(m)
	if after[0] != before[1] || after[1] == before[0] {
		t.Fatalf("spares %v after the take, were %v", after, before)
	}
	sps := m.spares.Ready()
	s.mu.Lock()
	id := s.rec.ID
	s.mu.Unlock()
	m.Close()
	for _, sp := range sps {
		select {
		case <-sp.Exited():
		default:
			t.Fatalf("spare %d still running after Close", sp.Pid())
		}
	}
	// The spares' groups go with them (Close destroys the sandboxes'
	// too).
	if names, err := m.cg.List(); err != nil || len(names) != 0 {
		t.Fatalf("groups left after Close: %v (%v); the sandbox was %s", names, err, id)
	}
}

// TestHostNetworkTakesNoSpare: spares have a network namespace of their
// own, so a sandbox on the host's network is cloned afresh.
func TestHostNetworkTakesNoSpare(t *testing.T) {
	cfg := testConfig(t)
	cfg.SpareInits = 1
	m := newManager(t, cfg, nil)
	waitFor(t, func() bool { return len(readySpares(m)) == 1 })
	if _, ok := m.takeSpare(Spec{Network: Network{Mode: NetworkHost}}); ok {
		t.Fatal("a host-network spec took a spare")
	}
	if st := m.PoolStatus().Spares; st.Taken != 0 || st.Missed != 0 || st.Ready != 1 {
		t.Fatalf("a host-network create counted, or took the spare: %+v", st)
	}
}

// TestUnusableSpareIsDiscarded: a spare that ended is skipped (a fresh
// init starts the sandbox), and one bound for other host ids than it was
// cloned for is killed, not bound.
func TestUnusableSpareIsDiscarded(t *testing.T) {
	cfg := testConfig(t)
	cfg.SpareInits = 1
	m := newManager(t, cfg, nil)
	waitFor(t, func() bool { return len(readySpares(m)) == 1 })
	dead := m.spares.Ready()[0]
	if err := unix.Kill(dead.Pid(), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-dead.Exited()
	s := create(t, m, Spec{})
	if initPid(t, s) == dead.Pid() {
		t.Fatal("the sandbox got the dead spare's pid")
	}
	if st := m.PoolStatus().Spares; st.Taken != 0 || st.Missed != 1 {
		t.Fatalf("status %+v, want the create counted as missed", st)
	}
	if r := run(t, s, ExecRequest{Command: "true"}); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("exec after a dead spare: %+v", r)
	}

	ws, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ws.Close() }()
	// A bind that fails, for whatever reason, leaves no spare running.
	tests := []struct {
		name     string
		mutate   func(*agent.LaunchSpec)
		unusable bool // the error is ErrSpareUnusable
	}{
		{"other host ids", func(spec *agent.LaunchSpec) {
			spec.HostUID++ // not what it was cloned for
			spec.Workspace = ws
		}, true},
		{"no workspace", func(*agent.LaunchSpec) {}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m.spares.Refill()
			waitFor(t, func() bool { return len(readySpares(m)) == 1 })
			si, ok := m.takeSpare(Spec{})
			if !ok {
				t.Fatal("no spare")
			}
			defer m.freeSlot(si.Slot)
			spec := m.spareSpec(si.Slot)
			tc.mutate(&spec)
			_, err := si.Spare.Bind(context.Background(), spec)
			if err == nil || errors.Is(err, agent.ErrSpareUnusable) != tc.unusable {
				t.Fatalf("bind: %v, want an error (ErrSpareUnusable: %v)", err, tc.unusable)
			}
			<-si.Spare.Exited()
			si.Kill() // its group (what the start's cleanup does)
		})
	}
}

// TestWarmPoolTakesSpares: the warm pool's refills are cold creates too,
// and may run before the first call (spares exist before the pools).
func TestWarmPoolTakesSpares(t *testing.T) {
	cfg := testConfig(t)
	cfg.SpareInits, cfg.WarmPool = 1, 1
	m := newManager(t, cfg, nil)
	pooled := func() int {
		_, n := m.pool.Status()
		return n
	}
	waitFor(t, func() bool { return pooled() == 1 && len(readySpares(m)) == 1 })
	s := create(t, m, Spec{})
	if r := run(t, s, ExecRequest{Command: "true"}); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("exec: %+v", r)
	}
}

// TestSpareGroupBindFailsClosed: when a spare's group cannot be made the
// sandbox's (here after its rename, before its limits), the spare is
// killed, its group removed, and a fresh init cloned into groups made for
// it starts the sandbox, with the sandbox's limits.
func TestSpareGroupBindFailsClosed(t *testing.T) {
	cfg := testConfig(t)
	cfg.SpareInits = 1
	m := newManager(t, cfg, nil)
	if m.cg.Info().Version != 1 {
		t.Skip("spares have groups of their own on cgroup v1 only")
	}
	waitFor(t, func() bool { return len(readySpares(m)) == 1 })
	spare := m.spares.Ready()[0]
	defer func(h func() error) { spareBindHook = h }(spareBindHook)
	spareBindHook = func() error { return errors.New("injected") }
	s := create(t, m, Spec{Limits: Limits{MemoryBytes: 300 << 20, Pids: 40}})
	spareBindHook = func() error { return nil }
	if initPid(t, s) == spare.Pid() {
		t.Fatal("the sandbox got the spare whose group failed to bind")
	}
	select {
	case <-spare.Exited():
	default:
		t.Fatal("the spare whose group failed to bind still runs")
	}
	st, err := s.group.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.MemoryLimit != 300<<20 || st.PidsLimit != 40+initPidsReserve {
		t.Fatalf("the fresh init's group: %+v", st)
	}
	procs, err := s.group.Procs()
	if err != nil || !slices.Contains(procs, initPid(t, s)) {
		t.Fatalf("the fresh init %d is not in its group: %v (%v)", initPid(t, s), procs, err)
	}
	if r := run(t, s, ExecRequest{Command: "true"}); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("exec: %+v", r)
	}
	// A new spare replaces the dead one; no group of the old is left.
	waitFor(t, func() bool { return len(readySpares(m)) == 1 })
	names, err := m.cg.List()
	if err != nil {
		t.Fatal(err)
	}
	var spareGroups int
	for _, n := range names {
		if strings.HasPrefix(n, "spare-") {
			spareGroups++
		} else if n != s.rec.ID {
			t.Errorf("group %q left", n)
		}
	}
	if spareGroups != 1 {
		t.Fatalf("groups %v: want the sandbox's and one spare's", names)
	}
}

// TestSpareRefillWaitsForTheFirstCommand: the spare a create took is
// replaced once the sandbox's first command has ended (its clone and
// runtime start do not run beside it), or, with no command, once
// spareRefillBound has passed.
func TestSpareRefillWaitsForTheFirstCommand(t *testing.T) {
	defer func(d time.Duration) { spareRefillBound = d }(spareRefillBound)
	cfg := testConfig(t)
	cfg.SpareInits = 1
	m := newManager(t, cfg, nil)
	waitFor(t, func() bool { return len(readySpares(m)) == 1 })

	spareRefillBound = time.Hour // only the command can ask for it
	s := create(t, m, Spec{})
	if s.firstEnded.Load() == nil {
		t.Fatal("the refill does not wait for the first command")
	}
	if n := len(readySpares(m)); n != 0 {
		t.Fatalf("%d spares ready before the first command", n)
	}
	if r := run(t, s, ExecRequest{Command: "true"}); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("exec: %+v", r)
	}
	waitFor(t, func() bool { return len(readySpares(m)) == 1 })
	if s.firstEnded.Load() != nil {
		t.Fatal("the first command's hook is still set")
	}

	spareRefillBound = time.Millisecond // no command: the bound asks
	s2 := create(t, m, Spec{})
	waitFor(t, func() bool { return len(readySpares(m)) == 1 })
	if r := run(t, s2, ExecRequest{Command: "true"}); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("exec: %+v", r)
	}
	if got := m.PoolStatus().Spares; got.Taken != 2 || got.Ready != 1 {
		t.Fatalf("status %+v: want 2 taken, 1 ready", got)
	}
}
