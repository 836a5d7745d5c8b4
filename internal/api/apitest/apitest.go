// Package apitest builds an api.Server for the tests of the packages that
// mount routes on it (internal/api/aio, internal/api/relay): a store in a
// temporary directory, an admin and an agent key, and a dispatcher with the
// foundation's tools (keys, tickets, audit) wired as the daemon wires them.
package apitest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/dispatch/audittools"
	"github.com/sandhold/sandhold/internal/dispatch/authtools"
	"github.com/sandhold/sandhold/internal/store"
)

// AdminKey is the server's admin key.
const AdminKey = "operator-chosen-admin-key-0123456789"

// Server is a test server with its keys and dispatcher.
type Server struct {
	*api.Server
	// AgentKey is a key of the agent role.
	AgentKey string
	D        *dispatch.Dispatcher
	Auth     *auth.Service
	Audit    *audit.Log
	Config   config.Config
}

// New builds a server; configure, when set, changes the configuration
// (after its defaults) before the server is made.
func New(tb testing.TB, configure func(*config.Config)) *Server {
	tb.Helper()
	dir := tb.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	lg := audit.New(st, dir)
	svc := auth.NewService(st, lg)
	if err := svc.EnsureAdmin(context.Background(), AdminKey); err != nil {
		tb.Fatal(err)
	}
	_, key, err := svc.CreateKey(context.Background(), auth.Caller{Role: auth.RoleAdmin}, "agent", auth.RoleAgent)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := config.Config{DataDir: dir, Listen: "127.0.0.1:0"}.WithDefaults()
	if configure != nil {
		configure(&cfg)
	}
	s, err := api.New(api.Deps{Config: cfg, Auth: svc, Audit: lg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()})
	if err != nil {
		tb.Fatal(err)
	}
	d := dispatch.New(dispatch.Options{Audit: lg})
	s.UseDispatcher(d)
	for _, t := range append(authtools.Tools(svc), audittools.Tools(lg)...) {
		d.MustRegister(t)
	}
	return &Server{Server: s, AgentKey: key, D: d, Auth: svc, Audit: lg, Config: cfg}
}
