package cgroup

import (
	"os"
	"os/exec"
	"testing"
)

func TestPopulated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	m, err := New("sandhold-test-populated")
	if err != nil {
		t.Skip(err)
	}
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
