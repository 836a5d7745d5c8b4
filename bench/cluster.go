package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// clusterResult is what "bench cluster" prints: three sandhold nodes on
// loopback ports sharing one PostgreSQL.
type clusterResult struct {
	ExecDirect     figure         `json:"exec_rtt_direct"`
	ExecForwarded  figure         `json:"exec_rtt_forwarded"`
	ForwardRatio   float64        `json:"exec_rtt_forwarded_over_direct_p50"`
	Creates        int            `json:"creates"`
	CreatesPerSec  float64        `json:"creates_per_second_3_nodes"`
	CreatesPlaced  map[string]int `json:"creates_placed"`
	AuditOne       figure         `json:"audit_append_1_node"`
	AuditThree     figure         `json:"audit_append_3_nodes_concurrent"`
	AuditThreeRate float64        `json:"audit_appends_per_second_3_nodes"`
	RevokeMs       []float64      `json:"revocation_refused_elsewhere_ms"`
	HaltMs         []float64      `json:"halt_frozen_elsewhere_ms"`
	LostMs         float64        `json:"killed_node_sandbox_lost_ms"`
	BackMs         float64        `json:"restarted_node_serves_again_ms"`
}

// clusterNode is one sandhold process of the benchmark's cluster.
type clusterNode struct {
	*server
	name string
}

// startClusterNode starts node name on data dir dir ("": a new one).
func startClusterNode(ctx context.Context, bin, name, dir, dbURL, key, secret string) (*clusterNode, error) {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "sandhold-bench-"+name+"-"); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", addr, "--data-dir", dir) //nolint:gosec // G204: the binary under test, named by the operator
	cmd.Env = append(os.Environ(),
		"SANDBOX_API_KEY="+key, "SANDBOX_DATABASE_URL="+dbURL, "SANDBOX_NODE_NAME="+name,
		"SANDBOX_CLUSTER_SECRET="+secret, "SANDBOX_WARM_POOL=0", "SANDBOX_RATE_LIMIT=false",
		"SANDBOX_LOG_LEVEL=error", "SANDBOX_MAX_SANDBOXES_PER_KEY=1000",
	)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{cmd: cmd, base: "http://" + addr, key: key, dir: dir, c: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 2 * time.Minute}}
	for range 1500 {
		if resp, err := s.c.Get(s.base + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return &clusterNode{server: s, name: name}, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("node %s did not come up", name)
}

// status returns only the status code of a call made with key.
func (s *server) status(method, path, key string, body any) int {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// waitFor polls f every millisecond and returns how long it took to be
// true (at most 30 s: the benchmark reports a failure, never hangs).
func waitFor(start time.Time, f func() bool) (time.Duration, error) {
	for !f() {
		if time.Since(start) > 30*time.Second {
			return 0, errors.New("not within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start), nil
}

func clusterBench(ctx context.Context, o options, dbURL string, creates int) error {
	var res clusterResult
	if dbURL == "" {
		bin, err := pgtest.FindBinDir()
		if err != nil {
			return err
		}
		pg, err := pgtest.Start(ctx, bin)
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer pg.Stop()
		if dbURL, err = pg.NewDatabase(ctx); err != nil {
			return err
		}
		auditURL, err := pg.NewDatabase(ctx)
		if err != nil {
			return err
		}
		if err := auditFigures(ctx, auditURL, o.n, &res); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	} else {
		fmt.Fprintln(os.Stderr, "bench: -database-url given: the audit append figures need a database of their own and are skipped")
	}

	key, secret := "shk_"+strings.Repeat("c", 43), strings.Repeat("s", 32)
	var nodes []*clusterNode
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		n, err := startClusterNode(ctx, o.server, name, "", dbURL, key, secret)
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	st, err := store.OpenPostgres(ctx, dbURL)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	if _, err := waitFor(time.Now(), func() bool { ns, _ := st.Nodes(ctx); return len(ns) == 3 }); err != nil {
		return fmt.Errorf("three nodes registered: %w", err)
	}
	a, b, c := nodes[0], nodes[1], nodes[2]

	// Creates through all three nodes at once (each is placed on the least
	// loaded node), then the exec round trip on a sandbox of node b:
	// through b itself, and through a, which forwards.
	res.Creates, res.CreatesPlaced = creates, map[string]int{}
	ids := make([]string, creates)
	errs := make([]error, creates)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range 6 {
		wg.Go(func() {
			for i := w; i < creates; i += 6 {
				ids[i], errs[i] = nodes[i%3].create()
			}
		})
	}
	wg.Wait()
	res.CreatesPerSec = float64(creates) / time.Since(t0).Seconds()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	onB := ""
	for _, id := range ids {
		n, err := st.SandboxNode(ctx, id)
		if err != nil {
			return err
		}
		res.CreatesPlaced[n]++
		if n == "node-b" && onB == "" {
			onB = id
		}
	}
	if onB == "" {
		return errors.New("no sandbox was placed on node-b")
	}
	for range 20 { // warm connections and execution groups on both paths
		if err := b.exec(onB); err != nil {
			return err
		}
		if err := a.exec(onB); err != nil {
			return err
		}
	}
	// Interleaved, so both paths see the same load on a shared machine.
	var direct, forwarded latency
	for range o.n {
		for _, p := range []struct {
			n   *clusterNode
			out *latency
		}{{b, &direct}, {a, &forwarded}} {
			t0 := time.Now()
			if err := p.n.exec(onB); err != nil {
				return err
			}
			*p.out = append(*p.out, time.Since(t0))
		}
	}
	res.ExecDirect, res.ExecForwarded = fig(direct), fig(forwarded)
	res.ForwardRatio = float64(forwarded.pct(50)) / float64(direct.pct(50))

	// Revocation on c, refused on a; HALT on b, sandboxes frozen on all.
	for range 5 {
		var k struct{ ID, Key string }
		if err := a.call("POST", "/v1/keys", map[string]string{"name": "bench", "role": "agent"}, &k); err != nil {
			return err
		}
		if st := a.status("GET", "/v1/sandboxes", k.Key, nil); st != http.StatusOK {
			return fmt.Errorf("new key on a: %d", st)
		}
		t0 := time.Now()
		if err := c.call("DELETE", "/v1/keys/"+k.ID, nil, nil); err != nil {
			return err
		}
		d, err := waitFor(t0, func() bool { return a.status("GET", "/v1/sandboxes", k.Key, nil) == http.StatusUnauthorized })
		if err != nil {
			return fmt.Errorf("revocation on c refused on a: %w", err)
		}
		res.RevokeMs = append(res.RevokeMs, ms(d))
	}
	var onA, onC string
	for _, id := range ids {
		switch n, _ := st.SandboxNode(ctx, id); n {
		case "node-a":
			onA = id
		case "node-c":
			onC = id
		}
	}
	for range 3 {
		t0 := time.Now()
		if err := b.call("POST", "/v1/control/halt", map[string]any{"reason": "bench"}, nil); err != nil {
			return err
		}
		var worst time.Duration
		for _, p := range []struct {
			n  *clusterNode
			id string
		}{{a, onA}, {c, onC}} {
			d, err := waitFor(t0, func() bool {
				var info struct{ State string }
				return p.n.call("GET", "/v1/sandboxes/"+p.id, nil, &info) == nil && info.State == "paused"
			})
			if err != nil {
				return fmt.Errorf("HALT on b froze %s: %w", p.n.name, err)
			}
			worst = max(worst, d)
		}
		res.HaltMs = append(res.HaltMs, ms(worst))
		if err := a.call("POST", "/v1/control/unhalt", nil, nil); err != nil {
			return err
		}
		if _, err := waitFor(time.Now(), func() bool { return b.exec(onB) == nil && c.exec(onC) == nil }); err != nil {
			return fmt.Errorf("unhalt: %w", err)
		}
	}
	for _, id := range ids {
		if id == onC {
			continue
		}
		if err := a.delete(id); err != nil {
			return err
		}
	}

	// c is killed (SIGKILL): how long until its sandbox is reported lost
	// through a; then c comes back on its data dir (reaping what the
	// killed run left) and serves the sandbox again.
	if err := c.cmd.Process.Kill(); err != nil {
		return err
	}
	_ = c.cmd.Wait()
	t0 = time.Now()
	d, err := waitFor(t0, func() bool {
		err := a.call("GET", "/v1/sandboxes/"+onC, nil, nil)
		return err != nil && strings.Contains(err.Error(), `"lost"`)
	})
	if err != nil {
		return fmt.Errorf("c's sandbox reported lost: %w", err)
	}
	res.LostMs = ms(d)
	t0 = time.Now()
	back, err := startClusterNode(ctx, o.server, "node-c", c.dir, dbURL, key, secret)
	if err != nil {
		return err
	}
	nodes[2] = back
	if _, err := waitFor(t0, func() bool { return a.exec(onC) == nil }); err != nil {
		return fmt.Errorf("c's sandbox after the restart: %w", err)
	}
	res.BackMs = ms(time.Since(t0))
	if err := a.delete(onC); err != nil {
		return err
	}
	return printCluster(o, res)
}

// auditFigures measures appends to the one audit chain: one appender,
// then three appenders at once, each with its own connection pool (as
// three nodes have).
func auditFigures(ctx context.Context, url string, n int, res *clusterResult) error {
	var logs []*audit.Log
	for i := range 3 {
		st, err := store.OpenPostgres(ctx, url, store.WithNode(fmt.Sprintf("bench-%d", i)))
		if err != nil {
			return err
		}
		defer func() { _ = st.Close() }()
		dir, err := os.MkdirTemp("", "sandhold-bench-audit-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		logs = append(logs, audit.New(st, dir))
	}
	entry := audit.Entry{Actor: "bench", Action: "bench.append", Target: "x", Verdict: audit.Allow, Detail: map[string]any{"n": 1}}
	for _, l := range logs { // warm each pool's connection first
		for range 10 {
			if _, err := l.Append(ctx, entry); err != nil {
				return err
			}
		}
	}
	one, err := sample(n, func() error { _, err := logs[0].Append(ctx, entry); return err })
	if err != nil {
		return err
	}
	res.AuditOne = fig(one)
	parts := make([]latency, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range 3 {
		wg.Go(func() {
			parts[i], errs[i] = sample(n, func() error { _, err := logs[i].Append(ctx, entry); return err })
		})
	}
	wg.Wait()
	el := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	res.AuditThree = fig(append(append(parts[0], parts[1]...), parts[2]...))
	res.AuditThreeRate = float64(3*n) / el.Seconds()
	v, err := logs[0].Verify(ctx)
	if err != nil {
		return err
	}
	if want := int64(4*n + 30); !v.OK || v.Records != want {
		return fmt.Errorf("the chain after concurrent appends: %+v, want %d records", v, want)
	}
	return nil
}

func printCluster(o options, r clusterResult) error {
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	fmt.Printf("3 nodes on loopback, one PostgreSQL\n")
	fmt.Printf("exec round trip, direct:             p50 %7.2f ms  p99 %7.2f ms  (n=%d)\n", r.ExecDirect.P50ms, r.ExecDirect.P99ms, r.ExecDirect.N)
	fmt.Printf("exec round trip, through a forwarder: p50 %7.2f ms  p99 %7.2f ms  (ratio %.2f)\n", r.ExecForwarded.P50ms, r.ExecForwarded.P99ms, r.ForwardRatio)
	fmt.Printf("creates through 3 nodes:             %.1f/s (%d, placed %v)\n", r.CreatesPerSec, r.Creates, r.CreatesPlaced)
	if r.AuditOne.N > 0 {
		fmt.Printf("audit append, 1 node:                p50 %7.2f ms  p99 %7.2f ms\n", r.AuditOne.P50ms, r.AuditOne.P99ms)
		fmt.Printf("audit append, 3 nodes at once:       p50 %7.2f ms  p99 %7.2f ms  (%.0f appends/s in all)\n", r.AuditThree.P50ms, r.AuditThree.P99ms, r.AuditThreeRate)
	}
	fmt.Printf("revocation on c refused on a after:  %v ms\n", r.RevokeMs)
	fmt.Printf("HALT on b froze a's and c's after:   %v ms\n", r.HaltMs)
	fmt.Printf("c killed (SIGKILL), its sandbox lost: %.0f ms; c restarted and serving it: %.0f ms\n", r.LostMs, r.BackMs)
	return nil
}
