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
	defer cancel()
	go func() { _ = d.Run(ctx) }()
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
	b.ResetTimer()
	for range b.N {
		call("/v1/sandboxes/"+id+"/exec", map[string]any{"argv": []string{"/bin/true"}})
	}
}
