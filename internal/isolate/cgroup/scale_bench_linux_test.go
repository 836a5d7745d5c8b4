package cgroup

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkGroupCreateScale makes b.N sandbox-shaped groups one after the
// other and keeps them all (a sandbox group with limits, its "user" child,
// one execution group and its attach files), then reports the create
// time of the first and the last tenth (wall p50, thread CPU mean): whether making a group gets
// slower as groups add up (issue 16, "flat at scale"). Besides wall time
// it reports the CPU time of the creating thread (the kernel's work for
// it), which a loaded host distorts far less. Run it with -benchtime
// 1000x; it is a benchmark, not a timed test.
func BenchmarkGroupCreateScale(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to create cgroups")
	}
	m, err := New(testBaseName())
	if err != nil {
		b.Skip(err)
	}
	defer func() { _, _ = Reap(m, nil) }()
	lim := Limits{MemoryBytes: 256 << 20, Pids: 114, CPUMilli: 1000}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	threadCPU := func() time.Duration {
		var ru unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	times := make([]time.Duration, 0, b.N)
	cpus := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start, cpu0 := time.Now(), threadCPU()
		g, err := m.Create("s"+strconv.Itoa(i), lim)
		if err != nil {
			b.Fatal(err)
		}
		user, err := g.SubSharingLimits("user", Limits{Pids: 50})
		if err != nil {
			b.Fatal(err)
		}
		x, err := user.Sub("x1", Limits{})
		if err != nil {
			b.Fatal(err)
		}
		files, err := x.OpenThreadAttach()
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range files {
			_ = f.Close()
		}
		times = append(times, time.Since(start))
		cpus = append(cpus, threadCPU()-cpu0)
	}
	b.StopTimer()
	if b.N < 20 {
		return
	}
	p50 := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	first, last := p50(times[:b.N/10]), p50(times[b.N-b.N/10:])
	mean := func(d []time.Duration) time.Duration {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return sum / time.Duration(len(d))
	}
	cfirst, clast := mean(cpus[:b.N/10]), mean(cpus[b.N-b.N/10:])
	b.ReportMetric(float64(first.Microseconds()), "first-tenth-p50-µs")
	b.ReportMetric(float64(last.Microseconds()), "last-tenth-p50-µs")
	b.ReportMetric(float64(cfirst.Microseconds()), "first-tenth-cpu-mean-µs")
	b.ReportMetric(float64(clast.Microseconds()), "last-tenth-cpu-mean-µs")
	b.Logf("%d groups: wall p50 first tenth %v, last tenth %v (%.2fx); thread CPU mean %v, %v (%.2fx)", b.N,
		first, last, float64(last)/float64(first), cfirst, clast, float64(clast)/float64(cfirst))
}
