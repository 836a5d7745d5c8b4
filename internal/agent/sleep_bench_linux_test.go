package agent

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"
	"github.com/sandhold/sandhold/internal/agent/sandboxinit"
)

// threadsCPU is the CPU time (ns) the init's live threads have used, as
// initCPU but for a benchmark. Across a wake no thread ends, so the
// difference over a call is the wake's and the call's.
func threadsCPU(tb testing.TB, pid int) int64 {
	tb.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var sum int64
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			sum += n
		}
	}
	return sum
}

// BenchmarkWake compares a call to an awake init with the first call after
// it slept (the keeper execs the Go init, which serves it): wall time per
// call (ns/op, loaded host: compare the pairs) and the init's CPU per call
// (cpu-us/op), and the sandbox group's CPU over the whole round, going to
// sleep included (round-cpu-us/op). "ping" is the cheapest call; "exec" runs `true`, as the
// first exec of an agent after a pause.
//
//	go test -run '^$' -bench Wake -benchtime 30x ./internal/agent/
func BenchmarkWake(b *testing.B) {
	for _, call := range []string{"ping", "exec"} {
		for _, asleep := range []bool{false, true} {
			name := call + "/awake"
			if asleep {
				name = call + "/first-after-sleep"
			}
			b.Run(name, func(b *testing.B) {
				benchWake(b, call, asleep)
			})
		}
	}
}

func benchWake(b *testing.B, call string, asleep bool) {
	memfd := keeperMemfd(b)
	after := 3600_000 // ms: stays awake
	if asleep {
		after = 50
	}
	ts, err := prepareLaunchSetup(b, func(st *proto.Setup) { st.SleepAfterMs = after }, func(ls *LaunchSpec) { ls.ExeFile = memfd })()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	do := func() {
		switch call {
		case "ping":
			if err := ts.Ping(ctx); err != nil {
				b.Fatal(err)
			}
		case "exec":
			if r := ts.runAs(b, false, "true"); r.exit.Code != 0 {
				b.Fatalf("true: %+v %q", r.exit, r.stderr)
			}
		}
	}
	do() // the init's first call faults in what every call needs
	var cpu, wall, cycle time.Duration
	groupCPU := func() time.Duration {
		st, err := ts.group.Stats()
		if err != nil {
			b.Fatal(err)
		}
		return st.CPUUsage
	}
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		g0 := groupCPU()
		if asleep {
			waitAsleepB(b, ts.Pid)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
		c0 := threadsCPU(b, ts.Pid)
		t0 := time.Now()
		b.StartTimer()
		do()
		b.StopTimer()
		wall += time.Since(t0)
		cpu += time.Duration(threadsCPU(b, ts.Pid) - c0)
		cycle += groupCPU() - g0
	}
	// The sandbox's CPU over the whole round: the idle wait (and going to
	// sleep), the wake and the call.
	b.ReportMetric(float64(cycle.Microseconds())/float64(b.N), "round-cpu-us/op")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(wall.Microseconds())/float64(b.N), "wall-us/op")
}

func waitAsleepB(b *testing.B, pid int) {
	b.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(st)) == sandboxinit.KeeperName {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatal("the init did not sleep")
}

// BenchmarkColdInitCPU is the lean init's CPU (every live thread's
// schedstat) from its start to 300 ms after it is ready, and then for its
// first command (`true`): the cold path of a create and its first exec.
//
//	go test -run '^$' -bench ColdInitCPU -benchtime 20x ./internal/agent/
func BenchmarkColdInitCPU(b *testing.B) {
	memfd := keeperMemfd(b)
	var start, first time.Duration
	for range b.N {
		ts, err := prepareLaunchSetup(b, nil, func(ls *LaunchSpec) { ls.ExeFile = memfd })()
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		c0 := threadsCPU(b, ts.Pid)
		if r := ts.runAs(b, false, "true"); r.exit.Code != 0 {
			b.Fatalf("true: %+v %q", r.exit, r.stderr)
		}
		c1 := threadsCPU(b, ts.Pid)
		start += time.Duration(c0)
		first += time.Duration(c1 - c0)
		ts.Kill()
	}
	b.ReportMetric(float64(start.Microseconds())/float64(b.N)/1000, "start-cpu-ms/op")
	b.ReportMetric(float64(first.Microseconds())/float64(b.N)/1000, "first-exec-cpu-ms/op")
}
