package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"
	"github.com/sandhold/sandhold/internal/agent/sandboxinit"
)

// BenchmarkInitMaxProcs compares runtime settings of the lean init
// (cmd/sandhold-init from a sealed memfd, as `make build` ships it):
// GOMAXPROCS 2 and 1 at GOGC 100, and GOGC 25 at GOMAXPROCS 2, in rounds
// that alternate between them so all see the same machine (informational:
// no assertion on figures). Per setting it logs the idle init's Pss_Anon;
// for 8 clients in one sandbox spawning /bin/true, then making file calls
// (stat, open, a directory listing), the throughput and the init's own CPU
// per operation (its threads' schedstat run time; a loaded host distorts
// it less than wall time); the throughput of both at once (4 clients
// spawning, 4 making file calls); and its Pss_Anon right after the load
// and once quiet (release_linux.go). It is one measurement of fixed size
// (about two and a half minutes), whatever b.N: run it once.
//
//	go test -run '^$' -bench 'InitMaxProcs$' -benchtime 1x ./internal/agent/
func BenchmarkInitMaxProcs(b *testing.B) {
	for range b.N {
		measureInitMaxProcs(b)
	}
}

func measureInitMaxProcs(b *testing.B) {
	const (
		rounds  = 3
		clients = 8
		spawns  = 15  // per client
		files   = 150 // per client
	)
	type figure struct {
		pss, pssAfter      []int64
		pssQuiet           []int64
		execPerS, filePerS []float64
		mixExec, mixFile   []float64       // exec/s and file calls/s, both at once
		execCPU, fileCPU   []time.Duration // init CPU per op
	}
	if _, err := exec.LookPath("go"); err != nil {
		b.Skip("the go tool is not on PATH:", err)
	}
	_, memfd := buildInits(b, false)
	type setting struct{ procs, gogc int }
	procs := []setting{{2, 100}, {1, 100}, {2, 25}}
	figs := map[setting]*figure{}
	for _, p := range procs {
		figs[p] = &figure{}
	}
	ctx := context.Background()
	for range rounds {
		for _, p := range procs {
			ts := launchWith(b, nil, func(ls *LaunchSpec) { ls.ExeFile, ls.maxProcs, ls.goGC = memfd, p.procs, p.gogc })
			f := figs[p]
			time.Sleep(300 * time.Millisecond) // let it settle (FreeOSMemory)
			m, err := smapsRollup(ts.Pid)
			if err != nil {
				b.Fatal(err)
			}
			f.pss = append(f.pss, m["Pss_Anon"])
			// work runs op in every client at once and returns the
			// init's CPU time meanwhile.
			work := func(op func() error) time.Duration {
				before := initCPU(b, ts.Pid)
				var wg sync.WaitGroup
				errs := make(chan error, clients)
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := op(); err != nil {
							errs <- err
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				return time.Duration(initCPU(b, ts.Pid) - before)
			}
			// exec
			t0 := time.Now()
			cpu := work(func() error {
				for range spawns {
					pr, err := ts.Spawn(ctx, proto.SpawnReq{Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}, Cwd: "/"}, nil, nil)
					if err != nil {
						return err
					}
					<-pr.Exited()
					pr.Close()
				}
				return nil
			})
			f.execPerS = append(f.execPerS, float64(clients*spawns)/time.Since(t0).Seconds())
			f.execCPU = append(f.execCPU, cpu/(clients*spawns))
			// files
			t0 = time.Now()
			cpu = work(func() error {
				for i := range files {
					switch i % 3 {
					case 0:
						if _, _, err := ts.File(ctx, proto.OpStat, proto.FileReq{Path: "/workspace"}); err != nil {
							return err
						}
					case 1:
						_, fd, err := ts.File(ctx, proto.OpOpen, proto.FileReq{Path: "/etc/passwd"})
						if err != nil {
							return err
						}
						_ = fd.Close()
					case 2:
						if _, _, err := ts.File(ctx, proto.OpReadDir, proto.FileReq{Path: "/usr/bin", Limit: 100}); err != nil {
							return err
						}
					}
				}
				return nil
			})
			f.filePerS = append(f.filePerS, float64(clients*files)/time.Since(t0).Seconds())
			f.fileCPU = append(f.fileCPU, cpu/(clients*files))
			// both at once: half the clients spawn, half make file calls
			var nExec, nFile atomic.Int64
			t0 = time.Now()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range files / 3 {
						if c%2 == 0 {
							if i >= spawns {
								return
							}
							pr, err := ts.Spawn(ctx, proto.SpawnReq{Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}, Cwd: "/"}, nil, nil)
							if err != nil {
								b.Error(err)
								return
							}
							<-pr.Exited()
							pr.Close()
							nExec.Add(1)
							continue
						}
						if _, _, err := ts.File(ctx, proto.OpStat, proto.FileReq{Path: "/workspace"}); err != nil {
							b.Error(err)
							return
						}
						nFile.Add(1)
					}
				}()
			}
			wg.Wait()
			el := time.Since(t0).Seconds()
			f.mixExec = append(f.mixExec, float64(nExec.Load())/el)
			f.mixFile = append(f.mixFile, float64(nFile.Load())/el)
			m, err = smapsRollup(ts.Pid)
			if err != nil {
				b.Fatal(err)
			}
			f.pssAfter = append(f.pssAfter, m["Pss_Anon"])
			time.Sleep(2*sandboxinit.ReleaseAfter + time.Second) // a release comes 1-2 periods after the last call
			m, err = smapsRollup(ts.Pid)
			if err != nil {
				b.Fatal(err)
			}
			f.pssQuiet = append(f.pssQuiet, m["Pss_Anon"])
			ts.Kill()
		}
	}
	for _, p := range procs {
		f := figs[p]
		b.Logf("GOMAXPROCS=%d GOGC=%d: idle Pss_Anon %v kB (after the load %v kB, once quiet %v kB); exec %s/s, init CPU %v per spawn; files %s/s, init CPU %v per call; at once: exec %s/s with files %s/s",
			p.procs, p.gogc, f.pss, f.pssAfter, f.pssQuiet, fmtRates(f.execPerS), f.execCPU, fmtRates(f.filePerS), f.fileCPU, fmtRates(f.mixExec), fmtRates(f.mixFile))
	}
	b.Logf("(%d clients in one sandbox; rounds alternate; load average %s)", clients, loadAverage())
}

func fmtRates(r []float64) string {
	s := ""
	for i, v := range r {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.0f", v)
	}
	return "[" + s + "]"
}

// initCPU is the CPU time the init's threads have run, in ns (schedstat).
func initCPU(t testing.TB, pid int) int64 {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, e.Name()))
		if err != nil {
			continue // the thread ended
		}
		var ns int64
		if _, err := fmt.Sscan(string(b), &ns); err == nil {
			sum += ns
		}
	}
	return sum
}
