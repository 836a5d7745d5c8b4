package sandbox

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
)

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
	if c := m.DiskCommitted(); c != 0 {
		t.Fatalf("a refused reservation left %d bytes committed", c)
	}
}
