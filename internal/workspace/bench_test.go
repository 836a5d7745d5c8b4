package workspace_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/workspace"
)

// Benchmarks of file calls through the real server (HTTP, auth,
// dispatcher, audit, init round trips). Run: go test -run '^$' -bench .
// ./internal/workspace. They measure; nothing here asserts a time.
func BenchmarkFileCalls(b *testing.B) {
	s := start(b, nil)
	id := s.newSandbox()
	s.sh(id, "mkdir -p /workspace/b/tree && cd /workspace/b/tree && for d in $(seq 1 20); do mkdir d$d; for f in $(seq 1 50); do printf 'line one\\nneedle %d\\nline three\\n' $f > d$d/f$f.txt; done; done && head -c 4096 /dev/urandom | base64 > /workspace/b/small.txt")
	p := "/sandboxes/" + id + "/v1/file/"
	content := strings.Repeat("x", 4096)
	cases := []struct {
		name, route string
		body        func(i int) any
	}{
		{"read 4KiB", "read", func(int) any { return map[string]any{"file": "/workspace/b/small.txt"} }},
		{"write 4KiB atomic", "write", func(i int) any {
			return map[string]any{"file": fmt.Sprintf("/workspace/b/w%d.txt", i%50), "content": content}
		}},
		{"list 50", "list", func(int) any { return map[string]any{"path": "/workspace/b/tree/d1"} }},
		{"glob 1000 files", "glob", func(int) any {
			return map[string]any{"path": "/workspace/b/tree", "pattern": "**/*.txt", "max_results": 100}
		}},
		{"grep 1000 files", "grep", func(int) any {
			return map[string]any{"path": "/workspace/b/tree", "pattern": "needle 7$", "max_results": 100}
		}},
	}
	// For comparison: GNU grep over the same tree, run inside the
	// sandbox (one execution per iteration, no HTTP).
	b.Run("exec grep -rn (comparison)", func(b *testing.B) {
		s.t = b
		for range b.N {
			s.sh(id, "grep -rn 'needle 7$' /workspace/b/tree > /dev/null")
		}
	})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			s.t = b
			for i := range b.N {
				r := s.do("POST", p+c.route, c.body(i), "")
				if r.status != 200 {
					b.Fatalf("%d %s", r.status, r.raw)
				}
			}
		})
	}
}

// BenchmarkServiceCalls: the same calls on the service directly (no
// HTTP, dispatcher or audit): what the init round trips cost.
func BenchmarkServiceCalls(b *testing.B) {
	s := start(b, nil)
	id := s.newSandbox()
	s.sh(id, "mkdir -p /workspace/b && head -c 4096 /dev/urandom | base64 > /workspace/b/small.txt")
	sb := s.sandbox(id)
	svc := workspace.New(workspace.Config{Resolve: func(context.Context, auth.Caller, string) (workspace.FS, error) { return sb, nil }})
	defer svc.Close()
	ctx, c := context.Background(), adminCaller(s)
	content := strings.Repeat("x", 4096)
	b.Run("read 4KiB", func(b *testing.B) {
		for range b.N {
			if _, err := svc.Read(ctx, c, workspace.ReadArgs{File: "/workspace/b/small.txt"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write 4KiB atomic", func(b *testing.B) {
		for i := range b.N {
			if _, err := svc.Write(ctx, c, workspace.WriteArgs{File: fmt.Sprintf("/workspace/b/w%d", i%50), Content: content}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("resolve only (refused sensitive path)", func(b *testing.B) {
		for range b.N {
			if _, err := svc.Read(ctx, c, workspace.ReadArgs{File: "/workspace/b/.env"}); err == nil {
				b.Fatal("not refused")
			}
		}
	})
}
