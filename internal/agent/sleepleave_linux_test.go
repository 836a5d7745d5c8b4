package agent

import (
	"context"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"
)

// TestIdleInitSleepsOnlyWithLeave: an idle init asks the server for leave
// to sleep (LaunchSpec.SleepGate) and stays awake until it has it; a leave
// that comes after a call made since the question is not taken (the init
// asks again a quiet period later); a leave for a quiet init puts it to
// sleep, and the next call wakes it.
func TestIdleInitSleepsOnlyWithLeave(t *testing.T) {
	memfd := keeperMemfd(t)
	asks := make(chan func(), 4)
	ts := launchWith(t, func(st *proto.Setup) { st.SleepAfterMs = int(testSleepAfter / time.Millisecond) },
		func(ls *LaunchSpec) {
			ls.ExeFile = memfd
			ls.SleepGate = func(grant func()) { asks <- grant }
		})
	ask := func(what string) func() {
		t.Helper()
		select {
		case grant := <-asks:
			return grant
		case <-time.After(30 * time.Second):
			t.Fatalf("no question to sleep %s", what)
			return nil
		}
	}
	awake := func(what string) {
		t.Helper()
		if st := procStatus(t, ts.Pid); st["Name"] != "sandhold-init" {
			t.Fatalf("the init is %q %s, want it awake", st["Name"], what)
		}
	}
	ctx := context.Background()

	grant := ask("after the setup")
	awake("while its leave is held")
	if err := ts.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	grant() // comes after the ping: not taken
	grant = ask("after a leave that came after a call")
	awake("after a leave that came after a call")
	grant()
	waitAsleep(t, ts)
	if err := ts.Ping(ctx); err != nil {
		t.Fatalf("ping after the sleep: %v", err)
	}
	waitState(t, ts.Pid, "sandhold-init", 20*time.Second)
}
