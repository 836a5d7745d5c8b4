package cgroup

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestPopulated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	m, err := New("sandhold-test-populated")
	if err != nil {
		t.Skip(err)
	}
	defer m.Release() // after the group's Destroy below (defers run last first)
	g, err := m.Create("pop", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Destroy() }()
	sub, err := g.Sub("x", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := g.Populated(); err != nil || p {
		t.Fatalf("empty group: populated=%v err=%v", p, err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := sub.AddProc(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if p, err := g.Populated(); err != nil || !p {
		t.Fatalf("a task in a sub-group: parent populated=%v err=%v", p, err)
	}
	if err := sub.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if p, err := sub.Populated(); err != nil || p {
		t.Fatalf("after kill: populated=%v err=%v", p, err)
	}
}

// TestProbeSeesChangesWithoutReopening: a probe opened on an empty group
// answers from the same descriptor as tasks come and go (a read at offset 0
// of a cgroup control file is generated afresh), on every back end here.
func TestProbeSeesChangesWithoutReopening(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		g, err := m.Create("probe", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = g.Destroy() }()
		sub, err := g.Sub("x", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		probe, err := g.OpenProbe()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = probe.Close() }()
		want := func(step string, populated bool) {
			t.Helper()
			// cgroup v2 updates cgroup.events after the task is gone
			// from the group's lists; allow it a bounded moment.
			for range 200 {
				p, err := probe.Populated()
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if p == populated {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Fatalf("%s: probe never said populated=%v", step, populated)
		}
		want("empty", false)
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		if err := sub.AddProc(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		want("a task in a sub-group", true)
		if err := sub.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		want("after the kill", false)
		if err := probe.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := probe.Populated(); err == nil {
			t.Fatal("a closed probe still answers")
		}
	})
}
