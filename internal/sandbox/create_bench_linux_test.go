package sandbox

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/agent/initbin"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/sandbox/startsteps"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
)

// BenchmarkColdCreate is one cold create (no warm pool) and its first
// exec, as `bench` measures it without HTTP, with the lean init from a
// sealed memfd and the server's default 5 GB workspace; besides the whole
// it reports the p50 of each step of the init's start (steps.go) and of
// the first exec, so one run says where the time goes.
//
//	go test -run '^$' -bench ColdCreate -benchtime 50x ./internal/sandbox/
//	SANDHOLD_BENCH_SPARE_INITS=2 go test … (the same from spare inits)
func BenchmarkColdCreate(b *testing.B) {
	// SANDHOLD_BENCH_SPARE_INITS=N binds spare inits (spares.go) instead
	// of cloning each init.
	spares := 0
	if n, err := strconv.Atoi(os.Getenv("SANDHOLD_BENCH_SPARE_INITS")); err == nil {
		spares = n
	}
	m := benchManager(b, "create", spares)
	var mu sync.Mutex
	var last []startsteps.Step
	m.onStart = func(st []startsteps.Step) {
		mu.Lock()
		last = slices.Clone(st)
		mu.Unlock()
	}
	ctx := context.Background()
	once := func() (time.Duration, []startsteps.Step) {
		t0 := time.Now()
		info, err := m.Create(ctx, owner, Spec{})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		s, _ := m.Get(owner, info.ID)
		e, err := s.Exec(ctx, ExecRequest{Argv: []string{"/bin/true"}})
		if err != nil || e.Status() != StatusCompleted {
			b.Fatal("first exec:", err)
		}
		total := time.Since(t0)
		first := time.Since(t1)
		// A second command says what the first one paid for being first.
		t2 := time.Now()
		e, err = s.Exec(ctx, ExecRequest{Argv: []string{"/bin/true"}})
		if err != nil || e.Status() != StatusCompleted {
			b.Fatal("second exec:", err)
		}
		second := time.Since(t2)
		mu.Lock()
		st := append(last, startsteps.Step{Name: "create_rest", D: 0}, startsteps.Step{Name: "first_exec", D: first}, startsteps.Step{Name: "second_exec", D: second})
		mu.Unlock()
		// Steps that ran beside others are not part of the sequence.
		var inStart time.Duration
		for _, x := range st[:len(st)-3] {
			if !strings.HasSuffix(x.Name, "_beside") {
				inStart += x.D
			}
		}
		st[len(st)-3].D = t1.Sub(t0) - inStart
		b.StopTimer()
		if err := m.Delete(ctx, owner, info.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		return total, st
	}
	once() // the template is built here
	totals := make([]time.Duration, 0, b.N)
	per := map[string][]time.Duration{}
	var order []string
	var ru0 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	var ch0 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &ch0)
	b.ResetTimer()
	for range b.N {
		d, st := once()
		totals = append(totals, d)
		for _, x := range st {
			if _, ok := per[x.Name]; !ok {
				order = append(order, x.Name)
			}
			per[x.Name] = append(per[x.Name], x.D)
		}
	}
	b.StopTimer()
	// CPU time moves much less with the load than wall time: this
	// process's (the server's part) and the reaped inits' (each sandbox
	// is deleted, so its init is reaped, within the loop), per create.
	var ru1, ch1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &ch1)
	cpu := func(a, b unix.Rusage) float64 {
		return float64(time.Duration(b.Utime.Nano()+b.Stime.Nano()-a.Utime.Nano()-a.Stime.Nano())) / 1e6
	}
	b.ReportMetric(cpu(ru0, ru1)/float64(b.N), "ms-cpu-server/op")
	b.ReportMetric(cpu(ch0, ch1)/float64(b.N), "ms-cpu-inits/op")
	b.ReportMetric(float64(ru1.Minflt-ru0.Minflt)/float64(b.N), "faults-server/op")
	b.ReportMetric(float64(ch1.Minflt-ch0.Minflt)/float64(b.N), "faults-inits/op")
	b.ReportMetric(p50ms(totals), "ms-p50-total")
	for _, n := range order {
		b.ReportMetric(p50ms(per[n]), "ms-p50-"+n)
	}
}

// benchManager is a manager made the server's way for the create
// benchmarks: the lean init from a sealed memfd cloned by one launcher,
// the server's default 5 GB workspace, no warm pool, spares spare inits.
// It, the launcher and the memfd are closed when the benchmark ends.
func benchManager(b *testing.B, name string, spares int) *Manager {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	if _, err := volume.Tool("mkfs.ext4"); err != nil {
		b.Skip(err)
	}
	f, err := initbin.Memfd(buildLeanInit(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	l, err := agent.StartLauncher(agent.LauncherSpec{ExeFile: f})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	cfg := Config{
		DataDir:  b.TempDir(),
		Max:      Limits{MemoryBytes: 1 << 30, Pids: 100, CPUTime: 30 * time.Second, CPUMilli: 2000, DiskBytes: 5_000_000_000},
		Default:  Limits{MemoryBytes: 1 << 30, Pids: 50, CPUTime: 30 * time.Second, DiskBytes: 5_000_000_000},
		TmpBytes: 64 << 20, InitFile: f, Launcher: l, SpareInits: spares,
	}
	cg, err := cgroup.New(fmt.Sprintf("sb%d-bench-%s", os.Getpid(), name))
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(cg.Release) // after m.Close (cleanups run last first)
	m, err := New(context.Background(), cfg, &memRecords{}, nil, cg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	return m
}
