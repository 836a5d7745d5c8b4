package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func openTest(t *testing.T) *SQLite {
	t.Helper()
	s, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestOpenCreatesPrivateFileAndMigrates(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("db mode = %v, want 0600", fi.Mode().Perm())
	}
	v, err := s.SchemaVersion(context.Background())
	if err != nil || v != len(migrations) {
		t.Errorf("schema version = %d, %v; want %d", v, err, len(migrations))
	}
	// Re-opening applies nothing and keeps the version.
	s2, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	_ = s2.Close()
}

func TestRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`INSERT INTO schema_migrations VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := Open(context.Background(), dir); err == nil {
		t.Fatal("opened a database with a newer schema")
	}
}

func TestKeys(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	now := time.Now().UTC()
	k := Key{ID: "key_1", Name: "ci", Role: "agent", Hash: []byte("h1"), CreatedAt: now}
	if err := s.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  Key
		want error
	}{
		{"duplicate id", Key{ID: "key_1", Name: "x", Role: "agent", Hash: []byte("h2"), CreatedAt: now}, ErrConflict},
		{"duplicate hash", Key{ID: "key_2", Name: "x", Role: "agent", Hash: []byte("h1"), CreatedAt: now}, ErrConflict},
		{"fresh", Key{ID: "key_3", Name: "y", Role: "viewer", Hash: []byte("h3"), CreatedAt: now}, nil},
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
	if _, err := s.KeyByHash(ctx, []byte("nope")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing hash: %v", err)
	}
	r1, err := s.RevokeKey(ctx, "key_1", now.Add(time.Second))
	if err != nil || !r1.Revoked() {
		t.Fatalf("revoke: %+v %v", r1, err)
	}
	r2, err := s.RevokeKey(ctx, "key_1", now.Add(time.Hour))
	if err != nil || !r2.RevokedAt.Equal(r1.RevokedAt) {
		t.Fatalf("second revoke changed time: %v -> %v (%v)", r1.RevokedAt, r2.RevokedAt, err)
	}
	if _, err := s.RevokeKey(ctx, "key_nope", now); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke missing: %v", err)
	}
	list, err := s.ListKeys(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	// PutKey replaces the hash of an existing id.
	if err := s.PutKey(ctx, Key{ID: "key_3", Name: "y", Role: "admin", Hash: []byte("h4"), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if k, err := s.KeyByHash(ctx, []byte("h4")); err != nil || k.Role != "admin" {
		t.Fatalf("after put: %+v %v", k, err)
	}
}

func TestSettings(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if _, err := s.GetSetting(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent: %v", err)
	}
	for _, v := range []string{"one", "two", ""} {
		if err := s.PutSetting(ctx, "a", []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSetting(ctx, "a")
		if err != nil || string(got) != v {
			t.Fatalf("got %q %v, want %q", got, err, v)
		}
	}
}

func appendN(t *testing.T, s *SQLite, actions ...string) {
	t.Helper()
	for _, a := range actions {
		_, err := s.AppendAudit(context.Background(), func(last AuditRecord, ok bool) (AuditRecord, error) {
			seq := int64(1)
			if ok {
				seq = last.Seq + 1
			}
			return AuditRecord{Seq: seq, Time: time.Now(), Actor: "key_" + a[:1], Action: a, Hash: fmt.Sprint(seq)}, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestAuditQuery(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	appendN(t, s, "auth.success", "auth.failure", "authz.deny", "key.create", "auth_x.y", "auth")
	tests := []struct {
		name   string
		filter AuditFilter
		want   []int64
	}{
		{"all", AuditFilter{}, []int64{1, 2, 3, 4, 5, 6}},
		{"dotted prefix", AuditFilter{Action: "auth"}, []int64{1, 2, 6}},
		{"exact", AuditFilter{Action: "auth.failure"}, []int64{2}},
		{"underscore is not a wildcard", AuditFilter{Action: "auth_x"}, []int64{5}},
		{"percent is literal", AuditFilter{Action: "%"}, nil},
		{"actor", AuditFilter{Actor: "key_k"}, []int64{4}},
		{"after seq", AuditFilter{AfterSeq: 4}, []int64{5, 6}},
		{"limit desc", AuditFilter{Limit: 2, Descending: true}, []int64{6, 5}},
		{"future since", AuditFilter{Since: time.Now().Add(time.Hour)}, nil},
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
	if err != nil || last.Seq != 6 {
		t.Fatalf("last = %d %v", last.Seq, err)
	}
	var n int
	if err := s.ScanAudit(ctx, func(AuditRecord) error { n++; return nil }); err != nil || n != 6 {
		t.Fatalf("scan: %d %v", n, err)
	}
}

func TestAppendAuditAbortsOnBeforeCommitError(t *testing.T) {
	s := openTest(t)
	boom := errors.New("boom")
	_, err := s.AppendAudit(context.Background(), func(AuditRecord, bool) (AuditRecord, error) {
		return AuditRecord{Seq: 1, Time: time.Now(), Action: "x"}, nil
	}, func(AuditRecord) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, err := s.LastAudit(context.Background()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("record survived an aborted append: %v", err)
	}
}

func TestConcurrentAppendersAcrossHandles(t *testing.T) {
	// Two handles on one file stand in for the server and a CLI process.
	dir := t.TempDir()
	a, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	b, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	const per = 25
	errc := make(chan error, 2)
	for _, s := range []*SQLite{a, b} {
		go func(s *SQLite) {
			for i := 0; i < per; i++ {
				_, err := s.AppendAudit(context.Background(), func(last AuditRecord, ok bool) (AuditRecord, error) {
					return AuditRecord{Seq: last.Seq + 1, Time: time.Now(), Action: "x"}, nil
				}, nil)
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}(s)
	}
	for i := 0; i < 2; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	last, err := a.LastAudit(context.Background())
	if err != nil || last.Seq != 2*per {
		t.Fatalf("last seq = %d (%v), want %d: appends were lost or forked", last.Seq, err, 2*per)
	}
}

func TestSandboxRecords(t *testing.T) {
	st, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	ctx := context.Background()
	if err := st.PutSandbox(ctx, SandboxRow{ID: "sb1", Owner: "k1", Record: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSandbox(ctx, SandboxRow{ID: "sb1", Owner: "k1", Record: []byte(`{"a":2}`)}); err != nil {
		t.Fatal(err)
	}
	rows, err := st.ListSandboxes(ctx)
	if err != nil || len(rows) != 1 || string(rows[0].Record) != `{"a":2}` {
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
