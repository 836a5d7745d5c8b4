package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// TestPostgresTakeOverSandbox: a record moves to another node only while
// its node is dead and the record is the one the taker read; once moved,
// the old node can neither write it nor list it, and a third node cannot
// take it from the old one.
func TestPostgresTakeOverSandbox(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	open := func(name string) *Postgres {
		s, err := OpenPostgres(ctx, url, WithNode(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b, c := open("node-a"), open("node-b"), open("node-c")
	old := SandboxRow{ID: "sb1", Owner: "k", Record: []byte(`{"slot":1}`)}
	if err := a.PutSandbox(ctx, old); err != nil {
		t.Fatal(err)
	}
	next := SandboxRow{ID: "sb1", Owner: "k", Record: []byte(`{"slot":7}`)}
	if err := a.Heartbeat(ctx, Beat{Address: "127.0.0.1:1", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name         string
		from         string
		deadAfter    time.Duration
		old, updated SandboxRow
	}{
		{"NodeAlive", "node-a", time.Hour, old, next},
		{"RecordChanged", "node-a", 0, SandboxRow{ID: "sb1", Owner: "k", Record: []byte(`{"slot":2}`)}, next},
		{"WrongNode", "node-c", 0, old, next},
		{"OwnerChanged", "node-a", 0, old, SandboxRow{ID: "sb1", Owner: "other", Record: next.Record}},
		{"RecordUnchanged", "node-a", 0, old, old},
		{"FromItself", "node-b", 0, old, next},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			if err := b.TakeOverSandbox(ctx, "sb1", tc.from, tc.deadAfter, tc.old, tc.updated); err == nil {
				t.Fatal("taken over")
			}
			if _, node, err := b.SandboxOn(ctx, "sb1"); err != nil || node != "node-a" {
				t.Fatalf("the record is on %q (%v)", node, err)
			}
		})
	}
	// node-a's last beat is older than a zero deadAfter: dead.
	if err := b.TakeOverSandbox(ctx, "sb1", "node-a", 0, old, next); err != nil {
		t.Fatal(err)
	}
	row, node, err := c.SandboxOn(ctx, "sb1")
	if err != nil || node != "node-b" || string(row.Record) != `{"slot":7}` {
		t.Fatalf("after the take-over: %q %s %v", node, row.Record, err)
	}
	if rows, _ := a.ListSandboxes(ctx); len(rows) != 0 {
		t.Errorf("the old node still lists %+v", rows)
	}
	if err := a.PutSandbox(ctx, old); !errors.Is(err, ErrConflict) {
		t.Errorf("the old node wrote the moved record: %v", err)
	}
	if err := c.TakeOverSandbox(ctx, "sb1", "node-a", 0, old, next); !errors.Is(err, ErrConflict) {
		t.Errorf("a third node took it from the old one: %v", err)
	}
}
