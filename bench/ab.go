package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
}

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
	start := func(bin string) (*server, string, error) {
		srv, err := startServer(ctx, bin, 0, "SANDBOX_DISK_BUDGET=100TB")
		if err != nil {
			return nil, "", err
		}
		id, err := srv.create()
		if err != nil {
			srv.stop()
			return nil, "", err
		}
		for range 20 {
			if err := srv.exec(id); err != nil {
				srv.stop()
				return nil, "", err
			}
		}
		return srv, id, nil
	}
	a, aid, err := start(base)
	if err != nil {
		return fmt.Errorf("start %s: %w", base, err)
	}
	defer a.stop()
	b, bid, err := start(o.server)
	if err != nil {
		return fmt.Errorf("start %s: %w", o.server, err)
	}
	defer b.stop()
	fs, err := newSyncer(a.dir)
	if err != nil {
		return err
	}
	defer fs.close()
	var fl, la, lb latency
	for i := range o.n {
		f, err := sample(1, fs.floorOp)
		if err != nil {
			return err
		}
		first, second := func() error { return a.exec(aid) }, func() error { return b.exec(bid) }
		if i%2 == 1 {
			first, second = second, first
		}
		x, err := sample(1, first)
		if err != nil {
			return err
		}
		y, err := sample(1, second)
		if err != nil {
			return err
		}
		if i%2 == 1 {
			x, y = y, x
		}
		fl, la, lb = append(fl, f...), append(la, x...), append(lb, y...)
	}
	res.LoadAfter = loadAvg()
	res.Floor, res.A, res.B = fig(fl), fig(la), fig(lb)
	res.AOverFloor, res.BOverFloor = res.A.P50ms/res.Floor.P50ms, res.B.P50ms/res.Floor.P50ms
	res.BOverA = res.B.P50ms / res.A.P50ms
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("load average before %s, after %s\n", res.LoadBefore, res.LoadAfter)
	fmt.Printf("%-34s p50 %6.2f ms  p99 %6.2f ms\n", "floor (fork/exec + fdatasync)", res.Floor.P50ms, res.Floor.P99ms)
	fmt.Printf("%-34s p50 %6.2f ms  p99 %6.2f ms  / floor %.2fx\n", "A "+base, res.A.P50ms, res.A.P99ms, res.AOverFloor)
	fmt.Printf("%-34s p50 %6.2f ms  p99 %6.2f ms  / floor %.2fx\n", "B "+o.server, res.B.P50ms, res.B.P99ms, res.BOverFloor)
	fmt.Printf("B / A (p50): %.3f\n", res.BOverA)
	return nil
}
