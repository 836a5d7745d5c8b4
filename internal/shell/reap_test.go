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
