package agent

import (
	"context"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// TestSpawnCost logs what a spawn costs with and without the move into an
// execution group (informational: no assertion on durations).
func TestSpawnCost(t *testing.T) {
	if testing.Short() {
		t.Skip("informational")
	}
	ts := launch(t, nil)
	sub, err := ts.group.Sub("cost", cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Destroy() }()
	attach, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(attach)
	ctx := context.Background()
	for _, withGroup := range []bool{false, true} {
		var a, h []*os.File
		if withGroup {
			a, h = attach, ts.home
		}
		start := time.Now()
		const n = 100
		for range n {
			p, err := ts.Spawn(ctx, SpawnReq{Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}, Cwd: "/"}, a, h)
			if err != nil {
				t.Fatal(err)
			}
			<-p.Exited()
			p.Close()
		}
		t.Logf("with execution group %v: %v per spawn (%d hierarchies)", withGroup, time.Since(start)/n, len(attach))
	}
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
