// Command bench measures sandhold against its peers in one run: a bare Go
// fork/exec of /bin/true, bubblewrap per command, and sandhold's exec
// round trip through the HTTP API into a live sandbox, sandbox creation
// cold (from a spare init and without one) and from the warm pool, sustained executions per second with 16
// concurrent clients — and prints the ratios. "bench density" creates many
// idle sandboxes and reports the memory they add and how creation latency
// changes.
//
// It starts the real server (the sandhold binary given by -server) on a
// loopback port with a temporary data dir, so the figures include
// everything a client sees.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	server  string
	json    bool
	n       int
	sustain time.Duration
	count   int
	xfs     bool
	// sleepOff: bench density also creates as many on a server with
	// the idle sleep off.
	sleepOff bool
}

func run(ctx context.Context, args []string) error {
	mode := "core"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.server, "server", "bin/sandhold", "sandhold binary to benchmark")
	fs.BoolVar(&o.json, "json", false, "print the figures as one JSON object")
	fs.IntVar(&o.n, "n", 300, "samples per latency figure")
	fs.DurationVar(&o.sustain, "sustain", 5*time.Second, "duration of the sustained-throughput run")
	fs.IntVar(&o.count, "count", 1000, "sandboxes for bench density")
	fs.BoolVar(&o.sleepOff, "sleep-off", true, "bench density: also create as many with the idle sleep off (a second server)")
	fs.BoolVar(&o.xfs, "xfs", false, "also run on an XFS file system with reflinks on a loop device (snapshots)")
	var lo loadOpts
	fs.IntVar(&lo.requests, "requests", 10000, "requests per load round (load, soak)")
	fs.IntVar(&lo.conc, "c", 64, "concurrent clients (load, soak)")
	fs.IntVar(&lo.keys, "keys", 8, "agent keys, one sandbox each (load, soak)")
	fs.IntVar(&lo.hot, "hot", 16, "of the clients, those on the first key's sandbox (load, soak)")
	fs.DurationVar(&lo.settle, "settle", time.Minute, "wait after the load before measuring again (load, soak)")
	fs.DurationVar(&lo.duration, "duration", 30*time.Minute, "soak duration")
	var abBase string
	fs.StringVar(&abBase, "base", "", "the binary bench ab compares -server with")
	var dbURL string
	var creates int
	fs.StringVar(&dbURL, "database-url", "", "PostgreSQL for bench cluster (default: a throw-away server in a temp dir)")
	fs.IntVar(&creates, "creates", 30, "sandboxes created through the 3 nodes (cluster)")
	bo := browserOpts{}
	fs.IntVar(&bo.starts, "starts", 5, "cold starts per side (browser)")
	fs.IntVar(&bo.rounds, "rounds", 30, "navigate+screenshot round trips per side (browser)")
	fs.IntVar(&bo.pids, "browser-pids", 256, "the browser sandboxes' limits.pids; 160 or more runs Chromium multi-process, like the host peer (browser)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch mode {
	case "core":
		return core(ctx, o)
	case "density":
		return density(ctx, o)
	case "cluster":
		return clusterBench(ctx, o, dbURL, creates)
	case "files":
		return files(ctx, o)
	case "load":
		return loadBench(ctx, o, lo)
	case "soak":
		return soak(ctx, o, lo)
	case "browser":
		return browserBench(ctx, o, bo)
	case "templates":
		return templatesBench(ctx, o)
	case "snapshots":
		return snapshotsBench(ctx, o)
	case "ab":
		return abBench(ctx, o, abBase)
	}
	return fmt.Errorf("unknown benchmark %q (core, ab, density, files, load, soak, cluster, browser, templates, snapshots)", mode)
}

// latency holds samples of one figure.
type latency []time.Duration

func (l latency) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := append(latency(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p / 100 * float64(len(s)-1))
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type figure struct {
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	N     int     `json:"n"`
}

func fig(l latency) figure { return figure{P50ms: ms(l.pct(50)), P99ms: ms(l.pct(99)), N: len(l)} }

func sample(n int, f func() error) (latency, error) {
	out := make(latency, 0, n)
	for range n {
		start := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// server is a sandhold started for the benchmark.
type server struct {
	cmd  *exec.Cmd
	base string
	key  string
	dir  string
	c    *http.Client
}

func startServer(ctx context.Context, bin string, pool int, env ...string) (*server, error) {
	dir, err := os.MkdirTemp("", "sandhold-bench-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	key := "shk_" + strings.Repeat("b", 43)
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", addr, "--data-dir", dir) //nolint:gosec // G204: the binary under test, named by the operator
	cmd.Env = append(os.Environ(),
		"SANDBOX_API_KEY="+key,
		"SANDBOX_WARM_POOL="+strconv.Itoa(pool),
		"SANDBOX_RATE_LIMIT=false",
		"SANDBOX_LOG_LEVEL=error",
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{cmd: cmd, base: "http://" + addr, key: key, dir: dir, c: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
		Timeout:   2 * time.Minute,
	}}
	for range 300 {
		if resp, err := s.c.Get(s.base + "/healthz"); err == nil {
			_ = resp.Body.Close()
			return s, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.stop()
	return nil, errors.New("server did not come up")
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(s.dir)
}

func (s *server) call(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return err
	}
	return json.Unmarshal(env.Data, out)
}

func (s *server) create() (string, error) {
	var sb struct {
		ID string `json:"id"`
	}
	err := s.call("POST", "/v1/sandboxes", map[string]any{}, &sb)
	return sb.ID, err
}

func (s *server) exec(id string) error {
	var r struct {
		ExitCode *int   `json:"exit_code"`
		Status   string `json:"status"`
	}
	if err := s.call("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"argv": []string{"/bin/true"}}, &r); err != nil {
		return err
	}
	if r.Status != "completed" || r.ExitCode == nil || *r.ExitCode != 0 {
		return fmt.Errorf("exec: status %s", r.Status)
	}
	return nil
}

func (s *server) delete(id string) error { return s.call("DELETE", "/v1/sandboxes/"+id, nil, nil) }

// spareCounts is the server's spare inits (GET /v1/sandbox/security,
// pool.spares): ready of target, and the cold creates that bound one or
// found none ready since the server started.
type spareCounts struct {
	Ready  int   `json:"ready"`
	Target int   `json:"target"`
	Taken  int64 `json:"taken"`
	Missed int64 `json:"missed"`
}

func (s *server) spares() (spareCounts, error) {
	var sec struct {
		Pool struct {
			Spares spareCounts `json:"spares"`
		} `json:"pool"`
	}
	err := s.call("GET", "/v1/sandbox/security", nil, &sec)
	return sec.Pool.Spares, err
}

// poolReady waits until a sandbox can be taken from the warm pool, by
// watching the server's count of ready pool sandboxes.
func (s *server) poolReady(want int) {
	for range 500 {
		var sec struct {
			Pool struct {
				Ready int `json:"ready"`
			} `json:"pool"`
		}
		if s.call("GET", "/v1/sandbox/security", nil, &sec) == nil && sec.Pool.Ready >= want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type coreResult struct {
	BareForkExec figure  `json:"bare_fork_exec"`
	Bwrap        *figure `json:"bwrap,omitempty"`
	ExecRTT      figure  `json:"exec_rtt"`
	// CreateCold is a cold create (no warm pool) and its first exec
	// with no spare init (SANDBOX_SPARE_INITS=0), CreateColdSpare the
	// same with spares (SANDBOX_SPARE_INITS=2, the default); both
	// alternate in one loop with a bwrap command (BwrapAlternated).
	CreateCold      figure  `json:"create_cold_first_exec"`
	CreateColdSpare figure  `json:"create_cold_spare_init_first_exec"`
	BwrapAlternated *figure `json:"bwrap_alternated_with_cold_creates,omitempty"`
	// SparesBound and SparesMissed are how many of the cold (spare
	// init) creates bound a spare and how many found none ready (the
	// server's own count, pool.spares of /v1/sandbox/security).
	SparesBound    int64   `json:"cold_spare_creates_bound_a_spare"`
	SparesMissed   int64   `json:"cold_spare_creates_found_none_ready"`
	CreateWarm     figure  `json:"create_warm_first_exec"`
	CreateWarmOnly figure  `json:"create_warm"`
	ExecPerSecond  float64 `json:"exec_per_second_16_clients"`
	// BarePerSecond is bare fork/exec of /bin/true by 16 goroutines for
	// as long as the sustained run, in the same process tree.
	BarePerSecond float64 `json:"bare_fork_exec_per_second_16_goroutines"`
	// Interleaved is the exec round trip and the bare fork/exec measured
	// alternately in one loop (the figures above are measured one after
	// the other, each in its own loop).
	Interleaved struct {
		BareForkExec     figure  `json:"bare_fork_exec"`
		Fdatasync        figure  `json:"fdatasync_4k"`
		Floor            figure  `json:"floor"`
		ExecRTT          figure  `json:"exec_rtt"`
		ExecRTTOverBare  float64 `json:"exec_rtt_over_bare_fork_exec"`
		ExecRTTOverFloor float64 `json:"exec_rtt_over_floor"`
	} `json:"interleaved"`
	// AIO is AIO's shell/exec in a reused session beside native exec,
	// alternated in one loop (aio.go).
	AIO struct {
		NativeExec figure `json:"native_exec"`
		ShellExec  figure `json:"shell_exec_session_reused"`
	} `json:"aio"`
	// E2B is E2B's commands.run beside native exec, alternated in one
	// loop on one sandbox made through E2B's API (e2b.go).
	E2B struct {
		NativeExec  figure `json:"native_exec"`
		CommandsRun figure `json:"commands_run"`
	} `json:"e2b"`
	// Fdatasync is one 4 KB write + fdatasync of a file in the server's
	// data dir; Floor is a bare fork/exec followed by that write, timed
	// as one (floor.go).
	Fdatasync  figure `json:"fdatasync_4k"`
	Floor      figure `json:"floor"`
	LoadBefore string `json:"load_average_before"`
	LoadAfter  string `json:"load_average_after"`
	Ratios     struct {
		ExecRTTOverBare float64 `json:"exec_rtt_over_bare_fork_exec"`
		// ExecRTTOverFloor is the exec round trip over the floor (bare
		// fork/exec + one 4 KB fdatasync; goal <= 1.3).
		ExecRTTOverFloor float64  `json:"exec_rtt_over_floor"`
		BwrapOverExecRTT *float64 `json:"bwrap_over_exec_rtt,omitempty"`
		// SustainedOverBare is exec/s of 16 clients over bare fork/exec/s
		// of 16 goroutines (goal >= 0.5).
		SustainedOverBare float64 `json:"sustained_exec_over_bare_fork_exec"`
		// ColdCreateOverBwrap is a cold create plus its first exec over
		// one bwrap command, ColdSpareCreateOverBwrap the same from a
		// spare init (goal <= 2), both against bwrap alternated with them.
		ColdCreateOverBwrap      *float64 `json:"cold_create_first_exec_over_bwrap,omitempty"`
		ColdSpareCreateOverBwrap *float64 `json:"cold_create_spare_init_first_exec_over_bwrap,omitempty"`
		// AIOShellOverExec is AIO's shell/exec over native exec, both
		// from the alternating loop (goal <= 1.2).
		AIOShellOverExec float64 `json:"aio_shell_exec_over_exec"`
		// E2BRunOverExec is E2B's commands.run over native exec (goal
		// <= 1.2).
		E2BRunOverExec float64 `json:"e2b_commands_run_over_exec"`
	} `json:"ratios"`
}

func core(ctx context.Context, o options) error {
	var res coreResult
	res.LoadBefore = loadAvg()
	bare, err := sample(o.n, func() error { return exec.Command("/bin/true").Run() })
	if err != nil {
		return fmt.Errorf("bare fork/exec: %w", err)
	}
	res.BareForkExec = fig(bare)
	if bw, err := exec.LookPath("bwrap"); err == nil {
		l, err := sample(o.n/3, func() error {
			return exec.Command(bw, "--unshare-all", "--ro-bind", "/", "/", "true").Run()
		})
		if err != nil {
			return fmt.Errorf("bwrap: %w", err)
		}
		f := fig(l)
		res.Bwrap = &f
	} else {
		fmt.Fprintln(os.Stderr, "bench: bwrap not installed; `make bench` installs bubblewrap")
	}

	// Exec round trip and throughput, with a warm pool as shipped. Every
	// sandbox gets the default 5 GB workspace quota; the images are sparse,
	// so the disk budget (derived from the host's free space, about five
	// workspaces on a small disk) is lifted as in bench density: otherwise
	// the pool cannot refill once the bench holds four sandboxes.
	srv, err := startServer(ctx, o.server, 2, "SANDBOX_DISK_BUDGET=100TB")
	if err != nil {
		return err
	}
	defer srv.stop()
	// The floor's durable write goes to the server's data dir: the same
	// file system and disk as its store.
	fs, err := newSyncer(srv.dir)
	if err != nil {
		return err
	}
	defer fs.close()
	id, err := srv.create()
	if err != nil {
		return err
	}
	for range 20 { // warm the connection and the execution groups
		if err := srv.exec(id); err != nil {
			return err
		}
	}
	rtt, err := sample(o.n, func() error { return srv.exec(id) })
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	res.ExecRTT = fig(rtt)
	// The floor, in its own loop like the figures above.
	syncs, err := sample(o.n, fs.sync)
	if err != nil {
		return err
	}
	res.Fdatasync = fig(syncs)
	floor, err := sample(o.n, fs.floorOp)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	res.Floor = fig(floor)
	// The same again, alternating one bare fork/exec, one 4 KB
	// fdatasync and one exec in a single loop, so drift in the machine
	// (other load, the pool's refill after the take above) falls on all
	// alike. The floor's sample is the fork/exec and the sync together.
	var ib, is, ifl, ie latency
	for range o.n {
		b, err := sample(1, func() error { return exec.Command("/bin/true").Run() })
		if err != nil {
			return fmt.Errorf("bare fork/exec: %w", err)
		}
		y, err := sample(1, fs.sync)
		if err != nil {
			return err
		}
		e, err := sample(1, func() error { return srv.exec(id) })
		if err != nil {
			return fmt.Errorf("exec: %w", err)
		}
		ib, is, ifl, ie = append(ib, b...), append(is, y...), append(ifl, b[0]+y[0]), append(ie, e...)
	}
	res.Interleaved.BareForkExec, res.Interleaved.Fdatasync, res.Interleaved.Floor, res.Interleaved.ExecRTT = fig(ib), fig(is), fig(ifl), fig(ie)
	res.Interleaved.ExecRTTOverBare = res.Interleaved.ExecRTT.P50ms / res.Interleaved.BareForkExec.P50ms
	res.Interleaved.ExecRTTOverFloor = res.Interleaved.ExecRTT.P50ms / res.Interleaved.Floor.P50ms

	// The bare side of the sustained ratio, measured right before the
	// sandhold side so both see the same machine.
	res.BarePerSecond, err = sustained(16, o.sustain, func(int) error { return exec.Command("/bin/true").Run() })
	if err != nil {
		return fmt.Errorf("sustained bare fork/exec: %w", err)
	}

	// Sustained: 16 clients on 4 sandboxes (16 concurrent executions per
	// sandbox is the default cap, so spread them).
	ids := []string{id}
	for range 3 {
		x, err := srv.create()
		if err != nil {
			return err
		}
		ids = append(ids, x)
	}
	res.ExecPerSecond, err = sustained(16, o.sustain, func(i int) error { return srv.exec(ids[i%len(ids)]) })
	if err != nil {
		return fmt.Errorf("sustained exec: %w", err)
	}

	res.AIO.NativeExec, res.AIO.ShellExec, err = aioShellVsExec(srv, id, o.n/3)
	if err != nil {
		return fmt.Errorf("aio shell/exec: %w", err)
	}
	res.Ratios.AIOShellOverExec = res.AIO.ShellExec.P50ms / res.AIO.NativeExec.P50ms
	res.E2B.NativeExec, res.E2B.CommandsRun, err = e2bRunVsExec(ctx, srv, o.n/3)
	if err != nil {
		return fmt.Errorf("e2b commands.run: %w", err)
	}
	res.Ratios.E2BRunOverExec = res.E2B.CommandsRun.P50ms / res.E2B.NativeExec.P50ms

	// Warm create (+ first exec), waiting for the pool between samples.
	res.CreateWarmOnly, res.CreateWarm, err = creates(srv, o.n/10, true)
	if err != nil {
		return fmt.Errorf("warm create: %w", err)
	}
	srv.stop()

	// Cold creates on two servers at once, one with spare inits and one
	// without, alternated in one loop with a bwrap command, so drift in
	// the machine falls on all three alike.
	res.CreateColdSpare, res.CreateCold, res.BwrapAlternated, res.SparesBound, res.SparesMissed, err = coldCreates(ctx, o)
	if err != nil {
		return err
	}

	res.LoadAfter = loadAvg()
	res.Ratios.ExecRTTOverBare = res.ExecRTT.P50ms / res.BareForkExec.P50ms
	res.Ratios.ExecRTTOverFloor = res.ExecRTT.P50ms / res.Floor.P50ms
	if res.BarePerSecond > 0 {
		res.Ratios.SustainedOverBare = res.ExecPerSecond / res.BarePerSecond
	}
	if res.Bwrap != nil {
		r := res.Bwrap.P50ms / res.ExecRTT.P50ms
		res.Ratios.BwrapOverExecRTT = &r
	}
	if bw := res.BwrapAlternated; bw != nil {
		c := res.CreateCold.P50ms / bw.P50ms
		res.Ratios.ColdCreateOverBwrap = &c
		cs := res.CreateColdSpare.P50ms / bw.P50ms
		res.Ratios.ColdSpareCreateOverBwrap = &cs
	}
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	printCore(res)
	return nil
}

// sustained runs op from workers goroutines (op gets the worker's number)
// for d and returns completed operations per second; the first error ends
// the run.
func sustained(workers int, d time.Duration, op func(worker int) error) (float64, error) {
	var done atomic.Int64
	var failed atomic.Value
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := op(i); err != nil {
					failed.Store(err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return 0, err
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

// creates measures n sandbox creations: the create call alone, and create
// plus the first exec (what a client waits for before its first result).
// The delete after each sample is not measured.
func creates(srv *server, n int, fromPool bool) (createOnly, withExec figure, err error) {
	var only, first latency
	for range n {
		if fromPool {
			srv.poolReady(1)
		}
		t0 := time.Now()
		id, err := srv.create()
		if err != nil {
			return figure{}, figure{}, err
		}
		only = append(only, time.Since(t0))
		if err := srv.exec(id); err != nil {
			return figure{}, figure{}, err
		}
		first = append(first, time.Since(t0))
		if err := srv.delete(id); err != nil {
			return figure{}, figure{}, err
		}
	}
	return fig(only), fig(first), nil
}

// coldCreates starts two servers without a warm pool, one with spare
// inits (SANDBOX_SPARE_INITS=2) and one without (0), and alternates, o.n/10
// times: a create + first exec + delete on each, and one bwrap command
// (when bwrap is installed). bound and missed are how many of the spare
// server's creates bound a spare and how many found none ready.
func coldCreates(ctx context.Context, o options) (spare, none figure, bwrap *figure, bound, missed int64, err error) {
	fail := func(err error) (figure, figure, *figure, int64, int64, error) {
		return spare, none, nil, 0, 0, err
	}
	withSpares, err := startServer(ctx, o.server, 0, "SANDBOX_DISK_BUDGET=100TB", "SANDBOX_SPARE_INITS=2")
	if err != nil {
		return fail(err)
	}
	defer withSpares.stop()
	without, err := startServer(ctx, o.server, 0, "SANDBOX_DISK_BUDGET=100TB", "SANDBOX_SPARE_INITS=0")
	if err != nil {
		return fail(err)
	}
	defer without.stop()
	before, err := withSpares.spares()
	if err != nil {
		return fail(fmt.Errorf("spare count: %w", err))
	}
	bw, _ := exec.LookPath("bwrap")
	var ls, ln, lb latency
	for range max(o.n/10, 1) {
		_, s, err := creates(withSpares, 1, false)
		if err != nil {
			return fail(fmt.Errorf("cold create (spare init): %w", err))
		}
		_, n, err := creates(without, 1, false)
		if err != nil {
			return fail(fmt.Errorf("cold create (no spare): %w", err))
		}
		ls, ln = append(ls, time.Duration(s.P50ms*float64(time.Millisecond))), append(ln, time.Duration(n.P50ms*float64(time.Millisecond)))
		if bw != "" {
			b, err := sample(1, func() error { return exec.Command(bw, "--unshare-all", "--ro-bind", "/", "/", "true").Run() })
			if err != nil {
				return fail(fmt.Errorf("bwrap: %w", err))
			}
			lb = append(lb, b...)
		}
	}
	after, err := withSpares.spares()
	if err != nil {
		return fail(fmt.Errorf("spare count: %w", err))
	}
	if none, err := without.spares(); err != nil {
		return fail(fmt.Errorf("spare count: %w", err))
	} else if none.Taken != 0 || none.Target != 0 {
		return fail(fmt.Errorf("the server without spares reports %+v", none))
	}
	if len(lb) > 0 {
		f := fig(lb)
		bwrap = &f
	}
	return fig(ls), fig(ln), bwrap, after.Taken - before.Taken, after.Missed - before.Missed, nil
}

func printCore(r coreResult) {
	row := func(name string, f figure) {
		fmt.Printf("%-42s p50 %8.2f ms   p99 %8.2f ms   (n=%d)\n", name, f.P50ms, f.P99ms, f.N)
	}
	fmt.Printf("load average before %s, after %s\n", r.LoadBefore, r.LoadAfter)
	row("bare Go fork/exec /bin/true", r.BareForkExec)
	if r.Bwrap != nil {
		row("bwrap --unshare-all --ro-bind / / true", *r.Bwrap)
	}
	row("4 KB write + fdatasync in the data dir", r.Fdatasync)
	row("floor: bare fork/exec + that fdatasync", r.Floor)
	row("sandhold exec RTT (HTTP, live sandbox)", r.ExecRTT)
	row("AIO shell/exec, session reused", r.AIO.ShellExec)
	row("  native exec, alternated with it", r.AIO.NativeExec)
	row("E2B commands.run", r.E2B.CommandsRun)
	row("  native exec, alternated with it", r.E2B.NativeExec)
	row("sandhold create, cold (spare init) (+ first exec)", r.CreateColdSpare)
	fmt.Printf("  of them %d bound a spare, %d found none ready (the server's count)\n", r.SparesBound, r.SparesMissed)
	row("sandhold create, cold (no spare) (+ first exec)", r.CreateCold)
	if r.BwrapAlternated != nil {
		row("  bwrap, alternated with them", *r.BwrapAlternated)
	}
	row("sandhold create, warm pool", r.CreateWarmOnly)
	row("sandhold create, warm pool (+ first exec)", r.CreateWarm)
	fmt.Printf("%-42s %8.0f exec/s\n", "sustained, 16 concurrent clients", r.ExecPerSecond)
	fmt.Printf("%-42s %8.0f exec/s\n", "bare fork/exec, 16 goroutines", r.BarePerSecond)
	fmt.Printf("\nratio exec RTT / floor (p50):               %.2fx   (target <= 1.3x)\n", r.Ratios.ExecRTTOverFloor)
	fmt.Printf("  the same, alternating in one loop:        %.2fx   (%.2f / %.2f ms = %.2f fork/exec + %.2f fdatasync)\n",
		r.Interleaved.ExecRTTOverFloor, r.Interleaved.ExecRTT.P50ms, r.Interleaved.Floor.P50ms, r.Interleaved.BareForkExec.P50ms, r.Interleaved.Fdatasync.P50ms)
	fmt.Printf("ratio exec RTT / bare fork/exec (p50):      %.2fx\n", r.Ratios.ExecRTTOverBare)
	fmt.Printf("  the same, alternating in one loop:        %.2fx\n", r.Interleaved.ExecRTTOverBare)
	if r.Ratios.BwrapOverExecRTT != nil {
		fmt.Printf("ratio bwrap / exec RTT (p50):               %.2fx   (target >= 4x)\n", *r.Ratios.BwrapOverExecRTT)
	}
	fmt.Printf("ratio sustained exec/s / bare fork/exec/s:  %.2fx   (target >= 0.5x)\n", r.Ratios.SustainedOverBare)
	if r.Ratios.ColdCreateOverBwrap != nil {
		fmt.Printf("ratio cold (spare init) + first exec / bwrap: %.2fx   (target <= 2x)\n", *r.Ratios.ColdSpareCreateOverBwrap)
		fmt.Printf("ratio cold (no spare) + first exec / bwrap:   %.2fx\n", *r.Ratios.ColdCreateOverBwrap)
	}
	fmt.Printf("ratio AIO shell/exec / native exec (p50):   %.2fx   (target <= 1.2x)\n", r.Ratios.AIOShellOverExec)
	fmt.Printf("ratio E2B commands.run / native exec (p50): %.2fx   (target <= 1.2x)\n", r.Ratios.E2BRunOverExec)
}

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
