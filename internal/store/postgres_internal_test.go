package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// The two back ends share one schema history: a step added to one and not
// the other would make the "same versioned migrations" drift apart.
func TestPostgresMigrationsMatchSQLite(t *testing.T) {
	if len(pgMigrations) != len(migrations) {
		t.Fatalf("postgres has %d migrations, sqlite %d", len(pgMigrations), len(migrations))
	}
	for i := range migrations {
		if pgMigrations[i].version != migrations[i].version || pgMigrations[i].name != migrations[i].name {
			t.Errorf("step %d: postgres %d/%s, sqlite %d/%s", i, pgMigrations[i].version, pgMigrations[i].name,
				migrations[i].version, migrations[i].name)
		}
	}
}

// Nodes starting together all open the same fresh database: the advisory
// lock lets one migrate and the others find the schema current.
func TestPostgresConcurrentStartMigratesOnce(t *testing.T) {
	url := pgtest.URL(t)
	const nodes = 4
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	stores := make([]*Postgres, nodes)
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = OpenPostgres(context.Background(), url)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		defer func() { _ = stores[i].Close() }()
	}
	var applied int
	if err := stores[0].pool.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != len(pgMigrations) {
		t.Fatalf("schema_migrations has %d rows, want %d", applied, len(pgMigrations))
	}
	if v, err := stores[3].SchemaVersion(context.Background()); err != nil || v != len(pgMigrations) {
		t.Fatalf("version = %d %v", v, err)
	}
}

func TestPostgresRefusesNewerSchema(t *testing.T) {
	url := pgtest.URL(t)
	s, err := OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(context.Background(), `INSERT INTO schema_migrations VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := OpenPostgres(context.Background(), url); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("opened a database with a newer schema: %v", err)
	}
}

func TestPostgresOpenErrorHidesPassword(t *testing.T) {
	for _, url := range []string{
		"postgres://sandhold:hunter2secret@127.0.0.1:1/db?connect_timeout=2&sslmode=disable",
		"postgres://sandhold:hunter2secret@[::1:1/db", // unparsable
		"host=127.0.0.1 port=1 user=sandhold password=hunter2secret connect_timeout=2 sslmode=disable",
	} {
		_, err := OpenPostgres(context.Background(), url)
		if err == nil {
			t.Fatalf("opened %q", url)
		}
		if strings.Contains(err.Error(), "hunter2secret") {
			t.Fatalf("error carries the password: %v", err)
		}
	}
}

// Each node sees and changes only its own sandbox records in the shared
// table: a node restarting must not adopt, reap or overwrite another's.
func TestPostgresSandboxRecordsAreScopedToTheirNode(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	a, err := OpenPostgres(ctx, url, WithNode("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	b, err := OpenPostgres(ctx, url, WithNode("node-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	if err := a.PutSandbox(ctx, SandboxRow{ID: "sb1", Owner: "k", Record: []byte(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	if rows, err := b.ListSandboxes(ctx); err != nil || len(rows) != 0 {
		t.Fatalf("node b lists %+v %v", rows, err)
	}
	if err := b.PutSandbox(ctx, SandboxRow{ID: "sb1", Owner: "x", Record: []byte(`{"v":2}`)}); !errors.Is(err, ErrConflict) {
		t.Fatalf("node b overwrote node a's record: %v", err)
	}
	if err := b.DeleteSandbox(ctx, "sb1"); err != nil {
		t.Fatal(err)
	}
	rows, err := a.ListSandboxes(ctx)
	if err != nil || len(rows) != 1 || string(rows[0].Record) != `{"v":1}` {
		t.Fatalf("node a's record after node b's attempts: %+v %v", rows, err)
	}
	// The per-key cap counts the key's sandboxes on the other nodes.
	if n, err := b.CountOwnedElsewhere(ctx, "k"); err != nil || n != 1 {
		t.Fatalf("node b counts %d of k's sandboxes elsewhere (%v), want 1", n, err)
	}
	if n, err := a.CountOwnedElsewhere(ctx, "k"); err != nil || n != 0 {
		t.Fatalf("node a counts %d of k's sandboxes elsewhere (%v), want 0", n, err)
	}
}

// TestRestartOnItsDataDirTakesTheNameAtOnce: a node that died (its data
// dir's lock gone with it, its lease row not yet expired) restarted on the
// same data dir takes its name at once; a server on another data dir is
// still refused, and the dead holder's renewal is lost.
func TestRestartOnItsDataDirTakesTheNameAtOnce(t *testing.T) {
	ctx := context.Background()
	url, dir := pgtest.URL(t), t.TempDir()
	open := func(d string) *Postgres {
		st, err := OpenPostgres(ctx, url, WithNode("node-a"), WithDataDir(d))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	h := func(id string) Holder { return Holder{ID: id, Host: "h", PID: 1} }
	first, err := open(dir).HoldNode(ctx, h("first"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The process dies: the kernel drops its data dir lock; the row stays.
	first.(*pgLease).unlockDir()
	again, err := open(dir).HoldNode(ctx, h("again"), time.Hour)
	if err != nil {
		t.Fatalf("a restart on the same data dir: %v", err)
	}
	defer func() { _ = again.Release(ctx) }()
	if _, err := open(t.TempDir()).HoldNode(ctx, h("elsewhere"), time.Hour); !errors.Is(err, ErrNodeHeld) {
		t.Fatalf("another data dir under the same name: %v, want ErrNodeHeld", err)
	}
	if err := first.Renew(ctx); !errors.Is(err, ErrNodeLost) {
		t.Fatalf("the dead holder's renewal: %v, want ErrNodeLost", err)
	}
}
