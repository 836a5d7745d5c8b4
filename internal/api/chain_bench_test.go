package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/redact"
	"github.com/sandhold/sandhold/internal/store"
)

// BenchmarkMiddlewareChain is the server's own cost of a request that
// authenticates and then finds no route (404): the whole middleware chain
// (request id, access log and metrics, Host/Origin, body limit, the key
// check, route roles, request shape, AIO marking) with nothing behind it —
// no dispatcher call, no audit record. The access log goes through the
// daemon's redacting JSON handler at info level, to io.Discard.
func BenchmarkMiddlewareChain(b *testing.B) {
	for _, cached := range []bool{false, true} {
		name := "store"
		if cached {
			name = "keycache"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			st, err := store.Open(context.Background(), dir)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			lg := audit.New(st, dir)
			var opts []auth.Option
			if cached {
				opts = append(opts, auth.WithKeyCache(filepath.Join(dir, auth.KeyEpochFile)))
			}
			svc := auth.NewService(st, lg, opts...)
			b.Cleanup(func() { _ = svc.Close() })
			key := "test-admin-key-0123456789abcdefghijkl"
			if err := svc.EnsureAdmin(context.Background(), key); err != nil {
				b.Fatal(err)
			}
			cfg := config.Config{DataDir: dir, Listen: "127.0.0.1:0", MaxBody: 1 << 20}.WithDefaults()
			logger := slog.New(redact.NewHandler(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})))
			s, err := New(Deps{Config: cfg, Auth: svc, Audit: lg, Logger: logger, Registry: prometheus.NewRegistry()})
			if err != nil {
				b.Fatal(err)
			}
			useFoundation(s, dispatch.New(dispatch.Options{Audit: lg}))
			h := s.Handler()
			do := func() {
				req := httptest.NewRequest(http.MethodGet, "/v1/sandboxes/sb_0123456789ab/nothing-here", nil)
				req.Host = "127.0.0.1:8080"
				req.RemoteAddr = "127.0.0.1:50000"
				req.Header.Set("Authorization", "Bearer "+key)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusNotFound {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			do() // the first success is audited (auth.success); the rest are not
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				do()
			}
			// CPU time per request (all threads: GC included), a figure a
			// loaded machine distorts far less than the wall time.
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
