package sandboxinit

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestIdleReleaseWaitsForQuiet(t *testing.T) {
	var freed atomic.Int32
	done := make(chan struct{}, 4)
	r := &idleRelease{after: 50 * time.Millisecond, free: func() { freed.Add(1); done <- struct{}{} }}

	// Requests every 10 ms for 300 ms: no release while they come.
	stop := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(stop) {
		r.note()
		time.Sleep(10 * time.Millisecond)
	}
	if n := freed.Load(); n != 0 {
		t.Fatalf("released %d times while requests kept coming", n)
	}
	// Then quiet: exactly one release.
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no release after the requests stopped")
	}
	time.Sleep(200 * time.Millisecond)
	if n := freed.Load(); n != 1 {
		t.Fatalf("released %d times for one quiet period, want 1", n)
	}
	// Nothing armed while idle: no further release without a request.
	if r.armed.Load() {
		t.Fatal("timer still armed after the release")
	}
	// The next burst gets its own release.
	r.note()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no release after the second burst")
	}
}
