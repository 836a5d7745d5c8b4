package sandbox

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/sandbox/startsteps"
)

// BenchmarkCreateMany creates b.N sandboxes one after another and keeps
// them (the lean init from a sealed memfd through a launcher, the default
// 5 GB workspace, the idle sleep at its default, spare inits as the
// server has them), and reports the p50 of each create and of each step
// of its init's start (steps.go) over the first and the last tenth, and
// how many inits slept while it created: where a late create's time goes.
//
//	go test -run '^$' -bench CreateMany -benchtime 1000x ./internal/sandbox/
func BenchmarkCreateMany(b *testing.B) {
	m := benchManager(b, "many", 2)
	var mu sync.Mutex
	var last []startsteps.Step
	m.onStart = func(st []startsteps.Step) {
		mu.Lock()
		last = slices.Clone(st)
		mu.Unlock()
	}
	ctx := context.Background()
	// The template is built before the measurement.
	if info, err := m.Create(ctx, owner, Spec{}); err != nil {
		b.Fatal(err)
	} else if err := m.Delete(ctx, owner, info.ID); err != nil {
		b.Fatal(err)
	}
	type sample struct {
		total time.Duration
		steps []startsteps.Step
	}
	var samples []sample
	var sbs []*Sandbox
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		info, err := m.Create(ctx, owner, Spec{})
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		mu.Lock()
		samples = append(samples, sample{d, last})
		mu.Unlock()
		s, _ := m.Get(owner, info.ID)
		sbs = append(sbs, s)
	}
	b.StopTimer()
	asleep := 0
	for _, s := range sbs {
		if c := initComm(s); c == "sandhold-keeper" {
			asleep++
		}
	}
	b.ReportMetric(float64(asleep), "inits-asleep-at-the-end")
	tenth := max(len(samples)/10, 1)
	for _, part := range []struct {
		name string
		s    []sample
	}{{"first", samples[:tenth]}, {"last", samples[len(samples)-tenth:]}} {
		var totals []time.Duration
		per := map[string][]time.Duration{}
		for _, x := range part.s {
			totals = append(totals, x.total)
			for _, st := range x.steps {
				per[st.Name] = append(per[st.Name], st.D)
			}
		}
		b.ReportMetric(p50ms(totals), "ms-p50-create-"+part.name)
		names := make([]string, 0, len(per))
		for n := range per {
			names = append(names, n)
		}
		sort.Strings(names)
		var sb strings.Builder
		for _, n := range names {
			fmt.Fprintf(&sb, "%s %.2f; ", n, p50ms(per[n]))
		}
		b.Logf("%s tenth, p50 ms per step: %s", part.name, sb.String())
	}
}

// initComm is the name of the sandbox's init process on the host.
func initComm(s *Sandbox) string {
	s.mu.Lock()
	pid := s.inst.Pid
	s.mu.Unlock()
	c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(c))
}
