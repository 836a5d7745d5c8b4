package workspace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/aiocompat/aiotest"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/sandbox"
)

type server struct {
	t    testing.TB
	d    *daemon.Daemon
	base string
	key  string
	aio  *aiotest.Validator
	c    *daemontest.Client
}

func start(t testing.TB, mutate func(*config.Config)) *server {
	t.Helper()
	d := daemontest.Start(t, mutate)
	c := daemontest.NewClient(t, d)
	return &server{t: t, d: d, base: c.Base, key: c.Key, aio: aiotest.Load(t), c: c}
}

type reply struct {
	status int
	raw    []byte
	env    struct {
		Success bool            `json:"success"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
}

func (r reply) fileError(t *testing.T) fileError {
	t.Helper()
	var fe fileError
	if err := json.Unmarshal(r.env.Data, &fe); err != nil || fe.ErrorType == "" {
		t.Fatalf("status %d: data is not a FileOperationError: %s", r.status, r.raw)
	}
	return fe
}

type fileError struct {
	Path      string  `json:"path"`
	Operation string  `json:"operation"`
	Message   string  `json:"message"`
	ErrorType string  `json:"error_type"`
	ErrnoName *string `json:"errno_name"`
}

// do sends one request. aioPath, when set, is AIO's path template of the
// route: the response is validated against AIO's schema.
func (s *server) do(method, path string, body any, aioPath string) reply {
	s.t.Helper()
	cr := s.c.Do(method, path, body)
	r := reply{status: cr.Status, raw: cr.Raw}
	if err := json.Unmarshal(cr.Raw, &r.env); err != nil {
		s.t.Fatalf("%s %s: status %d, body not JSON: %s", method, path, cr.Status, cr.Raw)
	}
	if aioPath != "" {
		s.aio.Check(s.t, method, aioPath, r.status, cr.Raw)
	}
	return r
}

// newSandbox creates a sandbox and returns its id.
func (s *server) newSandbox() string {
	s.t.Helper()
	return s.c.NewSandbox(map[string]any{"name": "files"})
}

func (s *server) sandbox(id string) *sandbox.Sandbox {
	s.t.Helper()
	sb, err := s.d.Sandboxes().Get(sandbox.Caller{Admin: true}, id)
	if err != nil {
		s.t.Fatal(err)
	}
	return sb
}

// sh runs a shell script in the sandbox (as the sandbox user) and returns
// its stdout; fixtures are made this way, "with the shell", as an agent
// would make them.
func (s *server) sh(id, script string) string {
	s.t.Helper()
	e, err := s.sandbox(id).Exec(context.Background(), sandbox.ExecRequest{Command: script, Actor: "test"})
	if err != nil {
		s.t.Fatalf("exec: %v", err)
	}
	<-e.Done()
	res := e.Result()
	if res.ExitCode == nil || *res.ExitCode != 0 {
		s.t.Fatalf("script failed: %+v\n%s", res, script)
	}
	return res.Stdout
}

// fixture builds a tree below dir in os.Root's test language: "d/" a
// directory, "f" a file (content: its name), "a => b" a symlink a to b,
// plus "a == b", a hard link a to b.
func fixture(dir string, entries []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\nmkdir -p %s\ncd %s\n", dir, dir)
	for _, e := range entries {
		switch {
		case strings.Contains(e, " => "):
			a, tgt, _ := strings.Cut(e, " => ")
			fmt.Fprintf(&b, "ln -s '%s' '%s'\n", tgt, a)
		case strings.Contains(e, " == "):
			a, tgt, _ := strings.Cut(e, " == ")
			fmt.Fprintf(&b, "ln '%s' '%s'\n", tgt, a)
		case strings.HasSuffix(e, "/"):
			fmt.Fprintf(&b, "mkdir -p '%s'\n", e)
		default:
			fmt.Fprintf(&b, "printf '%%s' '%s' > '%s'\n", e, e)
		}
	}
	return b.String()
}

func adminCaller(s *server) auth.Caller {
	return auth.Caller{KeyID: "test-admin", Role: auth.RoleAdmin}
}
