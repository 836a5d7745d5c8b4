package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/sandhold/sandhold/internal/config"
)

// BenchmarkExecRTT measures one exec round trip through the real HTTP API
// (auth, dispatcher, guard, audit, sandbox, init).
func BenchmarkExecRTT(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	cfg := config.Default()
	cfg.DataDir = b.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.WarmPool = 0
	cfg.DisableRateLimit = true
	d, err := New(cfg, WithStderr(io.Discard), WithLogger(NewLogger(io.Discard, "error")))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	// Stop the server (unmounting its sandboxes) before the data dir is removed.
	b.Cleanup(func() { cancel(); <-done })
	<-d.Ready()
	base := "http://" + d.Addr()
	call := func(path string, body any) map[string]any {
		bb, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(bb))
		req.Header.Set("Authorization", "Bearer "+d.AdminKey())
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var env map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&env)
		if resp.StatusCode != 200 && resp.StatusCode != 201 {
			b.Fatalf("%s: %d %v", path, resp.StatusCode, env)
		}
		return env
	}
	id := call("/v1/sandboxes", map[string]any{})["data"].(map[string]any)["id"].(string)
	for range 10 {
		call("/v1/sandboxes/"+id+"/exec", map[string]any{"argv": []string{"/bin/true"}})
	}
	get := func(path string, auth bool) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+d.AdminKey())
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	// The parts of a round trip: HTTP alone, HTTP with the key check and a
	// dispatched read, and the whole exec.
	b.Run("healthz", func(b *testing.B) {
		for range b.N {
			get("/healthz", false)
		}
	})
	b.Run("info", func(b *testing.B) {
		for range b.N {
			get("/v1/sandboxes/"+id, true)
		}
	})
	b.Run("exec", func(b *testing.B) {
		for range b.N {
			call("/v1/sandboxes/"+id+"/exec", map[string]any{"argv": []string{"/bin/true"}})
		}
	})
}
