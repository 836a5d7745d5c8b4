package aiocompat_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/aiocompat/aiotest"
	"github.com/sandhold/sandhold/internal/config"
)

// tsDir finds test/aio-ts from the module root.
func tsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// The module root is a few levels up; 32 bounds the walk.
	for range 32 {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "test", "aio-ts")
		}
		dir = filepath.Dir(dir)
	}
	t.Fatal("no go.mod above the working directory")
	return ""
}

// TestGeneratedTypeScriptClient generates a TypeScript client from AIO's
// OpenAPI document with openapi-typescript (types) + openapi-fetch
// (runtime) — generators nobody here wrote — type-checks test/aio-ts's
// script against it with tsc, and runs it with node against the real
// server: code execution (stateless, stateful at /sandboxes/{id}),
// jupyter, shell, bash, files, then one call per further namespace —
// nodejs, mcp, skills, util, sandbox hooks/observe, tickets/auth, the
// preview proxy, proxy (excludes and a masked upstream on a sandbox in
// network mode proxy), and the browser where Chromium runs in the sandbox.
func TestGeneratedTypeScriptClient(t *testing.T) {
	dir := tsDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	for _, need := range []string{"node_modules/openapi-fetch", "node_modules/.bin/openapi-typescript", "node_modules/.bin/tsc"} {
		if _, err := os.Stat(filepath.Join(dir, need)); err != nil {
			t.Skipf("%s missing in test/aio-ts: run `make deps` (npm ci there)", need)
		}
	}
	spec, err := aiotest.Find()
	if err != nil {
		t.Skipf("AIO reference OpenAPI document not available (%v)", err)
	}
	run := func(timeout time.Duration, env []string, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// The generated types are produced here, never committed.
	run(2*time.Minute, nil, filepath.Join(dir, "node_modules/.bin/openapi-typescript"), spec, "--default-non-nullable", "false", "-o", "generated/aio.ts")
	run(2*time.Minute, nil, filepath.Join(dir, "node_modules/.bin/tsc"), "-p", ".")

	// 8005: the port the client's preview check serves on.
	s := startServer(t, func(c *config.Config) { c.PreviewPorts = []uint16{8005} })
	st, _, body := s.call("POST", "/v1/sandboxes", "application/json", []byte(`{"name":"ts-client"}`))
	var created struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &created); err != nil || st != 201 {
		t.Fatalf("create sandbox: %d %s", st, body)
	}
	out := run(3*time.Minute, []string{"SANDHOLD_URL=" + s.base, "SANDHOLD_KEY=" + s.key, "SANDHOLD_SANDBOX=" + created.Data.ID},
		node, "build/client.js")
	t.Logf("client output:\n%s", out)
	if !strings.Contains(out, "ok code/execute stateful x + 1") || !strings.Contains(out, "ok preview proxy") ||
		!strings.Contains(out, "ok proxy/upstream get is masked") {
		t.Fatalf("the client did not reach the stateful check:\n%s", out)
	}
}
