package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// Opener opens a handle on one database; called more than once it opens
// more handles on the same database (standing in for several processes or
// nodes).
type Opener func(ctx context.Context) (store.Store, error)

// Run is the store conformance suite: every back end passes the same
// tests. newDB makes a fresh, empty database for one test and returns its
// opener (skipping t where the back end is unavailable).
func Run(t *testing.T, newDB func(t *testing.T) Opener) {
	open := func(t *testing.T) (store.Store, Opener) {
		t.Helper()
		op := newDB(t)
		s, err := op(context.Background())
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, op
	}
	t.Run("Keys", func(t *testing.T) { s, _ := open(t); testKeys(t, s) })
	t.Run("Settings", func(t *testing.T) { s, _ := open(t); testSettings(t, s) })
	t.Run("AuditQuery", func(t *testing.T) { s, _ := open(t); testAuditQuery(t, s) })
	t.Run("AuditSinceWithTheClockOutOfOrder", func(t *testing.T) { s, _ := open(t); testAuditSinceOutOfOrder(t, s) })
	t.Run("AppendAuditAbortsOnBeforeCommitError", func(t *testing.T) { s, _ := open(t); testAppendAbort(t, s) })
	t.Run("AppendAuditBuildErrorAborts", func(t *testing.T) { s, _ := open(t); testBuildAbort(t, s) })
	t.Run("ConcurrentAppendersAcrossHandles", func(t *testing.T) { s, op := open(t); testConcurrentAppenders(t, s, op) })
	t.Run("AppendAuditBatch", func(t *testing.T) { s, _ := open(t); testAppendBatch(t, s) })
	t.Run("ConcurrentBatchesAcrossHandles", func(t *testing.T) { s, op := open(t); testConcurrentBatches(t, s, op) })
	t.Run("SandboxRecords", func(t *testing.T) { s, _ := open(t); testSandboxRecords(t, s) })
	t.Run("ReopenKeepsData", func(t *testing.T) { s, op := open(t); testReopen(t, s, op) })
	t.Run("KeyRateLimits", func(t *testing.T) { s, op := open(t); testKeyRateLimits(t, s, op) })
	t.Run("AuditHead", func(t *testing.T) { s, _ := open(t); testAuditHead(t, s) })
	t.Run("TrimAudit", func(t *testing.T) { s, _ := open(t); testTrimAudit(t, s) })
	t.Run("AuditSize", func(t *testing.T) { s, _ := open(t); testAuditSize(t, s) })
}

func testKeys(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC()
	k := store.Key{ID: "key_1", Name: "ci", Role: "agent", Hash: []byte("h1"), CreatedAt: now}
	if err := s.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  store.Key
		want error
	}{
		{"duplicate id", store.Key{ID: "key_1", Name: "x", Role: "agent", Hash: []byte("h2"), CreatedAt: now}, store.ErrConflict},
		{"duplicate hash", store.Key{ID: "key_2", Name: "x", Role: "agent", Hash: []byte("h1"), CreatedAt: now}, store.ErrConflict},
		{"fresh", store.Key{ID: "key_3", Name: "y", Role: "viewer", Hash: []byte("h3"), CreatedAt: now}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.CreateKey(ctx, tc.key); !errors.Is(err, tc.want) {
				t.Fatalf("CreateKey = %v, want %v", err, tc.want)
			}
		})
	}
	got, err := s.KeyByHash(ctx, []byte("h1"))
	if err != nil || got.ID != "key_1" || got.Revoked() || !got.CreatedAt.Equal(now) {
		t.Fatalf("KeyByHash = %+v, %v", got, err)
	}
	if _, err := s.KeyByHash(ctx, []byte("nope")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing hash: %v", err)
	}
	if got, err := s.KeyByID(ctx, "key_3"); err != nil || got.Role != "viewer" {
		t.Fatalf("KeyByID = %+v, %v", got, err)
	}
	if _, err := s.KeyByID(ctx, "key_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing id: %v", err)
	}
	r1, err := s.RevokeKey(ctx, "key_1", now.Add(time.Second))
	if err != nil || !r1.Revoked() {
		t.Fatalf("revoke: %+v %v", r1, err)
	}
	r2, err := s.RevokeKey(ctx, "key_1", now.Add(time.Hour))
	if err != nil || !r2.RevokedAt.Equal(r1.RevokedAt) {
		t.Fatalf("second revoke changed time: %v -> %v (%v)", r1.RevokedAt, r2.RevokedAt, err)
	}
	if _, err := s.RevokeKey(ctx, "key_nope", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke missing: %v", err)
	}
	list, err := s.ListKeys(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	// PutKey replaces the hash of an existing id.
	if err := s.PutKey(ctx, store.Key{ID: "key_3", Name: "y", Role: "admin", Hash: []byte("h4"), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if k, err := s.KeyByHash(ctx, []byte("h4")); err != nil || k.Role != "admin" {
		t.Fatalf("after put: %+v %v", k, err)
	}
	// PutKey onto another key's hash is a conflict, not a silent steal.
	if err := s.PutKey(ctx, store.Key{ID: "key_9", Name: "z", Role: "admin", Hash: []byte("h4"), CreatedAt: now}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("PutKey with a taken hash = %v, want conflict", err)
	}
}

func testSettings(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.GetSetting(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("absent: %v", err)
	}
	for _, v := range []string{"one", "two", ""} {
		if err := s.PutSetting(ctx, "a", []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSetting(ctx, "a")
		if err != nil || string(got) != v || got == nil {
			t.Fatalf("got %q (nil=%v) %v, want %q", got, got == nil, err, v)
		}
	}
	if err := s.PutSetting(ctx, "b", []byte{0, 0xff, '\''}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSetting(ctx, "b"); err != nil || string(got) != "\x00\xff'" {
		t.Fatalf("binary value = %q %v", got, err)
	}
}

// AppendN appends one record per action, seq = last+1.
func AppendN(t testing.TB, s store.Store, actions ...string) {
	t.Helper()
	for _, a := range actions {
		_, err := s.AppendAudit(context.Background(), func(last store.AuditRecord, ok bool) (store.AuditRecord, error) {
			seq := int64(1)
			if ok {
				seq = last.Seq + 1
			}
			return store.AuditRecord{Seq: seq, Time: time.Now(), Actor: "key_" + a[:1], Action: a, Hash: fmt.Sprint(seq)}, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
}

func testAuditQuery(t *testing.T, s store.Store) {
	ctx := context.Background()
	AppendN(t, s, "auth.success", "auth.failure", "authz.deny", "key.create", "auth_x.y", "auth")
	tests := []struct {
		name   string
		filter store.AuditFilter
		want   []int64
	}{
		{"all", store.AuditFilter{}, []int64{1, 2, 3, 4, 5, 6}},
		{"dotted prefix", store.AuditFilter{Action: "auth"}, []int64{1, 2, 6}},
		{"exact", store.AuditFilter{Action: "auth.failure"}, []int64{2}},
		{"several actions", store.AuditFilter{Actions: []string{"key", "authz"}}, []int64{3, 4}},
		{"underscore is not a wildcard", store.AuditFilter{Action: "auth_x"}, []int64{5}},
		{"percent is literal", store.AuditFilter{Action: "%"}, nil},
		{"quote is data", store.AuditFilter{Action: "a' OR '1'='1"}, nil},
		{"actor", store.AuditFilter{Actor: "key_k"}, []int64{4}},
		{"actor and action", store.AuditFilter{Actor: "key_a", Action: "auth"}, []int64{1, 2, 6}},
		{"after seq", store.AuditFilter{AfterSeq: 4}, []int64{5, 6}},
		{"limit desc", store.AuditFilter{Limit: 2, Descending: true}, []int64{6, 5}},
		{"future since", store.AuditFilter{Since: time.Now().Add(time.Hour)}, nil},
		{"past since", store.AuditFilter{Since: time.Now().Add(-time.Hour), Limit: 1}, []int64{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := s.QueryAudit(ctx, tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range recs {
				got = append(got, r.Seq)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	last, err := s.LastAudit(ctx)
	if err != nil || last.Seq != 6 || last.Action != "auth" || last.Hash != "6" {
		t.Fatalf("last = %+v %v", last, err)
	}
	var n int
	if err := s.ScanAudit(ctx, func(store.AuditRecord) error { n++; return nil }); err != nil || n != 6 {
		t.Fatalf("scan: %d %v", n, err)
	}
	stop := errors.New("stop")
	if err := s.ScanAudit(ctx, func(store.AuditRecord) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("scan did not return fn's error: %v", err)
	}
}

func testAppendAbort(t *testing.T, s store.Store) {
	boom := errors.New("boom")
	_, err := s.AppendAudit(context.Background(), func(store.AuditRecord, bool) (store.AuditRecord, error) {
		return store.AuditRecord{Seq: 1, Time: time.Now(), Action: "x"}, nil
	}, func(store.AuditRecord) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, err := s.LastAudit(context.Background()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record survived an aborted append: %v", err)
	}
}

func testBuildAbort(t *testing.T, s store.Store) {
	AppendN(t, s, "a")
	boom := errors.New("boom")
	if _, err := s.AppendAudit(context.Background(), func(store.AuditRecord, bool) (store.AuditRecord, error) {
		return store.AuditRecord{}, boom
	}, nil); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	// A duplicate seq is a conflict, not a second record.
	if _, err := s.AppendAudit(context.Background(), func(store.AuditRecord, bool) (store.AuditRecord, error) {
		return store.AuditRecord{Seq: 1, Time: time.Now(), Action: "dup"}, nil
	}, nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate seq: %v", err)
	}
	if last, err := s.LastAudit(context.Background()); err != nil || last.Seq != 1 || last.Action != "a" {
		t.Fatalf("last = %+v %v", last, err)
	}
}

func testConcurrentAppenders(t *testing.T, a store.Store, open Opener) {
	// Several handles on one database stand in for the server and a CLI
	// process, or for several nodes.
	const handles, per = 3, 25
	all := []store.Store{a}
	for range handles - 1 {
		b, err := open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		all = append(all, b)
	}
	errc := make(chan error, handles)
	for _, s := range all {
		go func(s store.Store) {
			for range per {
				_, err := s.AppendAudit(context.Background(), func(last store.AuditRecord, ok bool) (store.AuditRecord, error) {
					return store.AuditRecord{Seq: last.Seq + 1, Time: time.Now(), Action: "x", PrevHash: last.Hash, Hash: fmt.Sprint(last.Seq + 1)}, nil
				}, nil)
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}(s)
	}
	for range handles {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	last, err := a.LastAudit(context.Background())
	if err != nil || last.Seq != handles*per {
		t.Fatalf("last seq = %d (%v), want %d: appends were lost or forked", last.Seq, err, handles*per)
	}
	prev := ""
	if err := a.ScanAudit(context.Background(), func(r store.AuditRecord) error {
		if r.PrevHash != prev {
			return fmt.Errorf("record %d links to %q, want %q", r.Seq, r.PrevHash, prev)
		}
		prev = r.Hash
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func testSandboxRecords(t *testing.T, st store.Store) {
	ctx := context.Background()
	if err := st.PutSandbox(ctx, store.SandboxRow{ID: "sb1", Owner: "k1", Record: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSandbox(ctx, store.SandboxRow{ID: "sb1", Owner: "k1", Record: []byte(`{"a":2}`)}); err != nil {
		t.Fatal(err)
	}
	rows, err := st.ListSandboxes(ctx)
	if err != nil || len(rows) != 1 || string(rows[0].Record) != `{"a":2}` || rows[0].Owner != "k1" {
		t.Fatalf("rows = %+v, %v", rows, err)
	}
	if err := st.DeleteSandbox(ctx, "sb1"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSandbox(ctx, "sb1"); err != nil {
		t.Fatalf("deleting an absent record: %v", err)
	}
	if rows, _ := st.ListSandboxes(ctx); len(rows) != 0 {
		t.Fatalf("left %+v", rows)
	}
}

func testReopen(t *testing.T, s store.Store, open Opener) {
	ctx := context.Background()
	if err := s.PutSetting(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	AppendN(t, s, "a", "b")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := open(ctx)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer func() { _ = s2.Close() }()
	if v, err := s2.GetSetting(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("setting after reopen: %q %v", v, err)
	}
	if last, err := s2.LastAudit(ctx); err != nil || last.Seq != 2 {
		t.Fatalf("last after reopen: %d %v", last.Seq, err)
	}
}

func testAuditHead(t *testing.T, s store.Store) {
	ctx := context.Background()
	if h, ok, err := s.AuditHead(ctx); err != nil || !ok || h != (store.AuditHead{}) {
		t.Fatalf("empty chain's head = %+v ok=%v err=%v, want the row at 0", h, ok, err)
	}
	AppendN(t, s, "a", "b", "c")
	h, ok, err := s.AuditHead(ctx)
	if err != nil || !ok || h.Seq != 3 || h.Hash != "3" {
		t.Fatalf("head = %+v ok=%v err=%v, want 3/3", h, ok, err)
	}
	// An aborted append leaves the head where it was.
	_, _ = s.AppendAudit(ctx, func(last store.AuditRecord, _ bool) (store.AuditRecord, error) {
		return store.AuditRecord{Seq: last.Seq + 1, Time: time.Now(), Action: "x", Hash: "4"}, nil
	}, func(store.AuditRecord) error { return errors.New("abort") })
	if h, _, _ := s.AuditHead(ctx); h.Seq != 3 {
		t.Fatalf("aborted append moved the head to %d", h.Seq)
	}
}

// chainOf builds n records that follow last, linked by PrevHash.
func chainOf(last store.AuditRecord, n int, action string) []store.AuditRecord {
	out := make([]store.AuditRecord, n)
	for i := range out {
		seq := last.Seq + 1
		out[i] = store.AuditRecord{Seq: seq, Time: time.Now(), Action: action, PrevHash: last.Hash, Hash: fmt.Sprint(seq)}
		last = out[i]
	}
	return out
}

func testAppendBatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	AppendN(t, s, "a")
	var sealed store.AuditRecord
	recs, err := s.AppendAuditBatch(ctx, func(last store.AuditRecord, ok bool) ([]store.AuditRecord, error) {
		if !ok || last.Seq != 1 {
			return nil, fmt.Errorf("last = %d ok=%v, want 1", last.Seq, ok)
		}
		return chainOf(last, 5, "batch"), nil
	}, func(r store.AuditRecord) error { sealed = r; return nil })
	if err != nil || len(recs) != 5 || recs[0].Seq != 2 || recs[4].Seq != 6 {
		t.Fatalf("batch = %d records (%v)", len(recs), err)
	}
	if sealed.Seq != 6 || sealed.Hash != "6" {
		t.Fatalf("beforeCommit saw %d, want the batch's last record 6", sealed.Seq)
	}
	// All or nothing: a batch whose fourth record takes a stored seq
	// leaves no record of it behind; so does a failing beforeCommit.
	boom := errors.New("boom")
	tests := []struct {
		name   string
		build  func(last store.AuditRecord) []store.AuditRecord
		before func(store.AuditRecord) error
		want   error
	}{
		{"duplicate seq in the middle", func(last store.AuditRecord) []store.AuditRecord {
			b := chainOf(last, 5, "dup")
			b[3].Seq = 2
			return b
		}, nil, store.ErrConflict},
		{"beforeCommit fails", func(last store.AuditRecord) []store.AuditRecord { return chainOf(last, 3, "x") },
			func(store.AuditRecord) error { return boom }, boom},
		{"empty batch", func(store.AuditRecord) []store.AuditRecord { return nil }, nil, nil},
		{"batch over the cap", func(last store.AuditRecord) []store.AuditRecord {
			return chainOf(last, store.MaxAuditBatch+1, "big")
		}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.AppendAuditBatch(ctx, func(last store.AuditRecord, _ bool) ([]store.AuditRecord, error) {
				return tc.build(last), nil
			}, tc.before)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if last, err := s.LastAudit(ctx); err != nil || last.Seq != 6 || last.Action != "batch" {
				t.Fatalf("last = %d %q (%v): part of a failed batch was stored", last.Seq, last.Action, err)
			}
		})
	}
	if h, _, err := s.AuditHead(ctx); err != nil || h.Seq != 6 || h.Hash != "6" {
		t.Fatalf("head = %+v (%v), want the last good batch's end", h, err)
	}
}

func testConcurrentBatches(t *testing.T, a store.Store, open Opener) {
	const handles, batches, size = 3, 10, 7
	all := []store.Store{a}
	for range handles - 1 {
		b, err := open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		all = append(all, b)
	}
	errc := make(chan error, handles)
	for _, s := range all {
		go func(s store.Store) {
			for range batches {
				if _, err := s.AppendAuditBatch(context.Background(), func(last store.AuditRecord, _ bool) ([]store.AuditRecord, error) {
					return chainOf(last, size, "x"), nil
				}, nil); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}(s)
	}
	for range handles {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	var n int64
	prev := ""
	if err := a.ScanAudit(context.Background(), func(r store.AuditRecord) error {
		n++
		if r.Seq != n || r.PrevHash != prev {
			return fmt.Errorf("record %d (#%d) links to %q, want %q", r.Seq, n, r.PrevHash, prev)
		}
		prev = r.Hash
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != handles*batches*size {
		t.Fatalf("%d records, want %d", n, handles*batches*size)
	}
}

// testAuditSinceOutOfOrder: a since filter returns exactly the records at
// or after its time, in either order, with other filters and pages, on a
// log long enough for the SQLite back end's seq bound (audit_marks) and
// whose times are not monotonic in seq: the clock steps back, and one
// early record is from the future.
func testAuditSinceOutOfOrder(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.Unix(1_800_000_000, 0)
	at := func(seq int64) time.Time {
		switch {
		case seq == 700:
			return base.Add(48 * time.Hour) // a clock far ahead, once
		case seq%97 == 0:
			return base.Add(time.Duration(seq)*time.Second - 2*time.Hour) // stepped back
		}
		return base.Add(time.Duration(seq) * time.Second)
	}
	const n = 3*1024 + 300
	for next := int64(1); next <= n; {
		_, err := s.AppendAuditBatch(ctx, func(last store.AuditRecord, ok bool) ([]store.AuditRecord, error) {
			var recs []store.AuditRecord
			for len(recs) < store.MaxAuditBatch && next+int64(len(recs)) <= n {
				seq := next + int64(len(recs))
				recs = append(recs, store.AuditRecord{Seq: seq, Time: at(seq), Actor: fmt.Sprintf("key_%d", seq%3), Action: "sandbox.exec", Hash: fmt.Sprint(seq)})
			}
			return recs, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		next += store.MaxAuditBatch
	}
	want := func(f store.AuditFilter) []int64 {
		var out []int64
		for seq := int64(1); seq <= n; seq++ {
			if at(seq).Before(f.Since) || seq <= f.AfterSeq || (f.Actor != "" && f.Actor != fmt.Sprintf("key_%d", seq%3)) {
				continue
			}
			out = append(out, seq)
		}
		if f.Descending {
			slices.Reverse(out)
		}
		if f.Limit > 0 && len(out) > f.Limit {
			out = out[:f.Limit]
		}
		return out
	}
	for _, since := range []time.Duration{0, 500 * time.Second, 1500 * time.Second, 2500 * time.Second, 3000 * time.Second, 3100 * time.Second, 3395 * time.Second, 47 * time.Hour, 49 * time.Hour, -time.Hour} {
		for _, f := range []store.AuditFilter{
			{Limit: 50}, {Limit: 50, Descending: true}, {Limit: store.MaxAuditPage}, {Limit: store.MaxAuditPage, Descending: true},
			{Limit: 20, Actor: "key_1"}, {Limit: 20, AfterSeq: 2000}, {Limit: 20, AfterSeq: 3200, Descending: true},
		} {
			f.Since = base.Add(since)
			recs, err := s.QueryAudit(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range recs {
				got = append(got, r.Seq)
			}
			if w := want(f); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("since base%+v %+v: got %d records %v…, want %d %v…", since, f, len(got), head(got), len(w), head(w))
			}
		}
	}
}

func head(s []int64) []int64 { return s[:min(len(s), 8)] }

func testTrimAudit(t *testing.T, s store.Store) {
	ctx := context.Background()
	AppendN(t, s, "a", "b", "c", "d", "e", "f")
	anchor := func(last store.AuditRecord, ok bool) ([]store.AuditRecord, error) {
		if !ok {
			return nil, errors.New("no last record")
		}
		return chainOf(last, 1, "anchor"), nil
	}
	tests := []struct {
		name          string
		from, through int64
	}{
		{"from is not the first record", 2, 3},
		{"through the last record", 1, 6},
		{"through before from", 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.TrimAudit(ctx, tc.from, tc.through, anchor); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("TrimAudit(%d, %d) = %v, want ErrConflict", tc.from, tc.through, err)
			}
			if first, err := s.FirstAudit(ctx); err != nil || first.Seq != 1 {
				t.Fatalf("first = %d (%v): a refused trim removed records", first.Seq, err)
			}
		})
	}
	recs, err := s.TrimAudit(ctx, 1, 4, anchor)
	if err != nil || len(recs) != 1 || recs[0].Seq != 7 {
		t.Fatalf("trim = %+v, %v", recs, err)
	}
	if first, err := s.FirstAudit(ctx); err != nil || first.Seq != 5 {
		t.Fatalf("first after trim = %d (%v), want 5", first.Seq, err)
	}
	if h, ok, err := s.AuditHead(ctx); err != nil || !ok || h.Seq != 7 || h.Hash != "7" {
		t.Fatalf("head after trim = %+v ok=%v (%v), want the anchor 7", h, ok, err)
	}
	if sz, err := s.AuditSize(ctx); err != nil || sz.Records != 3 {
		t.Fatalf("size after trim = %+v (%v), want 3 records", sz, err)
	}
	// A failing build keeps every record.
	if _, err := s.TrimAudit(ctx, 5, 5, func(store.AuditRecord, bool) ([]store.AuditRecord, error) {
		return nil, errors.New("boom")
	}); err == nil {
		t.Fatal("a failed build trimmed")
	}
	if first, _ := s.FirstAudit(ctx); first.Seq != 5 {
		t.Fatalf("first = %d after a failed trim, want 5", first.Seq)
	}
}

func testAuditSize(t *testing.T, s store.Store) {
	ctx := context.Background()
	if sz, err := s.AuditSize(ctx); err != nil || sz != (store.AuditSize{}) {
		t.Fatalf("empty: %+v %v", sz, err)
	}
	AppendN(t, s, "a", "b", "c")
	sz, err := s.AuditSize(ctx)
	if err != nil || sz.Records != 3 || sz.Bytes <= 3*int64(len("key_a")) {
		t.Fatalf("size = %+v (%v), want 3 records and their bytes", sz, err)
	}
}
