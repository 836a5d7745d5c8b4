package sessions

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
)

type fake struct {
	busy, ended bool
	used        time.Time
	closed      atomic.Int32
}

func (f *fake) Busy() bool          { return f.busy }
func (f *fake) LastUsed() time.Time { return f.used }
func (f *fake) Ended() bool         { return f.ended }
func (f *fake) Close()              { f.closed.Add(1) }

func add(t *testing.T, tb *Table[*fake], owner string, k Key, f *fake) {
	t.Helper()
	r, err := tb.Reserve(owner, k, 0)
	if err != nil {
		t.Fatalf("reserve %v: %v", k, err)
	}
	if !r.Commit(f) {
		t.Fatalf("commit %v failed", k)
	}
}

// waitClosed waits for an asynchronous Close (eviction closes in a goroutine).
func waitClosed(t *testing.T, f *fake) {
	t.Helper()
	for i := 0; i < 1000 && f.closed.Load() == 0; i++ {
		time.Sleep(time.Millisecond)
	}
	if f.closed.Load() == 0 {
		t.Fatal("session not closed")
	}
}

func TestPerKeyCapEvictsLeastRecentlyUsedIdle(t *testing.T) {
	tb := New[*fake](Limits{PerKey: 2, PerSandbox: 10})
	now := time.Now()
	old := &fake{used: now.Add(-time.Minute)}
	newer := &fake{used: now}
	add(t, tb, "k", Key{"shell", "sb1", "a"}, old)
	add(t, tb, "k", Key{"shell", "sb2", "b"}, newer)
	add(t, tb, "other", Key{"shell", "sb1", "x"}, &fake{used: now.Add(-time.Hour)})
	add(t, tb, "k", Key{"shell", "sb1", "c"}, &fake{used: now})
	waitClosed(t, old)
	if _, _, ok := tb.Get(Key{"shell", "sb1", "a"}); ok {
		t.Error("evicted session still in the table")
	}
	if newer.closed.Load() != 0 {
		t.Error("the more recently used session was closed")
	}
}

func TestPerSandboxCapAcrossKeysAndBusyRefusal(t *testing.T) {
	tb := New[*fake](Limits{PerKey: 10, PerSandbox: 2})
	a := &fake{busy: true, used: time.Now().Add(-time.Hour)}
	b := &fake{busy: true, used: time.Now()}
	add(t, tb, "k1", Key{"shell", "sb", "a"}, a)
	add(t, tb, "k2", Key{"bash", "sb", "b"}, b)
	_, err := tb.Reserve("k3", Key{"shell", "sb", "c"}, 0)
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Kind != fault.RateLimited || fe.RetryAfter <= 0 {
		t.Fatalf("all busy: got %v, want a rate-limit refusal with Retry-After", err)
	}
	// Another sandbox is not affected.
	add(t, tb, "k3", Key{"shell", "sb-other", "c"}, &fake{})
	// An ended session is evicted before an idle one.
	a.busy, a.ended = false, true
	b.busy = false
	add(t, tb, "k3", Key{"shell", "sb", "d"}, &fake{})
	waitClosed(t, a)
	if b.closed.Load() != 0 {
		t.Error("live idle session closed before the ended one")
	}
}

func TestReapUsesPerSessionIdleTimeout(t *testing.T) {
	tb := New[*fake](Limits{Idle: time.Hour, EndedKeep: time.Minute})
	now := time.Now()
	short := &fake{used: now.Add(-2 * time.Minute)}
	r, err := tb.Reserve("k", Key{"shell", "sb", "short"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r.Commit(short)
	long := &fake{used: now.Add(-2 * time.Minute)}
	add(t, tb, "k", Key{"shell", "sb", "long"}, long)
	busy := &fake{busy: true, used: now.Add(-2 * time.Hour)}
	add(t, tb, "k", Key{"shell", "sb", "busy"}, busy)
	ended := &fake{ended: true, used: now.Add(-2 * time.Minute)}
	add(t, tb, "k", Key{"shell", "sb", "ended"}, ended)

	got := tb.Reap(now)
	if len(got) != 2 || short.closed.Load() != 1 || ended.closed.Load() != 1 {
		t.Fatalf("reaped %d; short closed %d, ended closed %d", len(got), short.closed.Load(), ended.closed.Load())
	}
	if long.closed.Load()+busy.closed.Load() != 0 || tb.Len() != 2 {
		t.Fatalf("reaped a session within its timeout or a busy one (len %d)", tb.Len())
	}
}

func TestRevokeClosesOwnerSessionsAndPendingReservations(t *testing.T) {
	tb := New[*fake](Limits{})
	mine := []*fake{{}, {}}
	add(t, tb, "k", Key{"shell", "sb", "1"}, mine[0])
	add(t, tb, "k", Key{"python", "sb2", "1"}, mine[1])
	theirs := &fake{}
	add(t, tb, "j", Key{"shell", "sb", "2"}, theirs)
	pending, err := tb.Reserve("k", Key{"bash", "sb", "3"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := tb.Revoke("k"); n != 2 {
		t.Fatalf("revoked %d, want 2", n)
	}
	for _, f := range mine {
		if f.closed.Load() != 1 {
			t.Error("owner's session not closed")
		}
	}
	if theirs.closed.Load() != 0 {
		t.Error("another key's session closed")
	}
	// A session that finishes starting after the revocation is closed at once.
	late := &fake{}
	if pending.Commit(late) || late.closed.Load() != 1 {
		t.Error("a session started for a revoked key was kept")
	}
}

func TestReserveRefusesDuplicateKey(t *testing.T) {
	tb := New[*fake](Limits{})
	add(t, tb, "k", Key{"shell", "sb", "1"}, &fake{})
	if _, err := tb.Reserve("k", Key{"shell", "sb", "1"}, 0); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
}
