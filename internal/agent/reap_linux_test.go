package agent

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// zombiesOf lists the host pids of pid's children that are zombies.
func zombiesOf(t *testing.T, pid int) []int { return childrenOf(t, pid, "Z") }

// childrenOf lists the host pids of pid's children in a state (a letter).
func childrenOf(t *testing.T, pid int, state string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		st := string(b)
		if strings.Contains(st, "\nPPid:\t"+strconv.Itoa(pid)+"\n") && strings.Contains(st, "\nState:\t"+state) {
			out = append(out, p)
		}
	}
	return out
}

// TestInitReapsOrphans: PID 1 reaps the orphans it inherits — also when no
// child of its own is left, and when the orphan ends long after its
// parent — and still reports the exits of its own children afterwards.
// (Written for a reaper that waited in waitid instead of on SIGCHLD, which
// was measured and not kept: BENCHMARKS.md, "One exec as a timeline".)
func TestInitReapsOrphans(t *testing.T) {
	ts := launch(t, nil)
	sub, err := ts.group.Sub(fmt.Sprintf("o%d", time.Now().UnixNano()%1e9), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Destroy() })
	attach, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	defer proto.CloseAll(attach)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The orphan outlives its parent until the test kills it (no timer to
	// race on a loaded host) and closes no pipe of ours.
	p, err := ts.Spawn(ctx, proto.SpawnReq{
		Argv: []string{"sh", "-c", "sleep 600 </dev/null >/dev/null 2>&1 & exit 7"},
		Env:  []string{"PATH=/usr/bin:/bin"},
		Cwd:  "/workspace",
	}, attach, ts.home)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	select {
	case ex := <-p.Exited():
		if ex.Code != 7 {
			t.Fatalf("exit %+v, want code 7", ex)
		}
	case <-ctx.Done():
		t.Fatal("no exit reported")
	}
	// The orphan is the init's child now, asleep, then a zombie that only
	// the init can reap.
	if len(childrenOf(t, ts.Pid, "")) == len(zombiesOf(t, ts.Pid)) {
		t.Fatal("the orphan is not (or no longer) a live child of the init")
	}
	// Now it ends, long after its parent.
	orphans, err := sub.Procs()
	if err != nil || len(orphans) == 0 {
		t.Fatalf("the orphan's group holds %v (%v)", orphans, err)
	}
	for _, pid := range orphans {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill the orphan %d: %v", pid, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := sub.Procs()
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) == 0 && len(zombiesOf(t, ts.Pid)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: group holds %v, zombies of the init %v", pids, zombiesOf(t, ts.Pid))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And a command after that is still reported (reap waits again).
	if r := ts.run(t, "sh", "-c", "exit 3"); r.exit.Code != 3 {
		t.Fatalf("exit %+v, want code 3", r.exit)
	}
}
