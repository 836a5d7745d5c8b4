package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

type note struct{ ch, payload string }

func TestPostgresWatchChanges(t *testing.T) {
	url := pgtest.URL(t)
	nodes := openNodes(t, url, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan note, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		nodes[0].st.WatchChanges(ctx, func(ch, p string) { got <- note{ch, p} })
	}()
	// Listening starts with a resync.
	expect := func(what string, want note, write func()) {
		t.Helper()
		write()
		select {
		case n := <-got:
			if n != want {
				t.Fatalf("%s: got %+v, want %+v", what, n, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no notification", what)
		}
	}
	expect("start", note{store.ChannelResync, ""}, func() {})
	expect("setting", note{store.ChannelSettings, "control"}, func() {
		if err := nodes[1].st.PutSetting(ctx, "control", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	})
	if err := nodes[1].st.CreateKey(ctx, store.Key{ID: "key_x", Name: "x", Role: "agent", Hash: []byte("h"), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	expect("revoke", note{store.ChannelKeys, "key_x"}, func() {
		if _, err := nodes[1].st.RevokeKey(ctx, "key_x", time.Now()); err != nil {
			t.Fatal(err)
		}
	})
	// The listening connection dies: the watcher reconnects and asks for a
	// resync (notifications in between are lost).
	rawExec(t, url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`)
	expect("reconnect", note{store.ChannelResync, ""}, func() {})
	cancel()
	<-done
}
