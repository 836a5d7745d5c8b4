package warmpool

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// member is a pool member of the tests: its ref and whether it lives.
type member struct {
	ref  string
	dead bool
}

// books counts what the pool did with the members' quotas.
type books struct {
	mu                       sync.Mutex
	kept, pending, discarded int
}

func testPool(t *testing.T, size int, resolve func() (string, error)) (*Pool[*member], *books, chan error) {
	t.Helper()
	b := &books{}
	refilled := make(chan error, 16)
	stop := make(chan struct{})
	p := New(Config[*member]{
		Size: size, Name: "bb:1", Resolve: resolve,
		Make: func(ref string) (*member, func(), func(), error) {
			return &member{ref: ref}, func() { b.mu.Lock(); b.kept++; b.mu.Unlock() }, func() {}, nil
		},
		Unpool: func(_ *member, pending bool) func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.kept--
			if pending {
				b.pending++
			}
			return func() {}
		},
		Alive:    func(s *member) bool { return !s.dead },
		Discard:  func(*member) { b.mu.Lock(); b.discarded++; b.mu.Unlock() },
		Refilled: func(err error) { refilled <- err },
		Retry:    time.Hour, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Stop: stop,
	})
	t.Cleanup(func() { close(stop); p.Close() })
	return p, b, refilled
}

// TestTakeHandsOutOnlyTheSameRef: a take for another ref gets nothing (and
// one for the same name asks for a recheck); one for the pool's ref gets a
// live member, its quota moved to pending, and a dead one is thrown away.
func TestTakeHandsOutOnlyTheSameRef(t *testing.T) {
	ref := "bb:1@sha256:a"
	p, b, refilled := testPool(t, 2, func() (string, error) { return ref, nil })
	for range 2 {
		if err := <-refilled; err != nil {
			t.Fatal(err)
		}
	}
	if _, _, ok := p.Take("bb:1@sha256:other", false); ok {
		t.Fatal("a take of another ref got a member")
	}
	p.Each(func(ready []*member) { ready[0].dead = true })
	s, release, ok := p.Take(ref, false)
	if !ok || s.dead || release == nil {
		t.Fatalf("take: %+v %v", s, ok)
	}
	if err := <-refilled; err != nil { // the refill after the take
		t.Fatal(err)
	}
	b.mu.Lock()
	pending := b.pending
	b.mu.Unlock()
	if pending != 1 {
		t.Fatalf("pending %d, want the one member handed out", pending)
	}
	if size, n := p.Status(); size != 2 || n < 1 {
		t.Fatalf("status %d/%d", n, size)
	}
}

// TestMovedNameReplacesTheMembers: once the name resolves elsewhere, a
// recheck drops the members of the old ref and refills with the new.
func TestMovedNameReplacesTheMembers(t *testing.T) {
	var mu sync.Mutex
	ref := "bb:1@sha256:a"
	p, b, refilled := testPool(t, 1, func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		return ref, nil
	})
	if err := <-refilled; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ref = "bb:1@sha256:b"
	mu.Unlock()
	if _, _, ok := p.Take(ref, true); ok {
		t.Fatal("a take of the new ref got an old member")
	}
	if err := <-refilled; err != nil {
		t.Fatal(err)
	}
	if p.Ref() != ref {
		t.Fatalf("ref %s, want %s", p.Ref(), ref)
	}
	s, _, ok := p.Take(ref, false)
	if !ok || s.ref != ref {
		t.Fatalf("take after the move: %+v %v", s, ok)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.discarded != 1 {
		t.Fatalf("%d members thrown away, want the old one", b.discarded)
	}
}

// TestFailedRefillIsReported: a resolve that fails is seen by Refilled
// and adds nothing.
func TestFailedRefillIsReported(t *testing.T) {
	p, _, refilled := testPool(t, 1, func() (string, error) { return "", errors.New("no such template") })
	if err := <-refilled; err == nil {
		t.Fatal("a failed resolve reported success")
	}
	if _, n := p.Status(); n != 0 {
		t.Fatalf("%d ready after a failed refill", n)
	}
}
