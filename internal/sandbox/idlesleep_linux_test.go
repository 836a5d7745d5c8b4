package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/testenv"
)

// TestIdleSleepReachesTheInit: Config.IdleSleep (SANDBOX_IDLE_SLEEP) is the
// quiet period the init sleeps after — a short one puts an idle init in its
// keeper within seconds — and a negative one turns the sleep off, which the
// init says in its capabilities layer.
func TestIdleSleepReachesTheInit(t *testing.T) {
	testenv.RequireSandboxes(t)
	prog := buildLeanInit(t)

	// Each manager in its own subtest: a manager reaps every cgroup below
	// its test's base when it starts.
	t.Run("short", func(t *testing.T) { idleSleepShort(t, prog) })
	t.Run("off", func(t *testing.T) { idleSleepOff(t, prog) })
}

func idleSleepShort(t *testing.T, prog []byte) {
	cfg := leanConfig(t, prog)
	cfg.IdleSleep = time.Second
	s := create(t, newManager(t, cfg, nil), Spec{})
	if r := run(t, s, ExecRequest{Argv: []string{"true"}}); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("exec: %+v", r)
	}
	comm := func(s *Sandbox) string {
		s.mu.Lock()
		pid := s.inst.Pid
		s.mu.Unlock()
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		return strings.TrimSpace(string(b))
	}
	deadline := time.Now().Add(20 * time.Second)
	for comm(s) != "sandhold-keeper" {
		if time.Now().After(deadline) {
			t.Fatalf("init not asleep 20 s after its last call with a 1 s quiet period (comm %q)", comm(s))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// It wakes for the next call.
	if r := run(t, s, ExecRequest{Argv: []string{"true"}}); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("exec after the sleep: %+v", r)
	}
}

func idleSleepOff(t *testing.T, prog []byte) {
	cfg := leanConfig(t, prog)
	cfg.IdleSleep = -1
	off := create(t, newManager(t, cfg, nil), Spec{})
	off.mu.Lock()
	layers := off.inst.Ready.Layers
	off.mu.Unlock()
	said := false
	for _, l := range layers {
		said = said || strings.Contains(l.Detail, "idle sleep: off")
	}
	if !said {
		t.Errorf("with IdleSleep < 0 no layer says the idle sleep is off: %+v", layers)
	}
}

// TestIdleSleepWaitsForCreates: an init idle for its quiet period while a
// create is under way asks for leave to sleep and stays awake until the
// create has ended (sleepgate), then sleeps.
func TestIdleSleepWaitsForCreates(t *testing.T) {
	testenv.RequireSandboxes(t)
	cfg := leanConfig(t, buildLeanInit(t))
	cfg.IdleSleep = time.Second
	m := newManager(t, cfg, nil)
	s := create(t, m, Spec{})
	end := m.sleeps.Creates() // a create under way from now on
	held := m.sleeps.Held
	comm := func() string {
		s.mu.Lock()
		pid := s.inst.Pid
		s.mu.Unlock()
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		return strings.TrimSpace(string(b))
	}
	waitFor(t, func() bool { return held() == 1 })
	if c := comm(); c != "sandhold-init" {
		t.Fatalf("the init is %q while its leave is held, want it awake", c)
	}
	end()
	waitFor(t, func() bool { return comm() == "sandhold-keeper" })
	if r := run(t, s, ExecRequest{Argv: []string{"true"}}); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("exec after the sleep: %+v", r)
	}
}

// TestQuietSandboxMemoryFalls: after a burst of calls, a sandbox left
// quiet gives its init's memory back — the idle release, then the sleep in
// the keeper, granted by the manager's gate — so its cgroup's memory falls
// and its init holds tens of kB.
func TestQuietSandboxMemoryFalls(t *testing.T) {
	testenv.RequireSandboxes(t)
	cfg := leanConfig(t, buildLeanInit(t))
	cfg.IdleSleep = time.Second
	s := create(t, newManager(t, cfg, nil), Spec{})
	for range 20 {
		if r := run(t, s, ExecRequest{Argv: []string{"sh", "-c", "ls -R /usr/lib >/dev/null 2>&1; true"}}); r.ExitCode == nil || *r.ExitCode != 0 {
			t.Fatalf("exec: %+v", r)
		}
	}
	cgroupMemory := func() int64 {
		st, err := s.cgroupGroup().Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st.MemoryBytes
	}
	awake := cgroupMemory()
	s.mu.Lock()
	pid := s.inst.Pid
	s.mu.Unlock()
	initAnon := func() int64 {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "Pss_Anon:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				return kb << 10
			}
		}
		t.Fatal("no Pss_Anon")
		return 0
	}
	t.Logf("after the burst: cgroup %d KB, init Pss_Anon %d KB", awake>>10, initAnon()>>10)
	// The part of the init's memory its cgroup is charged with goes (what
	// the init touched before it was placed in the group is the server's
	// group's: SECURITY.md, SANDBOX_SPARE_INITS).
	waitFor(t, func() bool { return cgroupMemory() <= awake-256<<10 && initAnon() < 100<<10 })
	t.Logf("once quiet: cgroup %d KB, init Pss_Anon %d KB (%s)", cgroupMemory()>>10, initAnon()>>10, initComm(s))
}
