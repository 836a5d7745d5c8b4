package cgroup

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkPlaceOrRename is the two ways a cold create can put an init
// that already runs into its sandbox's group: move it (AddProc: a v1
// migration, which takes the kernel's thread-group lock for writing and
// so waits for a grace period and for every fork and exit on the host in
// flight), or, for an init that waits in a group of its own, rename that
// group and write the sandbox's limits (Rename + SetLimits: no task
// moves). Each iteration times both on a sleeping process, alternating;
// SANDHOLD_BENCH_FORKS=N runs N shell loops forking /bin/true beside it
// (a host whose sandboxes run commands). p50 of each in µs.
//
//	go test -run '^$' -bench PlaceOrRename -benchtime 200x ./internal/isolate/cgroup/
func BenchmarkPlaceOrRename(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to create cgroups")
	}
	m, err := New(testBaseName())
	if err != nil {
		b.Skip(err)
	}
	if m.Info().Version != 1 {
		b.Skip("rename is v1's")
	}
	defer m.Release()
	defer func() { _, _ = Reap(m, nil) }()
	if n, _ := strconv.Atoi(os.Getenv("SANDHOLD_BENCH_FORKS")); n > 0 {
		for range n {
			c := exec.Command("/bin/sh", "-c", "while :; do /bin/true; done")
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
		}
	}
	lim := Limits{MemoryBytes: 300 << 20, Pids: 114, CPUMilli: 700}
	spare := Limits{MemoryBytes: 256 << 20, Pids: 64}
	sleeper := func() *exec.Cmd {
		c := exec.Command("/bin/sleep", "60")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		return c
	}
	// SANDHOLD_BENCH_GAP=d waits d before each pair: the kernel's
	// thread-group lock is cheap to take for writing right after another
	// writer (its grace period is still passed), dear after a quiet gap.
	gap, _ := time.ParseDuration(os.Getenv("SANDHOLD_BENCH_GAP"))
	var place, rename []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		pg := mustCreateB(b, m, "p"+strconv.Itoa(i), lim)
		pc := sleeper()
		sg := mustCreateB(b, m, "spare-"+strconv.Itoa(i), spare)
		if _, err := sg.SubSharingLimits("user", Limits{}); err != nil {
			b.Fatal(err)
		}
		sc := sleeper()
		if err := sg.AddProc(sc.Process.Pid); err != nil {
			b.Fatal(err)
		}
		time.Sleep(gap)
		b.StartTimer()
		t0 := time.Now()
		if err := pg.AddProc(pc.Process.Pid); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		g, err := m.Rename("spare-"+strconv.Itoa(i), "r"+strconv.Itoa(i))
		if err == nil {
			err = g.SetLimits(lim)
		}
		if err != nil {
			b.Fatal(err)
		}
		if u, err := g.OpenSub("user"); err != nil || u.SetLimits(Limits{Pids: 50}) != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		b.StopTimer()
		place, rename = append(place, t1.Sub(t0)), append(rename, t2.Sub(t1))
		_ = pg.Destroy()
		_ = g.Destroy()
		_ = pc.Wait()
		_ = sc.Wait()
		b.StartTimer()
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds())
	}
	b.ReportMetric(p50(place), "place-p50-µs")
	b.ReportMetric(p50(rename), "rename-limits-p50-µs")
}

func mustCreateB(b *testing.B, m Manager, name string, l Limits) Group {
	b.Helper()
	g, err := m.Create(name, l)
	if err != nil {
		b.Fatal(err)
	}
	return g
}
