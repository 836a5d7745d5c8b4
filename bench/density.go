package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// density creates many idle sandboxes and reports the memory they add
// (MemAvailable before the server starts and after: every process, the
// server's own and its spare inits', page cache of the tmpfs roots and
// kernel objects included) and create latency at the
// first and the last. A second server then makes as many with the idle
// sleep off (SANDBOX_IDLE_SLEEP=0), so creation is measured also without
// the first sandboxes going to sleep (≈4 ms of CPU each) on the same CPUs
// while the last are made.
func density(ctx context.Context, o options) error {
	loadBefore := loadAvg()
	run, err := createMany(ctx, o, true)
	if err != nil {
		return err
	}
	var held manyRun
	if o.sleepOff {
		// Give the kernel a moment to finish tearing down the first
		// run's namespaces and mounts before the second starts.
		settle(30 * time.Second)
		if held, err = createMany(ctx, o, false); err != nil {
			return err
		}
	}
	out := map[string]any{
		"sandboxes":              o.count,
		"added_memory_mb":        run.added >> 20,
		"per_sandbox_kb":         run.added / int64(o.count) >> 10,
		"create_first10_ms":      run.first10,
		"create_last10_ms":       run.last10,
		"create_last_over_first": run.last10 / run.first10,
		"create_tenths_p50_ms":   run.tenths,
		"inits_asleep_by_tenth":  run.asleepByTenth,
		"added_memory_idle_mb":   run.addedIdle >> 20,
		"per_sandbox_idle_kb":    run.addedIdle / int64(o.count) >> 10,
		"inits_asleep":           run.keepers,
		"cgroup_kb_1_3_5_s":      kbs(run.cgroupAt),
		"cgroup_kb_asleep":       run.cgroupIdle >> 10,
		"init_anon_kb_1_3_5_s":   kbs(run.initsAt),
		"init_anon_kb_asleep":    run.initsIdle >> 10,
		"idle_wait_s":            run.waited.Seconds(),
		"last_tenth_over_first":  run.tenths[9] / run.tenths[0],
		"load_average_before":    loadBefore,
		"load_average_after":     loadAvg(),
	}
	if o.sleepOff {
		out["sleep_off"] = map[string]any{
			"create_first10_ms":      held.first10,
			"create_last10_ms":       held.last10,
			"create_last_over_first": held.last10 / held.first10,
			"create_tenths_p50_ms":   held.tenths,
			"last_tenth_over_first":  held.tenths[9] / held.tenths[0],
		}
	}
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(out)
	}
	n := int64(o.count)
	fmt.Printf("load average before %s, after %s\n", loadBefore, loadAvg())
	fmt.Printf("%d idle sandboxes, 1 s after the last create (inits awake): %d MB added (%d KB each; goal <= 1,500 MB for 1,000, 1.5 MB each)\n", o.count, run.added>>20, run.added/n>>10)
	fmt.Printf("%d idle sandboxes after %.0f s idle (%d of %d inits asleep in their keepers): %d MB added (%d KB each)\n",
		o.count, run.waited.Seconds(), run.keepers, o.count, run.addedIdle>>20, run.addedIdle/n>>10)
	fmt.Printf("cgroup memory per sandbox (mean; init and kernel objects), 1 / 3 / 5 s after the last create: %d KB (goal <= 1 MB within 5 s of the last call); asleep: %d KB\n",
		kbs(run.cgroupAt), run.cgroupIdle>>10)
	fmt.Printf("the inits' own anonymous memory per sandbox (Pss_Anon, wherever charged; spares included), 1 / 3 / 5 s after: %d KB; asleep: %d KB\n",
		kbs(run.initsAt), run.initsIdle>>10)
	fmt.Printf("create latency p50, first 10: %.2f ms; last 10: %.2f ms (last/first %.2fx; goal <= 1.2x)\n",
		run.first10, run.last10, run.last10/run.first10)
	fmt.Printf("create latency p50 per tenth of the run (ms): %.1f (last/first tenth %.2fx)\n", run.tenths, run.tenths[9]/run.tenths[0])
	fmt.Printf("inits asleep at the end of each tenth: %d\n", run.asleepByTenth)
	if !o.sleepOff {
		return nil
	}
	fmt.Printf("the same with the idle sleep off (SANDBOX_IDLE_SLEEP=0): first 10: %.2f ms; last 10: %.2f ms (last/first %.2fx)\n",
		held.first10, held.last10, held.last10/held.first10)
	fmt.Printf("  per tenth (ms): %.1f (last/first tenth %.2fx)\n", held.tenths, held.tenths[9]/held.tenths[0])
	return nil
}

// kbs is bytes in KB.
func kbs(b []int64) []int64 {
	out := make([]int64, len(b))
	for i, v := range b {
		out[i] = v >> 10
	}
	return out
}

// manyRun is what createMany measured.
type manyRun struct {
	first10, last10 float64   // ms, p50
	tenths          []float64 // ms, p50 of each tenth
	asleepByTenth   []int     // inits asleep when each tenth ended
	added           int64     // bytes, 1 s after the last create
	addedIdle       int64     // bytes, once the inits slept (withSleep)
	keepers         int
	waited          time.Duration
	// cgroupAt is the sandboxes' cgroup memory, mean per sandbox in
	// bytes, 1, 3 and 5 s after the last create; cgroupIdle the same
	// once the inits slept (withSleep).
	cgroupAt   []int64
	cgroupIdle int64
	// initsAt and initsIdle are the server's inits' anonymous memory
	// (initsAnon) per sandbox at the same times.
	initsAt   []int64
	initsIdle int64
}

// cgroupMemory is the mean of the sandboxes' cgroup memory (GET
// /v1/sandbox/resources: v1 memory.usage_in_bytes, v2 memory.current of
// each sandbox's group, its init and kernel objects included), in bytes.
func (s *server) cgroupMemory() (int64, error) {
	var rows []struct {
		Cgroup struct {
			MemoryBytes int64
		} `json:"cgroup"`
	}
	if err := s.call("GET", "/v1/sandbox/resources", nil, &rows); err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		return 0, errors.New("no sandboxes in /v1/sandbox/resources")
	}
	var sum int64
	for _, r := range rows {
		sum += r.Cgroup.MemoryBytes
	}
	return sum / int64(len(rows)), nil
}

// createMany starts a server (with the idle sleep at its default, or
// off), creates o.count sandboxes one after another and measures; with
// the sleep it then waits for the inits to sleep and measures memory
// again. The server is stopped before it returns.
func createMany(ctx context.Context, o options, withSleep bool) (manyRun, error) {
	var r manyRun
	// Every sandbox gets the default 5 GB workspace quota, as in use; the
	// images are sparse (≈100 KB on disk each), so the budget that keeps a
	// host from promising more than its free space is lifted for the run.
	env := []string{"SANDBOX_DISK_BUDGET=100TB"}
	if !withSleep {
		env = append(env, "SANDBOX_IDLE_SLEEP=0")
	}
	// Measured before the server starts, so the figure counts what the
	// server holds for its sandboxes beyond them: its spare inits
	// (SANDBOX_SPARE_INITS, cloned at start) and its own memory.
	before, err := memAvailable()
	if err != nil {
		return r, err
	}
	srv, err := startServer(ctx, o.server, 0, env...)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	var lat latency
	for i := range o.count {
		t0 := time.Now()
		if _, err := srv.create(); err != nil {
			return r, fmt.Errorf("sandbox #%d: %w", i+1, err)
		}
		lat = append(lat, time.Since(t0))
		if withSleep && (i+1)%max(o.count/10, 1) == 0 && len(r.asleepByTenth) < 10 {
			r.asleepByTenth = append(r.asleepByTenth, countProcs("sandhold-keeper"))
		}
	}
	last := time.Now()
	time.Sleep(time.Second)
	after, err := memAvailable()
	if err != nil {
		return r, err
	}
	r.added = before - after
	// The sandboxes' own memory as their cgroups count it (init, its
	// kernel objects, its tmpfs pages), mean per sandbox, 1, 3 and 5 s
	// after the last create.
	for _, at := range []time.Duration{time.Second, 3 * time.Second, 5 * time.Second} {
		time.Sleep(time.Until(last.Add(at)))
		m, err := srv.cgroupMemory()
		if err != nil {
			return r, err
		}
		r.cgroupAt = append(r.cgroupAt, m)
		r.initsAt = append(r.initsAt, srv.initsAnon()/int64(o.count))
	}
	r.first10 = ms(lat[:min(10, len(lat))].pct(50))
	r.last10 = ms(lat[max(0, len(lat)-10):].pct(50))
	// p50 of each tenth of the run, to see where creation starts to grow.
	for i := range 10 {
		part := lat[i*len(lat)/10 : (i+1)*len(lat)/10]
		r.tenths = append(r.tenths, ms(part.pct(50)))
	}
	if !withSleep {
		return r, nil
	}
	// Then the same sandboxes once idle: their inits return free memory
	// after a few seconds and sleep in their keepers after the quiet
	// period (internal/agent/sandboxinit/sleep_linux.go).
	asleep, keepers, waited := idleFigure(o.count, 90*time.Second)
	afterIdle, err := memAvailable()
	if err != nil {
		return r, err
	}
	r.addedIdle, r.keepers, r.waited = before-afterIdle, keepers, waited
	if r.cgroupIdle, err = srv.cgroupMemory(); err != nil {
		return r, err
	}
	r.initsIdle = srv.initsAnon() / int64(o.count)
	if !asleep {
		fmt.Fprintf(os.Stderr, "only %d of %d inits slept within the wait\n", keepers, o.count)
	}
	return r, nil
}

// settle waits until no sandbox init or keeper is left on the host and
// the 1-minute load average is below 1.5, or limit passes.
func settle(limit time.Duration) {
	t0 := time.Now()
	for time.Since(t0) < limit {
		if countProcs("sandhold-init")+countProcs("sandhold-keeper") == 0 && load1() < 1.5 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// load1 is the 1-minute load average (0 if unknown).
func load1() float64 {
	f := strings.Fields(loadAvg())
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// idleFigure waits until want sandbox inits sleep in their keepers
// (process name sandhold-keeper in the host's /proc) or limit passes, then
// waits a second more, and returns whether all slept, how many did and
// how long it waited.
func idleFigure(want int, limit time.Duration) (bool, int, time.Duration) {
	t0 := time.Now()
	n := 0
	for time.Since(t0) < limit {
		if n = countProcs("sandhold-keeper"); n >= want {
			break
		}
		if n == 0 && time.Since(t0) > limit/2 {
			break // a server whose inits do not sleep
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	return n >= want, n, time.Since(t0)
}

// initsAnon is the anonymous memory (Pss_Anon of /proc/<pid>/smaps_rollup)
// of every sandbox init of the server, awake or asleep, its spare inits
// included: the inits' own memory wherever it is charged (what an init
// touched before it was placed in its sandbox's cgroup is the server's
// group's). An init is a process named sandhold-init* or sandhold-keeper
// whose parent or grandparent (the launcher) is the server.
func (s *server) initsAnon() int64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	srv := s.cmd.Process.Pid
	var sum int64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if c := strings.TrimSpace(string(b)); err != nil || !strings.HasPrefix(c, "sandhold-init") && c != "sandhold-keeper" {
			continue
		}
		if p := ppid(pid); p != srv && ppid(p) != srv {
			continue
		}
		if b, err = os.ReadFile("/proc/" + e.Name() + "/smaps_rollup"); err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss_Anon:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				sum += kb << 10
			}
		}
	}
	return sum
}

// ppid is pid's parent (0 if unknown).
func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			p, _ := strconv.Atoi(strings.TrimSpace(v))
			return p
		}
	}
	return 0
}

// countProcs counts the host's processes named name (/proc/*/comm).
func countProcs(name string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err == nil && strings.TrimSpace(string(b)) == name {
			n++
		}
	}
	return n
}

func memAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no MemAvailable in /proc/meminfo")
}
