package cgroup

import (
	"errors"
	"os/exec"
	"testing"
)

// TestCPUProbeReadsWhatCPUUsageReads: a CPU probe opened on an empty group
// answers, from the same descriptor, the figure Group.CPUUsage reads, before
// and after a process burned CPU in a sub-group; closed, it fails.
func TestCPUProbeReadsWhatCPUUsageReads(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		g, err := m.Create("cpuprobe", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = g.Destroy() }()
		sub, err := g.Sub("x", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		probe, err := OpenCPUProbe(g)
		if errors.Is(err, ErrNoCPUAccounting) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = probe.Close() }()
		same := func(step string) int64 {
			t.Helper()
			want, err := g.CPUUsage()
			if err != nil {
				t.Fatal(err)
			}
			got, err := probe.Usage()
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			// Nothing runs in the group: the counter stands still.
			if got != want {
				t.Fatalf("%s: probe %v, CPUUsage %v", step, got, want)
			}
			return int64(got)
		}
		before := same("empty")
		// The shell waits for its stdin to close, in the sub-group by then,
		// and then counts: its CPU time is charged there.
		cmd := exec.Command("sh", "-c", "read x; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := sub.AddProc(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal(err)
		}
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if after := same("after a command"); after <= before {
			t.Fatalf("CPU time did not grow: %d then %d", before, after)
		}
		if err := probe.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := probe.Usage(); err == nil {
			t.Fatal("a closed probe still answers")
		}
	})
}
