package workspace_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
)

// escapeFixture is the tree every escape case runs against, below
// /workspace/esc, made with the shell as an agent would make it.
var escapeFixture = []string{
	"d/",
	"d/f",
	".ssh/",
	".ssh/id_rsa",
	"shadow => /etc/shadow",          // a symlink at a host-secret name
	"passwd => /etc/passwd",          // out of the workspace, readable
	"out => /tmp/outside",            // a directory out of the workspace
	"outfile => /tmp/outside/secret", // a file out of the workspace
	"innocent => .ssh/id_rsa",        // an innocent name for a sensitive file
	"newkey => .ssh/new_key",         // dangling, into a sensitive directory
	"magic => /proc/self/root",       // a magic link behind a plain one
	"loop => loop",                   // ELOOP
	"hl == .ssh/id_rsa",              // a hard link to a sensitive file
}

// escapeCase is a path every file operation gets. refused: the call must
// fail with a 4xx and a FileOperationError; otherwise it may succeed, but
// only inside the workspace (checked after all calls).
type escapeCase struct {
	name    string
	path    string
	refused bool
}

var escapeCases = []escapeCase{
	{"dotdot", "/workspace/esc/../../etc/passwd", true},
	{"dotdot below a dir", "/workspace/esc/d/../../../etc/shadow", true},
	{"relative", "workspace/esc/d/f", true},
	{"single dot", "/workspace/esc/./d/f", true},
	{"percent-encoded dotdot is a name", "/workspace/esc/%2e%2e/%2e%2e/etc/passwd", false},
	{"NUL byte", "/workspace/esc/d/f\x00.txt", true},
	{"overlong", "/workspace/esc/" + strings.Repeat("a/", 2100) + "f", true},
	{"long component", "/workspace/esc/" + strings.Repeat("a", 300), true},
	{"symlink to /etc/shadow", "/workspace/esc/shadow", true},
	{"symlink out of the workspace", "/workspace/esc/passwd", true},
	{"through a dir symlink out", "/workspace/esc/out/x", true},
	{"file symlink out", "/workspace/esc/outfile", true},
	{"symlink to a sensitive file", "/workspace/esc/innocent", true},
	{"dangling symlink into .ssh", "/workspace/esc/newkey", true},
	{"magic link behind a symlink", "/workspace/esc/magic/etc/passwd", true},
	{"symlink loop", "/workspace/esc/loop", true},
	{"hard link to a sensitive file", "/workspace/esc/hl", true},
	{"/proc/self/root", "/proc/self/root/etc/passwd", true},
	{"/proc/1 (the init)", "/proc/1/environ", true},
	{"/proc/self/fd", "/proc/self/fd/3", true},
	{"sensitive dir", "/workspace/esc/.ssh/id_rsa", true},
	{"sensitive name, missing", "/workspace/esc/.env", true},
	{"/etc/shadow itself", "/etc/shadow", true},
}

// fileOps are every file operation, as a route and a body for a path.
var fileOps = []struct {
	name, route string
	body        func(p, marker string) map[string]any
}{
	{"read", "read", func(p, _ string) map[string]any { return map[string]any{"file": p} }},
	{"read lines", "read", func(p, _ string) map[string]any { return map[string]any{"file": p, "start_line": 0, "end_line": 1} }},
	{"write", "write", func(p, m string) map[string]any { return map[string]any{"file": p, "content": m} }},
	{"write append", "write", func(p, m string) map[string]any { return map[string]any{"file": p, "content": m, "append": true} }},
	{"write base64", "write", func(p, m string) map[string]any {
		return map[string]any{"file": p, "content": "RVNDQVBFLWI2NA==", "encoding": "base64"} // "ESCAPE-b64"
	}},
	{"replace", "replace", func(p, m string) map[string]any { return map[string]any{"file": p, "old_str": "s", "new_str": m} }},
	{"search", "search", func(p, _ string) map[string]any { return map[string]any{"file": p, "regex": "."} }},
	{"find", "find", func(p, _ string) map[string]any { return map[string]any{"path": p, "glob": "*"} }},
	{"grep", "grep", func(p, _ string) map[string]any { return map[string]any{"path": p, "pattern": "."} }},
	{"glob", "glob", func(p, _ string) map[string]any { return map[string]any{"path": p, "pattern": "**/*"} }},
	{"list", "list", func(p, _ string) map[string]any { return map[string]any{"path": p} }},
	{"list recursive", "list", func(p, _ string) map[string]any { return map[string]any{"path": p, "recursive": true} }},
	{"editor view", "str_replace_editor", func(p, _ string) map[string]any { return map[string]any{"command": "view", "path": p} }},
	{"editor create", "str_replace_editor", func(p, m string) map[string]any {
		return map[string]any{"command": "create", "path": p, "file_text": m}
	}},
	{"editor str_replace", "str_replace_editor", func(p, m string) map[string]any {
		return map[string]any{"command": "str_replace", "path": p, "old_str": "s", "new_str": m, "replace_mode": "ALL"}
	}},
	{"editor insert", "str_replace_editor", func(p, m string) map[string]any {
		return map[string]any{"command": "insert", "path": p, "insert_line": 0, "new_str": m}
	}},
	{"editor undo", "str_replace_editor", func(p, _ string) map[string]any { return map[string]any{"command": "undo_edit", "path": p} }},
	{"watch", "watch", func(p, _ string) map[string]any { return map[string]any{"path": p} }},
	{"watch wait", "watch/wait", func(p, _ string) map[string]any { return map[string]any{"path": p, "timeout": 1} }},
}

var errorTypes = map[string]bool{"not_found": true, "permission_denied": true, "invalid_target": true, "already_exists": true,
	"invalid_path": true, "read_only_filesystem": true, "no_space_left": true, "decode_error": true, "io_error": true}

// TestEscapes runs every escape case against every file operation: a
// refused case gets a 4xx with a FileOperationError; no case writes
// anything outside the workspace, changes the sensitive file, or reads a
// byte of it.
func TestEscapes(t *testing.T) {
	s := start(t, nil)
	id := s.newSandbox()
	s.sh(id, "mkdir -p /tmp/outside && printf s3cret > /tmp/outside/secret\n"+fixture("/workspace/esc", escapeFixture)+
		"printf KEY-MATERIAL > /workspace/esc/.ssh/id_rsa\n")
	hostShadow := hashFile(t, "/etc/shadow")
	prefix := "/sandboxes/" + id + "/v1/file/"
	for _, c := range escapeCases {
		for _, op := range fileOps {
			t.Run(c.name+"/"+op.name, func(t *testing.T) {
				s.t = t
				marker := "ESCAPE-" + strings.ReplaceAll(op.name, " ", "_")
				r := s.do("POST", prefix+op.route, op.body(c.path, marker), "/v1/file/"+op.route)
				if strings.Contains(string(r.raw), "KEY-MATERIAL") || strings.Contains(string(r.raw), "s3cret") {
					t.Fatalf("response leaks protected content: %s", r.raw)
				}
				if r.status == http.StatusInternalServerError {
					t.Fatalf("500: %s", r.raw)
				}
				if !c.refused {
					return
				}
				// A refusal on an AIO file route is tool-level: 200 with
				// success false (internal/api/aiostatus.go); elsewhere a 4xx.
				if (r.status < 400 || r.status >= 500) && (r.status != http.StatusOK || r.env.Success) {
					t.Fatalf("status %d, want a 4xx or 200 with success false: %s", r.status, r.raw)
				}
				fe := r.fileError(t)
				if !errorTypes[fe.ErrorType] {
					t.Fatalf("error_type %q not one of AIO's", fe.ErrorType)
				}
				if strings.Contains(fe.Message, os.TempDir()) || strings.Contains(string(r.raw), "/var/lib") {
					t.Fatalf("error names a host path: %s", r.raw)
				}
			})
		}
	}
	s.t = t
	// Nothing escaped: no marker outside /workspace/esc/%2e%2e, the
	// protected files unchanged, the host's /etc/shadow untouched.
	out := s.sh(id, "grep -rl ESCAPE- /tmp /etc /workspace/esc/.ssh /workspace/esc/d 2>/dev/null; cat /tmp/outside/secret /workspace/esc/.ssh/id_rsa; echo; ls -A /tmp/outside /workspace/esc/.ssh")
	want := "s3cretKEY-MATERIAL\n/tmp/outside:\nsecret\n\n/workspace/esc/.ssh:\nid_rsa\n"
	if out != want {
		t.Fatalf("after the escape table:\n%s\nwant:\n%s", out, want)
	}
	if hashFile(t, "/etc/shadow") != hostShadow {
		t.Fatal("host /etc/shadow changed")
	}
	// Every refusal is audited with its reason, and no record holds the
	// protected content.
	recs, err := s.d.Audit().Query(t.Context(), audit.Filter{Action: "file.read", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, r := range recs {
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "KEY-MATERIAL") {
			t.Fatalf("audit record holds protected content: %s", b)
		}
		if msg, _ := r.Detail["error"].(string); r.Verdict == "error" {
			for _, want := range []string{"sensitive-path policy", "leads out of /workspace", "hard link", "'.' or '..'", "symlink that is not allowed"} {
				if strings.Contains(msg, want) {
					reasons[want] = true
				}
			}
		}
	}
	if len(reasons) != 5 {
		t.Fatalf("refusal reasons audited: %v", reasons)
	}
}

func hashFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// procDir matches a process directory of /proc in a JSON string.
var procDir = regexp.MustCompile(`"/proc/([0-9]+|self|thread-self)(/|")`)

// TestTreeOpsHideSensitive: walks and searches below an allowed directory
// skip sensitive entries inside the sandbox (the init applies the same
// policy), so list, find, glob, grep and the editor's view never name or
// read them.
func TestTreeOpsHideSensitive(t *testing.T) {
	s := start(t, nil)
	id := s.newSandbox()
	s.sh(id, fixture("/workspace/h", []string{"id_rsa", ".ssh/", ".ssh/config", "app/", "app/.env", "app/main.go", ".config/gh/", ".config/gh/hosts.yml"})+
		"for f in id_rsa .ssh/config app/.env app/main.go .config/gh/hosts.yml; do echo KEY-$f > $f; done\n")
	p := "/sandboxes/" + id + "/v1/file/"
	bodies := map[string]map[string]any{
		"list":               {"path": "/workspace/h", "recursive": true, "show_hidden": true},
		"find":               {"path": "/workspace/h", "glob": "*"},
		"glob":               {"path": "/workspace/h", "pattern": "**/*", "include_hidden": true, "files_only": false},
		"grep":               {"path": "/workspace/h", "pattern": "KEY"},
		"str_replace_editor": {"command": "view", "path": "/workspace/h"},
	}
	for route, body := range bodies {
		r := s.do("POST", p+route, body, "/v1/file/"+route)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", route, r.status, r.raw)
		}
		for _, bad := range []string{"id_rsa", ".ssh", ".env", "hosts.yml", "KEY-id", "KEY-.ssh"} {
			if strings.Contains(string(r.env.Data), bad) {
				t.Fatalf("%s names %q: %s", route, bad, r.env.Data)
			}
		}
		if !strings.Contains(string(r.env.Data), "main.go") {
			t.Fatalf("%s lost the allowed file: %s", route, r.env.Data)
		}
	}
	// Walking /proc never enters the init's (or any) process directory.
	for route, body := range map[string]map[string]any{
		"grep": {"path": "/proc", "pattern": "PATH|sandhold|init", "max_results": 200},
		"list": {"path": "/proc", "recursive": true, "max_depth": 2},
		"glob": {"path": "/proc", "pattern": "*/environ", "files_only": true},
	} {
		r := s.do("POST", p+route, body, "/v1/file/"+route)
		if r.status != 200 {
			t.Fatalf("%s /proc: %d %s", route, r.status, r.raw)
		}
		if m := procDir.FindString(string(r.env.Data)); m != "" {
			t.Fatalf("%s /proc names %q: %.600s", route, m, r.env.Data)
		}
	}
}
