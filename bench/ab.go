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

// abResult is one run of bench ab.
type abResult struct {
	LoadBefore string  `json:"load_average_before"`
	LoadAfter  string  `json:"load_average_after"`
	Floor      figure  `json:"floor"`
	A          figure  `json:"exec_rtt_a"`
	B          figure  `json:"exec_rtt_b"`
	AOverFloor float64 `json:"a_over_floor"`
	BOverFloor float64 `json:"b_over_floor"`
	BOverA     float64 `json:"b_over_a"`
	// AIO shell/exec round trips (/bin/true typed into a shell session
	// opened once before, as in bench core), alternated in the same loop;
	// each binary's AIO / its own exec, and B's AIO / A's.
	AIOA          figure  `json:"aio_shell_exec_a"`
	AIOB          figure  `json:"aio_shell_exec_b"`
	AIOAOverExecA float64 `json:"aio_a_over_exec_a"`
	AIOBOverExecB float64 `json:"aio_b_over_exec_b"`
	AIOBOverA     float64 `json:"aio_b_over_a"`
	// Sustained exec/s of 16 clients on 4 sandboxes, A's and B's runs
	// alternated (abRounds each).
	SustainedA      float64 `json:"sustained_exec_per_second_a"`
	SustainedB      float64 `json:"sustained_exec_per_second_b"`
	SustainedBOverA float64 `json:"sustained_b_over_a"`
	// The audit transactions and records each server committed in the
	// run (its /metrics), creates and warm-up included.
	AuditA, AuditB auditCount
}

// auditCount is a server's sandhold_audit_batches_total and
// sandhold_audit_records_total.
type auditCount struct {
	Batches float64 `json:"batches"`
	Records float64 `json:"records"`
}

// auditCounts reads the server's audit counters from /metrics.
func (s *server) auditCounts() (auditCount, error) {
	raw, err := s.get("/metrics")
	if err != nil {
		return auditCount{}, err
	}
	var c auditCount
	for line := range strings.Lines(string(raw)) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		switch name {
		case "sandhold_audit_batches_total":
			c.Batches, err = strconv.ParseFloat(v, 64)
		case "sandhold_audit_records_total":
			c.Records, err = strconv.ParseFloat(v, 64)
		}
		if err != nil {
			return auditCount{}, fmt.Errorf("/metrics: %q: %w", line, err)
		}
	}
	return c, nil
}

// abRounds is how many sustained runs of each binary bench ab alternates.
const abRounds = 4

// abBench compares two server binaries in the same minutes (BENCHMARKS.md:
// the machine is shared, so old and new are alternated rather than run
// one after the other): both are started, each with one sandbox, and one
// loop alternates the floor (a bare fork/exec and one 4 KB fdatasync in
// A's data dir), an exec round trip on A and one on B, so drift in the
// machine falls on all three alike.
func abBench(ctx context.Context, o options, base string) error {
	if base == "" {
		return errors.New("bench ab needs -base: the binary to compare -server with")
	}
	var res abResult
	res.LoadBefore = loadAvg()
	start := func(bin string) (*server, string, string, error) {
		srv, err := startServer(ctx, bin, 0, "SANDBOX_DISK_BUDGET=100TB")
		if err != nil {
			return nil, "", "", err
		}
		id, err := srv.create()
		if err != nil {
			srv.stop()
			return nil, "", "", err
		}
		for range 20 {
			if err := srv.exec(id); err != nil {
				srv.stop()
				return nil, "", "", err
			}
		}
		session, err := srv.aioShellExec(id, "", "/bin/true")
		for i := 0; err == nil && i < 10; i++ {
			_, err = srv.aioShellExec(id, session, "/bin/true")
		}
		if err != nil {
			srv.stop()
			return nil, "", "", err
		}
		return srv, id, session, nil
	}
	a, aid, asess, err := start(base)
	if err != nil {
		return fmt.Errorf("start %s: %w", base, err)
	}
	defer a.stop()
	b, bid, bsess, err := start(o.server)
	if err != nil {
		return fmt.Errorf("start %s: %w", o.server, err)
	}
	defer b.stop()
	fs, err := newSyncer(a.dir)
	if err != nil {
		return err
	}
	defer fs.close()
	var fl, la, lb, sa, sb latency
	pair := func(i int, fa, fb func() error) (x, y []time.Duration, err error) {
		first, second := fa, fb
		if i%2 == 1 {
			first, second = second, first
		}
		if x, err = sample(1, first); err != nil {
			return nil, nil, err
		}
		if y, err = sample(1, second); err != nil {
			return nil, nil, err
		}
		if i%2 == 1 {
			x, y = y, x
		}
		return x, y, nil
	}
	for i := range o.n {
		f, err := sample(1, fs.floorOp)
		if err != nil {
			return err
		}
		x, y, err := pair(i, func() error { return a.exec(aid) }, func() error { return b.exec(bid) })
		if err != nil {
			return err
		}
		u, v, err := pair(i,
			func() error { _, err := a.aioShellExec(aid, asess, "/bin/true"); return err },
			func() error { _, err := b.aioShellExec(bid, bsess, "/bin/true"); return err })
		if err != nil {
			return err
		}
		fl, la, lb = append(fl, f...), append(la, x...), append(lb, y...)
		sa, sb = append(sa, u...), append(sb, v...)
	}
	// Sustained throughput as in bench core (16 clients on 4 sandboxes),
	// the two servers' runs alternated, each a quarter of -sustain long.
	more := func(srv *server, id string) ([]string, error) {
		ids := []string{id}
		for range 3 {
			x, err := srv.create()
			if err != nil {
				return nil, err
			}
			ids = append(ids, x)
		}
		return ids, nil
	}
	aids, err := more(a, aid)
	if err != nil {
		return err
	}
	bids, err := more(b, bid)
	if err != nil {
		return err
	}
	for r := range 2 * abRounds {
		srv, ids, sum := a, aids, &res.SustainedA
		if (r%2 == 0) == (r/2%2 == 1) {
			srv, ids, sum = b, bids, &res.SustainedB
		}
		x, err := sustained(16, o.sustain/abRounds, func(i int) error { return srv.exec(ids[i%len(ids)]) })
		if err != nil {
			return fmt.Errorf("sustained exec: %w", err)
		}
		*sum += x / abRounds
	}
	res.SustainedBOverA = res.SustainedB / res.SustainedA
	if res.AuditA, err = a.auditCounts(); err != nil {
		return err
	}
	if res.AuditB, err = b.auditCounts(); err != nil {
		return err
	}
	res.LoadAfter = loadAvg()
	res.Floor, res.A, res.B = fig(fl), fig(la), fig(lb)
	res.AOverFloor, res.BOverFloor = res.A.P50ms/res.Floor.P50ms, res.B.P50ms/res.Floor.P50ms
	res.BOverA = res.B.P50ms / res.A.P50ms
	res.AIOA, res.AIOB = fig(sa), fig(sb)
	res.AIOAOverExecA, res.AIOBOverExecB = res.AIOA.P50ms/res.A.P50ms, res.AIOB.P50ms/res.B.P50ms
	res.AIOBOverA = res.AIOB.P50ms / res.AIOA.P50ms
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("load average before %s, after %s\n", res.LoadBefore, res.LoadAfter)
	fmt.Printf("%-34s p50 %6.2f ms  p99 %6.2f ms\n", "floor (fork/exec + fdatasync)", res.Floor.P50ms, res.Floor.P99ms)
	fmt.Printf("%-34s p50 %6.2f ms  p99 %6.2f ms  / floor %.2fx\n", "A "+base, res.A.P50ms, res.A.P99ms, res.AOverFloor)
	fmt.Printf("%-34s p50 %6.2f ms  p99 %6.2f ms  / floor %.2fx\n", "B "+o.server, res.B.P50ms, res.B.P99ms, res.BOverFloor)
	fmt.Printf("B / A (p50): %.3f\n", res.BOverA)
	fmt.Printf("%-34s p50 %6.2f ms  p99 %6.2f ms  / A's exec %.2fx\n", "A AIO shell/exec", res.AIOA.P50ms, res.AIOA.P99ms, res.AIOAOverExecA)
	fmt.Printf("%-34s p50 %6.2f ms  p99 %6.2f ms  / B's exec %.2fx\n", "B AIO shell/exec", res.AIOB.P50ms, res.AIOB.P99ms, res.AIOBOverExecB)
	fmt.Printf("AIO shell/exec B / A (p50): %.3f\n", res.AIOBOverA)
	fmt.Printf("sustained, 16 clients on 4 sandboxes: A %.0f exec/s, B %.0f exec/s, B / A %.3f\n",
		res.SustainedA, res.SustainedB, res.SustainedBOverA)
	for _, x := range []struct {
		name string
		c    auditCount
	}{{"A", res.AuditA}, {"B", res.AuditB}} {
		fmt.Printf("audit %s: %.0f transactions, %.0f records (%.2f a transaction)\n", x.name, x.c.Batches, x.c.Records, x.c.Records/max(x.c.Batches, 1))
	}
	return nil
}
