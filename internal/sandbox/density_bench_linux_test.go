package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/initbin"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
)

// BenchmarkIdleMemory creates b.N idle sandboxes (lean init from a sealed
// memfd, the default 5 GB workspace, no pool) and keeps them, then reports
// what they added per sandbox: the /proc/meminfo fields that kernel objects
// and the inits land in, the inits' own Pss_Anon, and the slab caches that
// grew most (logged). MemAvailable is noisy on a shared host; the fields
// are the sandboxes' own.
//
//	go test -run '^$' -bench IdleMemory -benchtime 100x ./internal/sandbox/
func BenchmarkIdleMemory(b *testing.B) {
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
	defer func() { _ = f.Close() }()
	cfg := Config{
		DataDir:  b.TempDir(),
		Max:      Limits{MemoryBytes: 1 << 30, Pids: 100, CPUTime: 30 * time.Second, CPUMilli: 2000, DiskBytes: 5_000_000_000},
		Default:  Limits{MemoryBytes: 1 << 30, Pids: 50, CPUTime: 30 * time.Second, DiskBytes: 5_000_000_000},
		TmpBytes: 64 << 20, InitFile: f, MaxPerOwner: 0,
	}
	cg, err := cgroup.New(fmt.Sprintf("sb%d-bench-idle", os.Getpid()))
	if err != nil {
		b.Skip(err)
	}
	m, err := New(context.Background(), cfg, &memRecords{}, nil, cg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	// The template is built before the measurement.
	if info, err := m.Create(ctx, owner, Spec{}); err != nil {
		b.Fatal(err)
	} else if err := m.Delete(ctx, owner, info.ID); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second)
	fields := []string{"MemAvailable", "AnonPages", "Shmem", "Buffers", "Slab", "SReclaimable", "SUnreclaim", "PageTables", "KernelStack", "Percpu"}
	before := meminfo(b, fields)
	slabBefore := slabBytes(b)
	b.ResetTimer()
	var sbs []*Sandbox
	for range b.N {
		info, err := m.Create(ctx, owner, Spec{})
		if err != nil {
			b.Fatal(err)
		}
		s, _ := m.Get(owner, info.ID)
		sbs = append(sbs, s)
	}
	b.StopTimer()
	time.Sleep(2 * time.Second) // the inits settle (awake: the idle release comes 3-6 s after the last call)
	after := meminfo(b, fields)
	slabAfter := slabBytes(b)
	n := float64(b.N)
	for _, fl := range fields {
		d := after[fl] - before[fl]
		if fl == "MemAvailable" {
			d = -d
		}
		b.ReportMetric(float64(d)/n, "KB-"+fl+"/sb")
	}
	var pss int64
	for _, s := range sbs {
		s.mu.Lock()
		pid := s.inst.Pid
		s.mu.Unlock()
		pss += rollupKB(b, pid, "Pss_Anon")
	}
	b.ReportMetric(float64(pss)/n, "KB-init-Pss_Anon/sb")
	type grow struct {
		name string
		d    int64
	}
	var gs []grow
	for k, v := range slabAfter {
		if d := v - slabBefore[k]; d > 0 {
			gs = append(gs, grow{k, d})
		}
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].d > gs[j].d })
	var sb strings.Builder
	for i, g := range gs {
		if i == 15 {
			break
		}
		fmt.Fprintf(&sb, "%s %.1f KB/sb; ", g.name, float64(g.d)/1024/n)
	}
	b.Log("slab growth per sandbox: ", sb.String())

	// The same sandboxes asleep: the inits exec their keepers after the
	// quiet period (internal/agent/sandboxinit/sleep_linux.go).
	deadline := time.Now().Add(90 * time.Second)
	for {
		asleep := 0
		for _, s := range sbs {
			s.mu.Lock()
			pid := s.inst.Pid
			s.mu.Unlock()
			if c, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); err == nil && strings.TrimSpace(string(c)) == "sandhold-keeper" {
				asleep++
			}
		}
		if asleep == len(sbs) {
			break
		}
		if time.Now().After(deadline) {
			b.Logf("only %d of %d inits asleep after 90 s; no asleep figures", asleep, len(sbs))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	after = meminfo(b, fields)
	for _, fl := range fields {
		d := after[fl] - before[fl]
		if fl == "MemAvailable" {
			d = -d
		}
		b.ReportMetric(float64(d)/n, "KB-asleep-"+fl+"/sb")
	}
	pss = 0
	for _, s := range sbs {
		s.mu.Lock()
		pid := s.inst.Pid
		s.mu.Unlock()
		pss += rollupKB(b, pid, "Pss_Anon")
	}
	b.ReportMetric(float64(pss)/n, "KB-asleep-init-Pss_Anon/sb")
}

func meminfo(b *testing.B, fields []string) map[string]int64 {
	out := map[string]int64{}
	for _, f := range fields {
		out[f] = meminfoKB(b, f)
	}
	return out
}

// slabBytes is every slab cache's size (active objects × object size),
// from /proc/slabinfo.
func slabBytes(b *testing.B) map[string]int64 {
	raw, err := os.ReadFile("/proc/slabinfo")
	if err != nil {
		b.Skip("no /proc/slabinfo:", err)
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || strings.HasPrefix(f[0], "#") || f[0] == "slabinfo" {
			continue
		}
		num, _ := strconv.ParseInt(f[2], 10, 64)
		size, _ := strconv.ParseInt(f[3], 10, 64)
		out[f[0]] += num * size
	}
	return out
}

func rollupKB(b *testing.B, pid int, field string) int64 {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb
		}
	}
	return 0
}
