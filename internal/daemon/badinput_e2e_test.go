package daemon

import (
	"testing"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/testenv"
)

// TestBadExecInputIsNever500: every malformed or unusable field of an exec
// is a 4xx naming it, never an internal error.
func TestBadExecInputIsNever500(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.DisableRateLimit = true })
	admin := s.d.AdminKey()
	var sb struct{ ID string }
	expectOK(t, s.do("POST", "/v1/sandboxes", admin, map[string]any{}, nil), 201, &sb)
	path := "/v1/sandboxes/" + sb.ID + "/exec"
	expectOK(t, s.do("POST", path, admin, map[string]any{"command": "echo x > /workspace/plain"}, nil), 200, nil)
	for _, c := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"cwd is a descriptor of the init", map[string]any{"command": "true", "cwd": "/proc/self/fd/3"}, "cwd"},
		{"cwd is a file", map[string]any{"command": "true", "cwd": "/workspace/plain"}, "cwd"},
		{"cwd is relative", map[string]any{"command": "true", "cwd": "workspace"}, "cwd"},
		{"cwd does not exist", map[string]any{"command": "true", "cwd": "/nope"}, ""},
		{"command not found", map[string]any{"argv": []string{"/nope/x"}}, ""},
		{"argv names a directory", map[string]any{"argv": []string{"/workspace"}}, ""},
		{"negative timeout", map[string]any{"command": "true", "timeout": -1}, "timeout"},
		{"bad env name", map[string]any{"command": "true", "env": map[string]string{"1X": "y"}}, "env"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s.do("POST", path, admin, c.body, nil)
			if r.status < 400 || r.status >= 500 {
				t.Fatalf("%d %s, want a 4xx", r.status, r.raw)
			}
			if c.field != "" {
				if d := r.errData(t); d.Field != c.field && !contains(string(r.raw), c.field) {
					t.Fatalf("answer %s does not name %q", r.raw, c.field)
				}
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
