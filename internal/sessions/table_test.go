package sessions

import (
	"errors"
	"strings"
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
	add(t, tb, "k", Key{Kind: "shell", Sandbox: "sb1", ID: "a"}, old)
	add(t, tb, "k", Key{Kind: "shell", Sandbox: "sb2", ID: "b"}, newer)
	add(t, tb, "other", Key{Kind: "shell", Sandbox: "sb1", ID: "x"}, &fake{used: now.Add(-time.Hour)})
	add(t, tb, "k", Key{Kind: "shell", Sandbox: "sb1", ID: "c"}, &fake{used: now})
	waitClosed(t, old)
	if _, _, ok := tb.Get(Key{Kind: "shell", Sandbox: "sb1", Owner: "k", ID: "a"}); ok {
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
	add(t, tb, "k1", Key{Kind: "shell", Sandbox: "sb", ID: "a"}, a)
	add(t, tb, "k2", Key{Kind: "bash", Sandbox: "sb", ID: "b"}, b)
	_, err := tb.Reserve("k3", Key{Kind: "shell", Sandbox: "sb", ID: "c"}, 0)
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Kind != fault.RateLimited || fe.RetryAfter <= 0 {
		t.Fatalf("all busy: got %v, want a rate-limit refusal with Retry-After", err)
	}
	// Another sandbox is not affected.
	add(t, tb, "k3", Key{Kind: "shell", Sandbox: "sb-other", ID: "c"}, &fake{})
	// An ended session is evicted before an idle one.
	a.busy, a.ended = false, true
	b.busy = false
	add(t, tb, "k3", Key{Kind: "shell", Sandbox: "sb", ID: "d"}, &fake{})
	waitClosed(t, a)
	if b.closed.Load() != 0 {
		t.Error("live idle session closed before the ended one")
	}
}

func TestReapUsesPerSessionIdleTimeout(t *testing.T) {
	tb := New[*fake](Limits{Idle: time.Hour, EndedKeep: time.Minute})
	now := time.Now()
	short := &fake{used: now.Add(-2 * time.Minute)}
	r, err := tb.Reserve("k", Key{Kind: "shell", Sandbox: "sb", ID: "short"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r.Commit(short)
	long := &fake{used: now.Add(-2 * time.Minute)}
	add(t, tb, "k", Key{Kind: "shell", Sandbox: "sb", ID: "long"}, long)
	busy := &fake{busy: true, used: now.Add(-2 * time.Hour)}
	add(t, tb, "k", Key{Kind: "shell", Sandbox: "sb", ID: "busy"}, busy)
	ended := &fake{ended: true, used: now.Add(-2 * time.Minute)}
	add(t, tb, "k", Key{Kind: "shell", Sandbox: "sb", ID: "ended"}, ended)

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
	add(t, tb, "k", Key{Kind: "shell", Sandbox: "sb", ID: "1"}, mine[0])
	add(t, tb, "k", Key{Kind: "python", Sandbox: "sb2", ID: "1"}, mine[1])
	theirs := &fake{}
	add(t, tb, "j", Key{Kind: "shell", Sandbox: "sb", ID: "2"}, theirs)
	pending, err := tb.Reserve("k", Key{Kind: "bash", Sandbox: "sb", ID: "3"}, 0)
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
	add(t, tb, "k", Key{Kind: "shell", Sandbox: "sb", ID: "1"}, &fake{})
	if _, err := tb.Reserve("k", Key{Kind: "shell", Sandbox: "sb", ID: "1"}, 0); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
}

// TestIDsAreScopedToTheirOwner (issue 14): two keys may each hold a
// session of the same kind, sandbox and id; each finds its own, neither
// is refused nor learns of the other, and revoking one leaves the other.
func TestIDsAreScopedToTheirOwner(t *testing.T) {
	tb := New[*fake](Limits{})
	alice, bob := &fake{used: time.Now()}, &fake{used: time.Now()}
	k := Key{Kind: "code", Sandbox: "sb", ID: "c1"}
	add(t, tb, "alice", k, alice)
	add(t, tb, "bob", k, bob) // not ErrExists: bob's c1 is another session
	for owner, want := range map[string]*fake{"alice": alice, "bob": bob} {
		got, o, ok := tb.Get(Key{Kind: "code", Sandbox: "sb", Owner: owner, ID: "c1"})
		if !ok || got != want || o != owner {
			t.Fatalf("%s's c1: %v %q %v", owner, got, o, ok)
		}
	}
	if _, _, ok := tb.Get(Key{Kind: "code", Sandbox: "sb", Owner: "carol", ID: "c1"}); ok {
		t.Fatal("carol found a c1 she never made")
	}
	if rows := tb.Find("code", "sb", "c1"); len(rows) != 2 || rows[0].Owner != "alice" || rows[1].Owner != "bob" {
		t.Fatalf("Find: %+v", rows)
	}
	if _, err := tb.Reserve("alice", k, 0); !errors.Is(err, ErrExists) {
		t.Fatalf("alice's second c1: %v, want ErrExists", err)
	}
	if n := tb.Revoke("alice"); n != 1 || alice.closed.Load() != 1 || bob.closed.Load() != 0 {
		t.Fatalf("revoke alice: %d closed, alice %d bob %d", n, alice.closed.Load(), bob.closed.Load())
	}
}

func TestCheckID(t *testing.T) {
	for _, c := range []struct {
		id string
		ok bool
	}{
		{"c1", true}, {"A.b_c:d-e", true}, {strings.Repeat("x", 128), true},
		{"", false}, {"-x", false}, {".x", false}, {"../x", false}, {"a/b", false}, {"a b", false},
		{strings.Repeat("x", 129), false}, {"x\x00", false}, {"é", false},
	} {
		if err := CheckID("session_id", c.id); (err == nil) != c.ok {
			t.Errorf("CheckID(%q): %v, want ok=%v", c.id, err, c.ok)
		} else if err != nil && fault.FieldOf(err) != "session_id" {
			t.Errorf("CheckID(%q) names field %q", c.id, fault.FieldOf(err))
		}
	}
}
