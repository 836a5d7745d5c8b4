package store

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// A sandbox row's write leaves its flush to the call's audit commit only inside an open
// flush window on its own store; the pool's connections sync every commit
// again afterwards; closing a window waits for a deferred write in flight.
func TestFlushWindowDefersOnlyInsideAnOpenWindow(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	other, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()

	put := func(ctx context.Context, id string) {
		t.Helper()
		if err := s.PutSandbox(ctx, SandboxRow{ID: id, Owner: "k", Record: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	put(ctx, "plain")
	if n := s.deferredWrites.Load(); n != 0 {
		t.Fatalf("a write with no window deferred its flush (%d)", n)
	}
	wctx, closeWin := s.OpenFlushWindow(ctx)
	put(wctx, "in-window")
	if n := s.deferredWrites.Load(); n != 1 {
		t.Fatalf("writes in the window deferred: %d, want 1", n)
	}
	// A delete syncs itself even inside a window: the workspace is
	// removed right after it.
	if err := s.DeleteSandbox(wctx, "plain"); err != nil {
		t.Fatal(err)
	}
	octx, closeOther := other.OpenFlushWindow(ctx)
	put(octx, "other-store-window")
	closeOther()
	closeWin()
	closeWin() // idempotent
	put(wctx, "after-close")
	if n := s.deferredWrites.Load(); n != 1 {
		t.Fatalf("writes outside an open window of their own store, or deletes, deferred: %d in all, want 1", n)
	}
	rows, err := s.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	if len(ids) != 3 || ids[0] != "after-close" || ids[1] != "in-window" || ids[2] != "other-store-window" {
		t.Fatalf("rows %v", ids)
	}

	// Every pool connection syncs its commits again.
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range maxOpenConns {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var sync int
		if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if sync != 2 {
			t.Fatalf("pool connection %d left with synchronous=%d after a deferred write, want 2 (FULL)", len(conns)-1, sync)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil

	// Close waits for a deferred write in flight (held here as the write
	// holds it), so no write joins a window whose sync has begun.
	w2ctx, close2 := s.OpenFlushWindow(ctx)
	w := w2ctx.Value(flushWindowKey{}).(*FlushWindow)
	w.mu.RLock()
	closed := make(chan struct{})
	go func() { close2(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("the window closed while a deferred write was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	w.mu.RUnlock()
	<-closed
}
