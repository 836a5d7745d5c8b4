package shell

import (
	"testing"
	"time"
)

func TestReapExpiresIdleSessions(t *testing.T) {
	svc := New(nil, Options{IdleTimeout: time.Minute})
	defer svc.Close()
	old := time.Now().Add(-2 * time.Hour)
	fresh := newBashSession("fresh", "sb1", "k", "/workspace")
	idle := newBashSession("idle", "sb1", "k", "/workspace")
	idle.lastUsed = old
	ended := &Session{ID: "ended", Sandbox: "sb1", Owner: "k", terminated: true, lastUsed: old}
	justEnded := &Session{ID: "just", Sandbox: "sb1", Owner: "k", terminated: true, lastUsed: time.Now()}
	svc.mu.Lock()
	svc.bash["sb1/fresh"], svc.bash["sb1/idle"] = fresh, idle
	svc.sessions["sb1/ended"], svc.sessions["sb1/just"] = ended, justEnded
	svc.mu.Unlock()

	svc.reapOnce()

	svc.mu.Lock()
	defer svc.mu.Unlock()
	if _, ok := svc.bash["sb1/idle"]; ok {
		t.Error("an idle bash session survived")
	}
	if _, ok := svc.bash["sb1/fresh"]; !ok {
		t.Error("a fresh bash session was reaped")
	}
	if _, ok := svc.sessions["sb1/ended"]; ok {
		t.Error("a long-ended shell session is still listed")
	}
	if _, ok := svc.sessions["sb1/just"]; !ok {
		t.Error("a just-ended shell session vanished before endedKeep")
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
	svc.mu.Lock()
	svc.bash["sb1/busy"], svc.bash["sb1/idle"] = busy, idle
	err := svc.reserveLocked("k", "sb1/new", false)
	_, idleLeft := svc.bash["sb1/idle"]
	_, busyLeft := svc.bash["sb1/busy"]
	// Another key is not counted against k, and k's cap is its own.
	other := svc.reserveLocked("other", "sb1/x", false)
	svc.mu.Unlock()
	if err != nil || idleLeft || !busyLeft || other != nil {
		t.Fatalf("err %v, idle kept %v, busy kept %v, other %v", err, idleLeft, busyLeft, other)
	}
	// With every session busy the cap holds.
	svc.mu.Lock()
	svc.bash["sb1/busy2"] = &BashSession{ID: "busy2", Owner: "k", byID: map[string]*BashCommand{"c": {status: BashRunning}}, lastUsed: time.Now()}
	err = svc.reserveLocked("k", "sb1/new2", false)
	svc.mu.Unlock()
	if err == nil {
		t.Fatal("a busy session was evicted")
	}
}
