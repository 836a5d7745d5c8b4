package sandbox

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
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

// TestStoppedGuardRefusesCreates: while the guard stops growth, a
// reservation is refused with a conflict saying what to free.
func TestStoppedGuardRefusesCreates(t *testing.T) {
	m := &Manager{cfg: Config{DiskBudget: 1 << 40, DiskOvercommit: 1}, idx: newSandboxIndex(), log: slog.Default()}
	m.guard.Record(diskbudget.Reading{Images: 1 << 40}, 1<<40, 0)
	_, err := m.reserveDisk(1 << 20)
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Kind != fault.Conflict || !strings.Contains(fe.Msg, "delete sandboxes or files") {
		t.Fatalf("while stopped: got %v, want a conflict saying what to free", err)
	}
}
