package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandhold/sandhold/internal/agent/proto"
)

// TestSleeperIdle: an unanswered request, a queued spawn or a child keeps
// an init awake.
func TestSleeperIdle(t *testing.T) {
	s := newServer(nil, proto.Setup{})
	sl := newSleeper(s, -1, 0, 0)
	if !sl.idle() {
		t.Fatal("a fresh server is not idle")
	}
	s.busy.Add(1)
	if sl.idle() {
		t.Error("idle with a request unanswered")
	}
	s.busy.Add(-1)
	s.forks <- spawnJob{}
	if sl.idle() {
		t.Error("idle with a spawn queued")
	}
	<-s.forks
	s.children[7] = 1
	if sl.idle() {
		t.Error("idle with a child")
	}
	delete(s.children, 7)
	if !sl.idle() {
		t.Error("not idle once all is done")
	}
}

// TestAloneInPidNS reads a proc-like directory: any pid but 1 is a process
// that keeps the init awake; other names are not processes.
func TestAloneInPidNS(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"1", "self", "thread-self", "sys", "meminfo"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if alone, err := aloneInPidNS(dir); err != nil || !alone {
		t.Fatalf("only pid 1: alone %v, %v", alone, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "42"), 0o700); err != nil {
		t.Fatal(err)
	}
	if alone, err := aloneInPidNS(dir); err != nil || alone {
		t.Fatalf("pid 42 too: alone %v, %v", alone, err)
	}
	if _, err := aloneInPidNS(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing directory reads as alone")
	}
}

// TestSleepRecord: attempts, sleeps and failures are counted; work under
// way is no failure; a failure is logged when its reason changes and at
// every doubling of the failures.
func TestSleepRecord(t *testing.T) {
	var r sleepRecord
	a, b := errors.New("a"), errors.New("b")
	var logged []int64
	for i, err := range []error{errNotIdle, a, a, a, a, b, b, nil, a, a} {
		if r.note(err) {
			logged = append(logged, int64(i))
		}
	}
	if r.Attempts != 10 || r.Slept != 1 || r.Failed != 8 || r.LastFailure != "a" {
		t.Fatalf("record %+v", r)
	}
	// Logged: failures 1 (a, new), 2, 4, 5 (b, new), 7 (a, new), 8; not
	// 3 and 6 (same reason, no power of two).
	if want := []int64{1, 2, 4, 5, 8, 9}; fmt.Sprint(logged) != fmt.Sprint(want) {
		t.Errorf("logged at attempts %v, want %v", logged, want)
	}
}
