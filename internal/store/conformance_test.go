package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
	"github.com/sandhold/sandhold/internal/store/storetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(auditCrashChild())
	}
	if os.Getenv(leaseChildEnv) != "" {
		os.Exit(leaseChild())
	}
	os.Exit(pgtest.Main(m))
}

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		path := filepath.Join(t.TempDir(), store.FileName)
		return func(ctx context.Context) (store.Store, error) { return store.OpenSQLite(ctx, path) }
	})
}

func TestPostgresConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		url := pgtest.URL(t)
		return func(ctx context.Context) (store.Store, error) { return store.OpenPostgres(ctx, url) }
	})
}
