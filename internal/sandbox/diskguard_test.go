package sandbox

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/fault"
)

// TestDefaultsAdmitDensity: with the stock settings on a host with 55 GiB
// free (the budget the server derives from it, the default quota and the
// default over-commit), at least 200 default sandboxes are admitted, and
// the promise cap is still a bound: the next ones are refused with a
// message that names what to change.
func TestDefaultsAdmitDensity(t *testing.T) {
	d := config.Default()
	const free = 55 << 30
	m := &Manager{cfg: Config{DiskBudget: free / 100 * config.DefaultDiskBudgetPercent, DiskOvercommit: d.DiskOvercommit},
		idx: newSandboxIndex(), log: slog.Default()}
	admitted := 0
	var refusal error
	for range 10000 {
		if _, err := m.reserveDisk(d.MaxDisk.Bytes()); err != nil {
			refusal = err
			break
		}
		admitted++
	}
	if admitted < 200 {
		t.Fatalf("the defaults admit %d sandboxes of %s on a host with 55 GiB free, want at least 200", admitted, d.MaxDisk)
	}
	var fe *fault.Error
	if !errors.As(refusal, &fe) || fe.Kind != fault.Conflict || fe.Field != "limits.disk" {
		t.Fatalf("past the cap (%d admitted): got %v, want a conflict on limits.disk", admitted, refusal)
	}
	for _, want := range []string{"SANDBOX_DISK_OVERCOMMIT", "SANDBOX_DISK_BUDGET", "SANDBOX_MAX_DISK", "limits.disk", "delete a sandbox"} {
		if !strings.Contains(fe.Msg, want) {
			t.Errorf("the refusal %q does not name %s", fe.Msg, want)
		}
	}
	t.Logf("admitted %d default sandboxes; refusal: %s", admitted, fe.Msg)
}

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
			got := promiseCap(c.budget, c.ratio)
			if c.wantSaturated {
				if got < c.budget {
					t.Fatalf("promiseCap(%d, %d) = %d, overflowed", c.budget, c.ratio, got)
				}
				return
			}
			if got != c.want {
				t.Fatalf("promiseCap(%d, %d) = %d, want %d", c.budget, c.ratio, got, c.want)
			}
		})
	}
}

func TestDiskVerdict(t *testing.T) {
	const budget, floor = 10 << 30, 1 << 30
	cases := []struct {
		name    string
		r       diskReading
		stopped bool
		want    string // a part of the reason; "" = growth allowed
	}{
		{"room", diskReading{Images: 1 << 30, Free: 20 << 30}, false, ""},
		{"budget reached", diskReading{Images: budget, Free: 20 << 30}, false, "whole disk budget"},
		{"under the floor", diskReading{Images: 1 << 30, Free: floor - 1}, false, "kept for the server"},
		{"just inside the budget stays stopped", diskReading{Images: budget - 1<<20, Free: 20 << 30}, true, "within"},
		{"just above the floor stays stopped", diskReading{Images: 1 << 30, Free: floor + 1<<20}, true, "within"},
		{"a margin inside resumes", diskReading{Images: budget - maxResumeGap, Free: floor + maxResumeGap}, true, ""},
		{"just inside the budget, never stopped", diskReading{Images: budget - 1<<20, Free: 20 << 30}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := diskVerdict(c.r, budget, floor, c.stopped)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("diskVerdict(%+v, stopped %v) = %q, want %q", c.r, c.stopped, got, c.want)
			}
		})
	}
	if got := diskVerdict(diskReading{Images: 1 << 50, Free: 0}, 0, 0, true); got != "" {
		t.Fatalf("without a budget and a floor: %q, want no stop", got)
	}
}

// TestStoppedGuardRefusesCreates: while the guard stops growth, a
// reservation is refused with a conflict saying what to free.
func TestStoppedGuardRefusesCreates(t *testing.T) {
	m := &Manager{cfg: Config{DiskBudget: 1 << 40, DiskOvercommit: 1}, idx: newSandboxIndex(), log: slog.Default()}
	m.guard.stopped = diskVerdict(diskReading{Images: 1 << 40}, 1<<40, 0, false)
	_, err := m.reserveDisk(1 << 20)
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Kind != fault.Conflict || !strings.Contains(fe.Msg, "delete sandboxes or files") {
		t.Fatalf("while stopped: got %v, want a conflict saying what to free", err)
	}
}
