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
