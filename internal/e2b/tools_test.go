package e2b

import (
	"testing"

	"github.com/sandhold/sandhold/internal/dispatch"
)

// TestProcessStartHoldsItsCommand: e2b.process_start starts a command, so
// its call's record goes first and the command is held in the init until
// the record is durable (sandbox.TestCommandStartsOnlyOnceItsRecordIsDurable
// proves the hold on the path it takes, Sandbox.Spawn). The other e2b.*
// tools start nothing: a line typed into a process passes shell.input,
// which declares its own.
func TestProcessStartHoldsItsCommand(t *testing.T) {
	found := false
	for _, tl := range (&Service{}).Tools() {
		want := dispatch.NoCommand
		if tl.Name == ToolProcessStart.Name() {
			want, found = dispatch.HeldCommand, true
		}
		if tl.Commands != want {
			t.Errorf("%s declares Commands %d, want %d", tl.Name, tl.Commands, want)
		}
	}
	if !found {
		t.Fatal("no e2b.process_start tool")
	}
}
