package shell

import (
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/sessions"
)

func put(t *testing.T, svc *Service, kind, owner, id string, idle time.Duration, x sessions.Session) {
	t.Helper()
	r, err := svc.table.Reserve(owner, sessions.Key{Kind: kind, Sandbox: "sb1", ID: id}, idle)
	if err != nil {
		t.Fatal(err)
	}
	r.Commit(x)
}

func has(svc *Service, kind, id string) bool {
	return len(svc.table.Find(kind, "sb1", id)) > 0
}

func TestReapExpiresIdleSessions(t *testing.T) {
	svc := New(nil, Options{IdleTimeout: time.Hour, ImplicitIdle: time.Minute})
	defer svc.Close()
	old := time.Now().Add(-2 * time.Hour)
	fresh := newBashSession("fresh", "sb1", "k", "/workspace")
	idle := newBashSession("idle", "sb1", "k", "/workspace")
	idle.lastUsed = old
	ended := &Session{ID: "ended", Sandbox: "sb1", Owner: "k", terminated: true, lastUsed: old}
	justEnded := &Session{ID: "just", Sandbox: "sb1", Owner: "k", terminated: true, lastUsed: time.Now()}
	implicit := &Session{ID: "implicit", Sandbox: "sb1", Owner: "k", lastUsed: time.Now().Add(-2 * time.Minute)}
	named := &Session{ID: "named", Sandbox: "sb1", Owner: "k", lastUsed: time.Now().Add(-2 * time.Minute)}
	put(t, svc, kindBash, "k", "fresh", 0, fresh)
	put(t, svc, kindBash, "k", "idle", 0, idle)
	put(t, svc, kindShell, "k", "ended", 0, ended)
	put(t, svc, kindShell, "k", "just", 0, justEnded)
	put(t, svc, kindShell, "k", "implicit", svc.opt.ImplicitIdle, implicit)
	put(t, svc, kindShell, "k", "named", 0, named)

	svc.reapOnce()

	for _, c := range []struct {
		kind, id string
		want     bool
	}{
		{kindBash, "idle", false}, {kindBash, "fresh", true}, {kindShell, "ended", false},
		{kindShell, "just", true}, {kindShell, "implicit", false}, {kindShell, "named", true},
	} {
		if got := has(svc, c.kind, c.id); got != c.want {
			t.Errorf("%s %s listed = %v, want %v", c.kind, c.id, got, c.want)
		}
	}
	if !idle.closed {
		t.Error("the reaped bash session was not closed")
	}
}

func TestCapEvictsTheOldestIdleSession(t *testing.T) {
	svc := New(nil, Options{MaxSessions: 2})
	defer svc.Close()
	busy := newBashSession("busy", "sb1", "k", "/workspace")
	busy.lastUsed = time.Now().Add(-3 * time.Hour)
	busy.byID["c"] = &BashCommand{status: BashRunning}
	idle := newBashSession("idle", "sb1", "k", "/workspace")
	idle.lastUsed = time.Now().Add(-time.Hour)
	put(t, svc, kindBash, "k", "busy", 0, busy)
	put(t, svc, kindBash, "k", "idle", 0, idle)
	res, err := svc.table.Reserve("k", sessions.Key{Kind: kindBash, Sandbox: "sb1", ID: "new"}, 0)
	// Another key is not counted against k, and k's cap is its own.
	_, other := svc.table.Reserve("other", sessions.Key{Kind: kindBash, Sandbox: "sb1", ID: "x"}, 0)
	if err != nil || has(svc, kindBash, "idle") || !has(svc, kindBash, "busy") || other != nil {
		t.Fatalf("err %v, idle kept %v, busy kept %v, other %v", err, has(svc, kindBash, "idle"), has(svc, kindBash, "busy"), other)
	}
	// With every session busy the cap holds.
	res.Cancel()
	put(t, svc, kindBash, "k", "busy2", 0, &BashSession{ID: "busy2", Owner: "k", byID: map[string]*BashCommand{"c": {status: BashRunning}}, lastUsed: time.Now()})
	if _, err := svc.table.Reserve("k", sessions.Key{Kind: kindBash, Sandbox: "sb1", ID: "new2"}, 0); err == nil {
		t.Fatal("a busy session was evicted")
	}
}

// TestClaimedImplicitSessionIsNotEvicted: a session made for a call that
// has not sent its command yet counts as busy, so a cap never closes it
// under that call.
func TestClaimedImplicitSessionIsNotEvicted(t *testing.T) {
	svc := New(nil, Options{MaxPerSandbox: 2})
	defer svc.Close()
	claimed := &Session{ID: "new", Sandbox: "sb1", Owner: "k", claimed: true, lastUsed: time.Now().Add(-time.Hour)}
	idle := &Session{ID: "idle", Sandbox: "sb1", Owner: "k", lastUsed: time.Now()}
	put(t, svc, kindShell, "k", "new", svc.opt.ImplicitIdle, claimed)
	put(t, svc, kindShell, "k", "idle", 0, idle)
	if _, err := svc.table.Reserve("k", sessions.Key{Kind: kindShell, Sandbox: "sb1", ID: "third"}, 0); err != nil {
		t.Fatal(err)
	}
	if !has(svc, kindShell, "new") || has(svc, kindShell, "idle") {
		t.Fatalf("claimed kept %v, idle kept %v: want the claimed one kept", has(svc, kindShell, "new"), has(svc, kindShell, "idle"))
	}
}
