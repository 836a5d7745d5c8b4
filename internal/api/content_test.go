package api

import (
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/config"
)

func TestContentHostTarget(t *testing.T) {
	s := &Server{cfg: config.Config{ContentDomain: "sandbox.test"}}
	for _, tc := range []struct {
		host string
		ok   bool
		id   string
		port int
	}{
		{"3000-sbabc.sandbox.test", true, "sbabc", 3000},
		{"3000-sbabc.sandbox.test:8080", true, "sbabc", 3000},
		{"9222-SBABC.Sandbox.Test.", true, "sbabc", 9222},
		{"sandbox.test", false, "", 0},
		{"3000-sbabc.x.sandbox.test", false, "", 0},
		{"03000-sbabc.sandbox.test", false, "", 0},
		{"70000-sbabc.sandbox.test", false, "", 0},
		{"3000-.sandbox.test", false, "", 0},
		{"sbabc-3000.sandbox.test", false, "", 0},
		{"3000-sb_abc.sandbox.test", false, "", 0},
		{"3000-sbabc.sandbox.test.evil", false, "", 0},
		{"3000-sbabcsandbox.test", false, "", 0},
		{"127.0.0.1:8080", false, "", 0},
	} {
		t.Run(tc.host, func(t *testing.T) {
			got, ok := s.contentHostTarget(tc.host)
			if ok != tc.ok || got.id != tc.id || got.port != tc.port {
				t.Fatalf("%q: %+v %v, want %v %s %d", tc.host, got, ok, tc.ok, tc.id, tc.port)
			}
		})
	}
	if _, ok := (&Server{}).contentHostTarget("3000-sbabc.sandbox.test"); ok {
		t.Fatal("a content host without a content domain")
	}
}

func TestContentSessionsAreBounded(t *testing.T) {
	now := time.Unix(0, 0)
	cs := newContentSessions(func() time.Time { return now })
	tgt := contentTarget{id: "sbx", port: 3000}
	var first string
	for i := 0; i <= maxContentSessionsPerKey; i++ {
		now = now.Add(time.Millisecond)
		id, err := cs.create("k", "h", tgt)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = id
		}
	}
	if n := cs.count(); n != maxContentSessionsPerKey {
		t.Fatalf("%d sessions of one key, want %d", n, maxContentSessionsPerKey)
	}
	if _, ok := cs.lookup(first, "h", tgt); ok {
		t.Fatal("the oldest session survived the cap")
	}
	id, _ := cs.create("k2", "h", tgt)
	now = now.Add(contentSessionIdle)
	if _, ok := cs.lookup(id, "h", tgt); ok {
		t.Fatal("an idle session lived on")
	}
}
