package sandbox

import (
	"sync"
	"testing"
	"time"
)

// TestLateSlotKillSparesTheNextInit: a kill of an execution group made
// under an earlier init (a revoked key's stream or background command
// ending after the sandbox was stopped) that passed its generation check
// just as the sandbox starts again must not reach the new init's command
// in the group of the same name. The table's op hook (SetOpHook) restarts
// the sandbox and starts a command inside the window between the check and
// the kill; the start waits for the kill to end (genMu), so the command
// runs to its end. Before genMu the restart went through and the kill took the new
// command (TestRevocationEndsEverythingTheKeyHolds' flake).
func TestLateSlotKillSparesTheNextInit(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	if r := run(t, s, ExecRequest{Command: "true", Timeout: 30 * time.Second}); r.Status != StatusCompleted {
		t.Fatalf("first command: %+v", r)
	}
	// The first init's execution group, held as a late kill holds it.
	if len(s.execs.Idle()) == 0 {
		t.Fatal("no execution group pooled after a command")
	}
	old, _, err := s.execs.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	oldName := old.Cgroup.Name()
	s.shutdown()

	ctx := callCtx(t, m)
	started := make(chan *Execution, 1)
	var once sync.Once
	s.execs.SetOpHook(func() {
		once.Do(func() {
			done := make(chan struct{})
			go func() {
				defer close(done)
				e, err := s.Exec(ctx, ExecRequest{Command: "sleep 1; echo survived", Timeout: 60 * time.Second, Background: true})
				if err != nil {
					t.Error("exec after the restart:", err)
					return
				}
				started <- e
			}()
			// Give the restart every chance to go through before the
			// kill (it must not: it waits for the kill to end).
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
		})
	})
	t.Cleanup(func() { s.execs.SetOpHook(nil) })
	s.execs.Kill(old)

	var e *Execution
	select {
	case e = <-started:
	case <-time.After(90 * time.Second):
		t.Fatal("the command after the restart never started")
	}
	// The new init made one execution group, of the same name as the old.
	seq := s.execs.Made()
	if seq != 1 || oldName != "x1" {
		t.Fatalf("groups made since the restart: %d; the old group: %q: the test no longer exercises a reused name", seq, oldName)
	}
	select {
	case <-e.Done():
	case <-time.After(90 * time.Second):
		t.Fatal("the command after the restart never ended")
	}
	if r := e.Result(); r.Status != StatusCompleted || r.Stdout != "survived\n" {
		t.Fatalf("the new init's command: status %s (%s), stdout %q: a late kill of the old init's group reached it", r.Status, r.Reason, r.Stdout)
	}
}
