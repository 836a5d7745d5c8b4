package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/snapshot"
	"github.com/sandhold/sandhold/internal/testenv"
)

// BenchmarkForkStorage is fork ×10 of a snapshot holding 100 MB (all ten
// answering their first exec) against one cold create + first exec, in
// the same rounds, for each storage a fork can have on each file system:
// "image" (the restore's own image: a clone of the chunks where blocks are
// shared, a copy elsewhere) and "layered" (forklower_linux.go). It is
// what picks the storage per file system; the ratio is reported as
// fork10/cold.
//
//	go test -run '^$' -bench ForkStorage -benchtime 5x ./internal/sandbox/
func BenchmarkForkStorage(b *testing.B) {
	for _, fs := range []string{"datadir", "xfs"} {
		for _, storage := range []string{"image", "layered"} {
			b.Run(fs+"/"+storage, func(b *testing.B) {
				dir := b.TempDir()
				if fs == "xfs" {
					dir = testenv.RequireXFS(b)
				}
				benchForks(b, filepath.Join(dir, "data"), storage == "image")
			})
		}
	}
}

func benchForks(b *testing.B, dataDir string, image bool) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	st, err := snapshot.Open(filepath.Join(dataDir, "snapshots"), nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{
		DataDir:  dataDir,
		Max:      Limits{MemoryBytes: 1 << 30, CPUMilli: 2000, Pids: 100, DiskBytes: 1 << 30, CPUTime: 30 * time.Second},
		Default:  Limits{MemoryBytes: 256 << 20, CPUMilli: 1000, Pids: 50, DiskBytes: 1 << 30, CPUTime: 30 * time.Second},
		TmpBytes: 32 << 20, InitExe: "/proc/self/exe", InitArgs: []string{"init"}, Snapshots: st,
	}
	cg, err := cgroup.New(fmt.Sprintf("sb%d-bench-fork-%s", os.Getpid(), strings.ReplaceAll(b.Name(), "/", "-")))
	if err != nil {
		b.Skip(err)
	}
	defer cg.Release()
	m, err := New(context.Background(), cfg, &memRecords{}, nil, cg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	// The storage under test, whatever the file system says.
	m.snaps.SetClones(image)
	ctx := context.Background()
	info, err := m.Create(ctx, owner, Spec{})
	if err != nil {
		b.Fatal(err)
	}
	src, _ := m.Get(owner, info.ID)
	if _, err := src.Exec(ctx, ExecRequest{Command: "head -c 100000000 /dev/urandom > data && sync"}); err != nil {
		b.Fatal(err)
	}
	snap, err := m.Snapshot(ctx, owner, src.ID(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	first := func(id string) error {
		s, err := m.Get(owner, id)
		if err != nil {
			return err
		}
		e, err := s.Exec(ctx, ExecRequest{Argv: []string{"/bin/true"}})
		if err != nil {
			return err
		}
		if e.Status() != StatusCompleted {
			return fmt.Errorf("first exec: %s", e.Status())
		}
		return nil
	}
	var cold, forks []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		c, err := m.Create(ctx, owner, Spec{})
		if err == nil {
			err = first(c.ID)
		}
		if err != nil {
			b.Fatal(err)
		}
		cold = append(cold, time.Since(t0))
		if err := m.Delete(ctx, owner, c.ID); err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		ids := make(chan string, 10)
		errs := make(chan error, 10)
		for range 10 {
			go func() {
				in, err := m.Create(ctx, owner, Spec{Snapshot: snap.ID})
				if err == nil {
					ids <- in.ID
					err = first(in.ID)
				}
				errs <- err
			}()
		}
		for range 10 {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		forks = append(forks, time.Since(t0))
		close(ids)
		for id := range ids {
			if err := m.Delete(ctx, owner, id); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2]) / float64(time.Millisecond)
	}
	// The first round also made the snapshot's lower (layered on ext4).
	b.ReportMetric(float64(forks[0])/float64(time.Millisecond), "first-fork10-ms")
	c, f := p50(cold), p50(forks)
	b.ReportMetric(c, "cold-ms")
	b.ReportMetric(f, "fork10-ms")
	b.ReportMetric(f/c, "fork10/cold")
}
