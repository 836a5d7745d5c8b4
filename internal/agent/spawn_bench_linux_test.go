package agent

import (
	"context"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// BenchmarkSpawnCost logs what a spawn of /bin/true costs, with and without the
// move into an execution group, beside a bare fork/exec of /bin/true from
// this process, interleaved so both see the same machine (informational:
// no assertion on durations). Besides wall time it logs CPU time, which a
// loaded host distorts less: the server side is this process's own CPU,
// the sandbox side the sandbox group's (init and command). It is one
// measurement of fixed size (300 of each kind), whatever b.N: run it once.
//
//	go test -run '^$' -bench 'SpawnCost$' -benchtime 1x ./internal/agent/
func BenchmarkSpawnCost(b *testing.B) {
	for range b.N {
		spawnCost(b)
	}
}

func spawnCost(b *testing.B) {
	ts := launch(b, nil)
	sub, err := ts.group.Sub("cost", cgroup.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Destroy() }()
	attach, err := sub.OpenThreadAttach()
	if err != nil {
		b.Fatal(err)
	}
	defer proto.CloseAll(attach)
	ctx := context.Background()
	spawn := func(a, h []*os.File) {
		p, err := ts.Spawn(ctx, proto.SpawnReq{Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}, Cwd: "/"}, a, h)
		if err != nil {
			b.Fatal(err)
		}
		<-p.Exited()
		p.Close()
	}
	bare := func() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
	type figure struct {
		wall          []time.Duration
		self, sandbox time.Duration // CPU
	}
	kinds := []string{"bare fork/exec", "spawn", "spawn into execution group"}
	figs := make([]figure, len(kinds))
	const n = 300
	for i := range n + 10 {
		for k := range kinds {
			var self0, kids0 unix.Rusage
			_ = unix.Getrusage(unix.RUSAGE_SELF, &self0)
			_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &kids0)
			st0, _ := ts.group.Stats()
			start := time.Now()
			switch k {
			case 0:
				bare()
			case 1:
				spawn(nil, nil)
			case 2:
				spawn(attach, ts.home)
			}
			wall := time.Since(start)
			if i < 10 {
				continue // warm-up
			}
			var self1, kids1 unix.Rusage
			_ = unix.Getrusage(unix.RUSAGE_SELF, &self1)
			_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &kids1)
			st1, _ := ts.group.Stats()
			f := &figs[k]
			f.wall = append(f.wall, wall)
			f.self += cpuOf(self1) - cpuOf(self0)
			if k == 0 {
				f.sandbox += cpuOf(kids1) - cpuOf(kids0) // the bare child's own CPU
			} else {
				f.sandbox += st1.CPUUsage - st0.CPUUsage
			}
		}
	}
	for k, f := range figs {
		sort.Slice(f.wall, func(i, j int) bool { return f.wall[i] < f.wall[j] })
		b.Logf("%-27s wall p50 %8v  p90 %8v   CPU per op: this process %7v, %s %7v",
			kinds[k], f.wall[n/2], f.wall[n*9/10], f.self/n, map[bool]string{true: "child", false: "sandbox"}[k == 0], f.sandbox/n)
	}
	b.Logf("(%d hierarchies; load average %s)", len(attach), loadAverage())
}

func cpuOf(r unix.Rusage) time.Duration {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) < 14 {
		return "?"
	}
	return string(b[:14])
}

// TestLaunchCost logs what starting an init costs, from Launch to ready
// (informational: no assertion on durations).
func TestLaunchCost(t *testing.T) {
	if testing.Short() {
		t.Skip("informational")
	}
	launch(t, nil) // warm the page cache and the cgroup base
	const n = 10
	var before, after unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &before)
	start := time.Now()
	for range n {
		ts := launch(t, nil)
		ts.Kill()
	}
	wall := time.Since(start) / n
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / n
	t.Logf("%v per init, launch to ready; %v CPU per init (user+system)", wall, cpu)
}
