package agent

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkLaunchServerVsLauncher starts inits alternately the old way
// (this process clones them) and through the launcher, with a heap of the
// given size in this process standing in for the server's, and reports
// per path: launch to ready (p50), this process's page faults and CPU time
// per launch (load moves these little), and the longest time a goroutine
// of this process waited to fault in one fresh page while launches ran
// (the stall a fork's mm lock and copy-on-write cause).
//
//	go test -run '^$' -bench LaunchServerVsLauncher -benchtime 20x ./internal/agent/
func BenchmarkLaunchServerVsLauncher(b *testing.B) {
	for _, mb := range []int{0, 256} {
		b.Run(fmt.Sprintf("heap=%dMB", mb), func(b *testing.B) {
			heap := make([]byte, mb<<20)
			for i := 0; i < len(heap); i += 4096 {
				heap[i] = 1
			}
			l, err := StartLauncher(LauncherSpec{Exe: "/proc/self/exe", Args: []string{"init"}})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = l.Close() }()
			// The stall probe: touch a fresh page, time it, repeat; only
			// while probing is set, so its own faults stay out of the
			// counts.
			var stop, probing atomic.Bool
			var which atomic.Int32
			var lat [2][]time.Duration
			done := make(chan struct{})
			go func() {
				defer close(done)
				for !stop.Load() {
					if !probing.Load() {
						time.Sleep(100 * time.Microsecond)
						continue
					}
					buf, err := unix.Mmap(-1, 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
					if err != nil {
						return
					}
					w := which.Load()
					for i := 0; i < len(buf); i += 4096 {
						t0 := time.Now()
						buf[i] = 1
						lat[w] = append(lat[w], time.Since(t0))
					}
					_ = unix.Munmap(buf)
				}
			}()
			type path struct {
				name        string
				spec        func(*LaunchSpec)
				walls       []time.Duration
				flt, kidFlt int64
				cpu, kidCPU time.Duration
			}
			cpuOf := func(r unix.Rusage) time.Duration { return time.Duration(r.Utime.Nano() + r.Stime.Nano()) }
			paths := []*path{{name: "server"}, {name: "launcher", spec: viaLauncher(l)}}
			run := func(p *path, probe bool) {
				start := prepareLaunch(b, p.spec)
				var r0, r1, c0, c1 unix.Rusage
				_ = unix.Getrusage(unix.RUSAGE_SELF, &r0)
				_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &c0)
				probing.Store(probe)
				t0 := time.Now()
				ts, err := start()
				wall := time.Since(t0)
				probing.Store(false)
				_ = unix.Getrusage(unix.RUSAGE_SELF, &r1)
				if err != nil {
					b.Fatal(err)
				}
				ts.Kill() // reaped: its rusage is in RUSAGE_CHILDREN now
				_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &c1)
				if probe {
					return
				}
				p.walls = append(p.walls, wall)
				p.flt += r1.Minflt - r0.Minflt
				p.cpu += cpuOf(r1) - cpuOf(r0)
				p.kidFlt += c1.Minflt - c0.Minflt
				p.kidCPU += cpuOf(c1) - cpuOf(c0)
			}
			b.ResetTimer()
			for range b.N {
				for _, p := range paths {
					run(p, false)
				}
			}
			b.StopTimer()
			for range b.N {
				for i, p := range paths {
					which.Store(int32(i)) //nolint:gosec // G115: 0 or 1
					run(p, true)
				}
			}
			stop.Store(true)
			<-done
			for i, p := range paths {
				slices.Sort(p.walls)
				slices.Sort(lat[i])
				n := float64(b.N)
				b.ReportMetric(float64(p.walls[len(p.walls)/2].Microseconds())/1000, "ms-p50-"+p.name)
				b.ReportMetric(float64(p.flt)/n, "self-faults/op-"+p.name)
				b.ReportMetric(float64(p.cpu.Microseconds())/1000/n, "self-cpu-ms/op-"+p.name)
				b.ReportMetric(float64(p.kidFlt)/n, "init-faults/op-"+p.name)
				b.ReportMetric(float64(p.kidCPU.Microseconds())/1000/n, "init-cpu-ms/op-"+p.name)
				if k := len(lat[i]); k > 0 {
					b.ReportMetric(float64(lat[i][k*99/100].Microseconds())/1000, "ms-p99-fault-"+p.name)
					b.ReportMetric(float64(lat[i][k-1].Microseconds())/1000, "ms-max-fault-"+p.name)
				}
			}
			runtime.KeepAlive(heap)
		})
	}
}
