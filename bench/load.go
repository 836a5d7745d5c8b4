package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// "bench load" sends N mixed requests (exec, AIO shell/exec without a
// session id, file write, read, list) at concurrency C across K keys, one
// sandbox per key, with -hot of the C workers on the first key's sandbox
// (agents fan out 8-16 calls on one sandbox). It prints the answers per
// status class, p50/p99 per operation, the server's RSS and goroutines
// before, right after and -settle after the load, and the audit chain's
// verification. "bench soak" repeats such rounds for -duration and reports
// the drift of RSS and goroutines from the first round's settled figures.

// loadOpts are the load and soak knobs.
type loadOpts struct {
	requests, conc, keys, hot int
	settle, duration          time.Duration
}

// op is one kind of request of the mix.
type op struct {
	name string
	call func(c *loadClient, sb string, i int) (int, error)
}

var ops = []op{
	{"exec", func(c *loadClient, sb string, i int) (int, error) {
		return c.post("/v1/sandboxes/"+sb+"/exec", map[string]any{"command": "echo " + strconv.Itoa(i)})
	}},
	{"shell_exec", func(c *loadClient, sb string, i int) (int, error) {
		return c.post("/sandboxes/"+sb+"/v1/shell/exec", map[string]any{"command": "echo " + strconv.Itoa(i)})
	}},
	{"file_write", func(c *loadClient, sb string, i int) (int, error) {
		return c.post("/sandboxes/"+sb+"/v1/file/write", map[string]any{"file": fmt.Sprintf("/workspace/f%d.txt", i%32), "content": strings.Repeat("x", 512)})
	}}, // ops[2]: setupKeys seeds the files with it
	{"file_read", func(c *loadClient, sb string, i int) (int, error) {
		return c.post("/sandboxes/"+sb+"/v1/file/read", map[string]any{"file": fmt.Sprintf("/workspace/f%d.txt", i%32)})
	}},
	{"file_list", func(c *loadClient, sb string, _ int) (int, error) {
		return c.post("/sandboxes/"+sb+"/v1/file/list", map[string]any{"path": "/workspace"})
	}},
}

type loadClient struct {
	s   *server
	key string
}

// post sends one request and reads the whole answer; a transport error is
// returned as such (status 0).
func (c *loadClient) post(path string, body any) (int, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", c.s.base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.s.c.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode >= 500 {
		return resp.StatusCode, fmt.Errorf("%s: %d %s", path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	return resp.StatusCode, nil
}

// roundResult is one load round.
type roundResult struct {
	Requests   int                    `json:"requests"`
	Classes    map[string]int         `json:"status_classes"`
	Transport  int                    `json:"transport_errors"`
	PerOp      map[string]figure      `json:"per_op"`
	FirstError string                 `json:"first_error,omitempty"`
	Seconds    float64                `json:"seconds"`
	Statuses   map[string]map[int]int `json:"statuses_per_op"`
}

// serverFigures are what /metrics says about the server process.
type serverFigures struct {
	RSSMB      float64 `json:"rss_mb"`
	Goroutines int     `json:"goroutines"`
}

func (s *server) figures() (serverFigures, error) {
	req, _ := http.NewRequest("GET", s.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := s.c.Do(req)
	if err != nil {
		return serverFigures{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var f serverFigures
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			f.Goroutines = int(n)
		}
		if v, ok := strings.CutPrefix(line, "process_resident_memory_bytes "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			f.RSSMB = n / (1 << 20)
		}
	}
	if f.Goroutines == 0 {
		return f, errors.New("metrics: no go_goroutines")
	}
	return f, sc.Err()
}

// setupKeys creates k agent keys, each with one sandbox.
func setupKeys(s *server, k int) ([]*loadClient, []string, error) {
	var clients []*loadClient
	var sbs []string
	for i := range k {
		var key struct {
			Key string `json:"key"`
		}
		if err := s.call("POST", "/v1/keys", map[string]any{"name": fmt.Sprintf("load%d", i), "role": "agent"}, &key); err != nil {
			return nil, nil, err
		}
		c := &loadClient{s: s, key: key.Key}
		var sb struct {
			ID string `json:"id"`
		}
		as := &server{base: s.base, key: key.Key, c: s.c}
		if err := as.call("POST", "/v1/sandboxes", map[string]any{}, &sb); err != nil {
			return nil, nil, err
		}
		// The files the reads ask for exist from the start.
		for f := range 32 {
			if _, err := ops[2].call(c, sb.ID, f); err != nil {
				return nil, nil, fmt.Errorf("seed files: %w", err)
			}
		}
		clients = append(clients, c)
		sbs = append(sbs, sb.ID)
	}
	return clients, sbs, nil
}

// round sends o.requests requests at o.conc; workers 0..hot-1 use the
// first key's sandbox, the others spread over the rest.
func round(clients []*loadClient, sbs []string, o loadOpts) roundResult {
	res := roundResult{Requests: o.requests, Classes: map[string]int{}, PerOp: map[string]figure{}, Statuses: map[string]map[int]int{}}
	var mu sync.Mutex
	lat := map[string]latency{}
	next := make(chan int)
	go func() {
		for i := range o.requests {
			next <- i
		}
		close(next)
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range o.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := 0
			if w >= o.hot && len(clients) > 1 {
				k = 1 + (w-o.hot)%(len(clients)-1)
			}
			for i := range next {
				op := ops[i%len(ops)]
				t0 := time.Now()
				code, err := op.call(clients[k], sbs[k], i)
				d := time.Since(t0)
				mu.Lock()
				lat[op.name] = append(lat[op.name], d)
				if res.Statuses[op.name] == nil {
					res.Statuses[op.name] = map[int]int{}
				}
				res.Statuses[op.name][code]++
				if code == 0 {
					res.Transport++
				} else {
					res.Classes[fmt.Sprintf("%dxx", code/100)]++
				}
				if err != nil && res.FirstError == "" {
					res.FirstError = err.Error()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	for name, l := range lat {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		res.PerOp[name] = fig(l)
	}
	return res
}

type loadResult struct {
	Load       string        `json:"load_average_before"`
	LoadAfter  string        `json:"load_average_after"`
	Round      roundResult   `json:"round"`
	Before     serverFigures `json:"before"`
	After      serverFigures `json:"right_after"`
	Settled    serverFigures `json:"settled"`
	SettleSecs float64       `json:"settle_seconds"`
	AuditOK    bool          `json:"audit_verified"`
	AuditOut   string        `json:"audit_verify"`
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func loadBench(ctx context.Context, o options, lo loadOpts) error {
	srv, err := startServer(ctx, o.server, 2)
	if err != nil {
		return err
	}
	defer srv.stop()
	clients, sbs, err := setupKeys(srv, lo.keys)
	if err != nil {
		return err
	}
	var res loadResult
	res.Load = loadAvg()
	// Warm-up: one of each operation per sandbox, then the baseline.
	for k := range clients {
		for i, op := range ops {
			if _, err := op.call(clients[k], sbs[k], i); err != nil {
				return fmt.Errorf("warm-up %s: %w", op.name, err)
			}
		}
	}
	time.Sleep(lo.settle)
	srv.c.CloseIdleConnections()
	if res.Before, err = srv.figures(); err != nil {
		return err
	}
	res.Round = round(clients, sbs, lo)
	if res.After, err = srv.figures(); err != nil {
		return err
	}
	time.Sleep(lo.settle)
	srv.c.CloseIdleConnections()
	if res.Settled, err = srv.figures(); err != nil {
		return err
	}
	res.SettleSecs = lo.settle.Seconds()
	res.LoadAfter = loadAvg()
	res.AuditOK, res.AuditOut = srv.auditVerify()
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	printLoad(res, lo)
	return nil
}

// auditVerify asks the server to verify the whole audit chain.
func (s *server) auditVerify() (bool, string) {
	var v struct {
		OK      bool   `json:"ok"`
		Records int64  `json:"records"`
		Problem string `json:"problem"`
	}
	if err := s.call("GET", "/v1/audit/verify", nil, &v); err != nil {
		return false, err.Error()
	}
	return v.OK, fmt.Sprintf("%d records %s", v.Records, v.Problem)
}

func printLoad(r loadResult, lo loadOpts) {
	fmt.Printf("load: %d requests, concurrency %d, %d keys, %d in flight on one sandbox; %.1f s (%.0f req/s)\n",
		r.Round.Requests, lo.conc, lo.keys, lo.hot, r.Round.Seconds, float64(r.Round.Requests)/r.Round.Seconds)
	fmt.Printf("load average before %s, after %s\n", r.Load, r.LoadAfter)
	classes := make([]string, 0, len(r.Round.Classes))
	for c := range r.Round.Classes {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, c := range classes {
		fmt.Printf("  %s: %d\n", c, r.Round.Classes[c])
	}
	fmt.Printf("  transport errors: %d\n", r.Round.Transport)
	if r.Round.FirstError != "" {
		fmt.Printf("  first error: %s\n", r.Round.FirstError)
	}
	names := make([]string, 0, len(r.Round.PerOp))
	for n := range r.Round.PerOp {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("%-12s %8s %8s %8s %6s  statuses\n", "op", "n", "p50 ms", "p99 ms", "p99/p50")
	for _, n := range names {
		f := r.Round.PerOp[n]
		fmt.Printf("%-12s %8d %8.2f %8.2f %6.1f  %v\n", n, f.N, f.P50ms, f.P99ms, f.P99ms/f.P50ms, r.Round.Statuses[n])
	}
	fmt.Printf("server: goroutines %d → %d → %d (%.0f s later), RSS %.0f → %.0f → %.0f MB\n",
		r.Before.Goroutines, r.After.Goroutines, r.Settled.Goroutines, r.SettleSecs, r.Before.RSSMB, r.After.RSSMB, r.Settled.RSSMB)
	fmt.Printf("settled vs baseline: goroutines %+.1f %%, RSS %+.1f %%\n",
		pctDiff(float64(r.Settled.Goroutines), float64(r.Before.Goroutines)), pctDiff(r.Settled.RSSMB, r.Before.RSSMB))
	fmt.Printf("audit verify: ok=%v %s\n", r.AuditOK, r.AuditOut)
}

func pctDiff(now, base float64) float64 {
	if base == 0 {
		return 0
	}
	return (now - base) / base * 100
}

// soak runs load rounds for lo.duration and prints, per round, the settled
// figures and their drift from the first round's.
func soak(ctx context.Context, o options, lo loadOpts) error {
	srv, err := startServer(ctx, o.server, 2)
	if err != nil {
		return err
	}
	defer srv.stop()
	clients, sbs, err := setupKeys(srv, lo.keys)
	if err != nil {
		return err
	}
	fmt.Printf("soak: rounds of %d requests at concurrency %d across %d keys (%d on one sandbox) for %s; load average %s\n",
		lo.requests, lo.conc, lo.keys, lo.hot, lo.duration, loadAvg())
	end := time.Now().Add(lo.duration)
	var first serverFigures
	totals := map[string]int{}
	transport := 0
	for n := 1; n == 1 || time.Now().Before(end); n++ {
		r := round(clients, sbs, lo)
		for c, v := range r.Classes {
			totals[c] += v
		}
		transport += r.Transport
		time.Sleep(lo.settle)
		srv.c.CloseIdleConnections()
		f, err := srv.figures()
		if err != nil {
			return err
		}
		if n == 1 {
			first = f
		}
		ex := r.PerOp["exec"]
		fmt.Printf("round %3d: %v transport %d, exec p50 %.2f p99 %.2f ms; settled goroutines %d (%+.1f %%), RSS %.0f MB (%+.1f %%); load %s\n",
			n, r.Classes, r.Transport, ex.P50ms, ex.P99ms, f.Goroutines, pctDiff(float64(f.Goroutines), float64(first.Goroutines)),
			f.RSSMB, pctDiff(f.RSSMB, first.RSSMB), loadAvg())
	}
	ok, out := srv.auditVerify()
	fmt.Printf("soak totals: %v, transport errors %d; audit verify ok=%v %s\n", totals, transport, ok, out)
	return nil
}
