package diskbudget

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

func TestPromiseCap(t *testing.T) {
	cases := []struct {
		name          string
		budget        int64
		ratio         int
		want          int64
		wantSaturated bool
	}{
		{"no over-commit", 100, 1, 100, false},
		{"zero ratio is one", 100, 0, 100, false},
		{"default ratio", 100, 25, 2500, false},
		{"saturates", 1 << 62, 1000, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := PromiseCap(c.budget, c.ratio)
			if c.wantSaturated {
				if got < c.budget {
					t.Fatalf("PromiseCap(%d, %d) = %d, overflowed", c.budget, c.ratio, got)
				}
				return
			}
			if got != c.want {
				t.Fatalf("PromiseCap(%d, %d) = %d, want %d", c.budget, c.ratio, got, c.want)
			}
		})
	}
}

func TestDiskVerdict(t *testing.T) {
	const budget, floor = 10 << 30, 1 << 30
	cases := []struct {
		name    string
		r       Reading
		stopped bool
		want    string // a part of the reason; "" = growth allowed
	}{
		{"room", Reading{Images: 1 << 30, Free: 20 << 30}, false, ""},
		{"budget reached", Reading{Images: budget, Free: 20 << 30}, false, "whole disk budget"},
		{"under the floor", Reading{Images: 1 << 30, Free: floor - 1}, false, "kept for the server"},
		{"just inside the budget stays stopped", Reading{Images: budget - 1<<20, Free: 20 << 30}, true, "within"},
		{"just above the floor stays stopped", Reading{Images: 1 << 30, Free: floor + 1<<20}, true, "within"},
		{"a margin inside resumes", Reading{Images: budget - MaxResumeGap, Free: floor + MaxResumeGap}, true, ""},
		{"just inside the budget, never stopped", Reading{Images: budget - 1<<20, Free: 20 << 30}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Verdict(c.r, budget, floor, c.stopped)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("Verdict(%+v, stopped %v) = %q, want %q", c.r, c.stopped, got, c.want)
			}
		})
	}
	if got := Verdict(Reading{Images: 1 << 50, Free: 0}, 0, 0, true); got != "" {
		t.Fatalf("without a budget and a floor: %q, want no stop", got)
	}
}

// TestCheckStopsAndResumes: a reading over the budget stops growth (the
// mounted workspaces are clamped, a create is refused), one a margin
// inside resumes it (unclamped, admitted), and a reading that fails
// changes nothing and clamps nothing.
func TestCheckStopsAndResumes(t *testing.T) {
	const budget = 10 << 30
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var g Guard
	var applied []bool
	check := func(r Reading, err error) {
		g.Check(log, budget, 0, func() (Reading, error) { return r, err }, func(stop bool) { applied = append(applied, stop) })
	}
	check(Reading{Images: budget, Free: 20 << 30}, nil)
	images, free, why := g.Last()
	if why == "" || images != budget || free != 20<<30 || len(applied) != 1 || !applied[0] {
		t.Fatalf("over the budget: last %d %d %q, applied %v; want stopped and clamped", images, free, why, applied)
	}
	var fe *fault.Error
	if err := g.Refusal(); !errors.As(err, &fe) || fe.Kind != fault.Conflict || fe.Field != "limits.disk" || !strings.Contains(fe.Msg, why) {
		t.Fatalf("refusal while stopped: %v", err)
	}
	check(Reading{}, errors.New("statfs failed"))
	if _, _, still := g.Last(); still != why || len(applied) != 1 {
		t.Fatalf("a failed reading changed the guard: %q, applied %v", still, applied)
	}
	check(Reading{Images: budget - MaxResumeGap, Free: 20 << 30}, nil)
	if _, _, why := g.Last(); why != "" || len(applied) != 2 || applied[1] {
		t.Fatalf("a margin inside: %q, applied %v; want resumed and unclamped", why, applied)
	}
	if err := g.Refusal(); err != nil {
		t.Fatalf("refusal with room: %v", err)
	}
}
