package workspace_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// raw sends one request with a raw body and returns the status and the
// whole response body. The request ends with ctx: a route that hangs
// fails the test through it, never by a clock assertion.
func (s *server) raw(ctx context.Context, method, path string, body io.Reader, ctype string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v (a route that does not answer)", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// multipartUpload is the form of POST /v1/file/upload: "path", then
// "file" named name with content.
func multipartUpload(path, name string, content []byte) (io.Reader, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("path", path)
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(content)
	_ = mw.Close()
	return &b, mw.FormDataContentType()
}

// tarOf is a tar with the given regular files (name → content).
func tarOf(files ...[2]string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		_ = tw.WriteHeader(&tar.Header{Name: f[0], Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f[1]))})
		_, _ = tw.Write([]byte(f[1]))
	}
	_ = tw.Close()
	return b.Bytes()
}

// unpacked is the names and contents of an archive answer, decoded, so a
// protected byte cannot hide in compression; what does not decode is
// returned as it is.
func unpacked(body []byte) string {
	var out strings.Builder
	if zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body))); err == nil {
		for _, f := range zr.File {
			out.WriteString(f.Name + "\n")
			if rc, err := f.Open(); err == nil {
				b, _ := io.ReadAll(rc)
				_ = rc.Close()
				out.Write(b)
			}
		}
		return out.String()
	}
	if gz, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			out.WriteString(h.Name + "\n")
			b, _ := io.ReadAll(tr)
			out.Write(b)
		}
		return out.String()
	}
	return string(body)
}

// streamRoute is a route that names a path in the sandbox and moves
// bytes: one request for path p.
type streamRoute struct {
	name string
	do   func(ctx context.Context, s *server, prefix, p, marker string) (int, []byte)
}

func query(p string) string { return url.QueryEscape(p) }

var streamRoutes = []streamRoute{
	{"download", func(ctx context.Context, s *server, prefix, p, _ string) (int, []byte) {
		return s.raw(ctx, "GET", prefix+"/v1/file/download?path="+query(p), nil, "")
	}},
	{"archive tar.gz", func(ctx context.Context, s *server, prefix, p, _ string) (int, []byte) {
		return s.raw(ctx, "GET", prefix+"/v1/file/archive?path="+query(p), nil, "")
	}},
	{"archive zip", func(ctx context.Context, s *server, prefix, p, _ string) (int, []byte) {
		return s.raw(ctx, "GET", prefix+"/v1/file/archive?format=zip&path="+query(p), nil, "")
	}},
	{"upload", func(ctx context.Context, s *server, prefix, p, m string) (int, []byte) {
		body, ct := multipartUpload(p, "up.txt", []byte(m))
		return s.raw(ctx, "POST", prefix+"/v1/file/upload", body, ct)
	}},
	{"upload into a directory", func(ctx context.Context, s *server, prefix, p, m string) (int, []byte) {
		body, ct := multipartUpload(p+"/", "up-"+m+".txt", []byte(m))
		return s.raw(ctx, "POST", prefix+"/v1/file/upload", body, ct)
	}},
	{"upload and extract", func(ctx context.Context, s *server, prefix, p, m string) (int, []byte) {
		body, ct := multipartUpload(p, "a.tar", tarOf([2]string{"x-" + m + ".txt", m}))
		return s.raw(ctx, "POST", prefix+"/v1/file/upload?extract=true", body, ct)
	}},
	{"extract (archive path)", func(ctx context.Context, s *server, prefix, p, _ string) (int, []byte) {
		b, _ := json.Marshal(map[string]any{"path": p, "dest": "/workspace/xdest"})
		return s.raw(ctx, "POST", prefix+"/v1/file/extract", bytes.NewReader(b), "application/json")
	}},
	{"extract (destination)", func(ctx context.Context, s *server, prefix, p, _ string) (int, []byte) {
		b, _ := json.Marshal(map[string]any{"path": "/workspace/ok.tar", "dest": p})
		return s.raw(ctx, "POST", prefix+"/v1/file/extract", bytes.NewReader(b), "application/json")
	}},
}

// TestEscapesStreamingRoutes runs the escape table of TestEscapes against
// every streaming route that names a path (upload, download, archive,
// extract): each refused case gets a 4xx, no answer carries a byte of a
// protected file (archives are decoded first), and nothing is written
// outside the workspace or into the sensitive directory. Before the one
// resolver, GET /v1/file/download of the hard link returned the key.
func TestEscapesStreamingRoutes(t *testing.T) {
	s := start(t, nil)
	id := s.newSandbox()
	s.sh(id, "mkdir -p /tmp/outside && printf s3cret > /tmp/outside/secret\n"+fixture("/workspace/esc", escapeFixture)+
		"printf KEY-MATERIAL > /workspace/esc/.ssh/id_rsa\n")
	prefix := "/sandboxes/" + id
	// A valid archive for the "extract (destination)" route.
	body, ct := multipartUpload("/workspace/ok.tar", "ok.tar", tarOf([2]string{"ok.txt", "fine"}))
	if st, b := s.raw(t.Context(), "POST", prefix+"/v1/file/upload", body, ct); st != 200 {
		t.Fatalf("upload ok.tar: %d %s", st, b)
	}
	for _, c := range escapeCases {
		for _, r := range streamRoutes {
			t.Run(c.name+"/"+r.name, func(t *testing.T) {
				s.t = t
				marker := "ESCAPE-" + strings.NewReplacer(" ", "_", "(", "", ")", "").Replace(r.name)
				st, b := r.do(t.Context(), s, prefix, c.path, marker)
				if text := unpacked(b); strings.Contains(text, "KEY-MATERIAL") || strings.Contains(text, "s3cret") {
					t.Fatalf("status %d: the answer carries protected content", st)
				}
				if st == http.StatusInternalServerError {
					t.Fatalf("500: %s", b)
				}
				if strings.Contains(string(b), "/var/lib") || strings.Contains(string(b), "/sandhold-") {
					t.Fatalf("the answer names a host path: %s", b)
				}
				if c.refused && (st < 400 || st >= 500) {
					t.Fatalf("status %d, want a 4xx: %.300s", st, b)
				}
			})
		}
	}
	s.t = t
	out := s.sh(id, "grep -rl ESCAPE- /tmp /etc /workspace/esc/.ssh 2>/dev/null; cat /tmp/outside/secret /workspace/esc/.ssh/id_rsa; echo; ls -A /tmp/outside /workspace/esc/.ssh")
	if want := "s3cretKEY-MATERIAL\n/tmp/outside:\nsecret\n\n/workspace/esc/.ssh:\nid_rsa\n"; out != want {
		t.Fatalf("after the escape table:\n%s\nwant:\n%s", out, want)
	}
}

// TestHardLinksDoNotLaunderThePolicy: a second name of .ssh/id_rsa made
// with `ln` is refused by every route that would hand out its bytes — a
// read or download of the link, an archive of a directory holding it (each
// entry is judged), a grep of that directory, an artifact that is such a
// link — and an archive cannot plant a sensitive name (each extraction
// target is judged). Each of these leaked or wrote before the one resolver.
func TestHardLinksDoNotLaunderThePolicy(t *testing.T) {
	s := start(t, nil)
	id := s.newSandbox()
	s.sh(id, "set -e; mkdir -p /workspace/.ssh /workspace/hl /workspace/.artifacts; printf KEY-MATERIAL > /workspace/.ssh/id_rsa\n"+
		"ln /workspace/.ssh/id_rsa /workspace/hl/notes.txt; printf fine > /workspace/hl/readme.txt\n"+
		"ln /workspace/.ssh/id_rsa /workspace/.artifacts/key.txt\n"+
		"ln -s ../.ssh/id_rsa /workspace/.artifacts/link.txt\n")
	prefix := "/sandboxes/" + id
	ctx := t.Context()
	jsonPost := func(route string, body map[string]any) (int, []byte) {
		b, _ := json.Marshal(body)
		return s.raw(ctx, "POST", prefix+route, bytes.NewReader(b), "application/json")
	}
	cases := []struct {
		name string
		do   func() (int, []byte)
		want int
	}{
		{"read", func() (int, []byte) {
			return jsonPost("/v1/file/read", map[string]any{"file": "/workspace/hl/notes.txt"})
		}, 403},
		{"download", func() (int, []byte) {
			return s.raw(ctx, "GET", prefix+"/v1/file/download?path=/workspace/hl/notes.txt", nil, "")
		}, 403},
		{"archive tar.gz", func() (int, []byte) { return s.raw(ctx, "GET", prefix+"/v1/file/archive?path=/workspace/hl", nil, "") }, 403},
		{"archive zip", func() (int, []byte) {
			return s.raw(ctx, "GET", prefix+"/v1/file/archive?format=zip&path=/workspace/hl", nil, "")
		}, 403},
		{"archive tar", func() (int, []byte) {
			return s.raw(ctx, "GET", prefix+"/v1/file/archive?format=tar&path=/workspace/hl", nil, "")
		}, 403},
		// grep of the directory answers, without the link's content.
		{"grep", func() (int, []byte) {
			return jsonPost("/v1/file/grep", map[string]any{"path": "/workspace/hl", "pattern": "."})
		}, 200},
		{"search", func() (int, []byte) {
			return jsonPost("/v1/file/search", map[string]any{"file": "/workspace/hl/notes.txt", "regex": "."})
		}, 403},
		{"artifact that is a hard link", func() (int, []byte) { return s.raw(ctx, "GET", prefix+"/v1/artifacts/key.txt", nil, "") }, 403},
		{"artifact that is a symlink", func() (int, []byte) { return s.raw(ctx, "GET", prefix+"/v1/artifacts/link.txt", nil, "") }, 403},
		{"extract a sensitive name", func() (int, []byte) {
			body, ct := multipartUpload("/workspace/x1", "a.tar", tarOf([2]string{"ok.txt", "x"}, [2]string{".ssh/authorized_keys", "ssh-ed25519 AAAA"}))
			return s.raw(ctx, "POST", prefix+"/v1/file/upload?extract=true", body, ct)
		}, 403},
		{"extract a .env", func() (int, []byte) {
			body, ct := multipartUpload("/workspace/x2", "a.tar", tarOf([2]string{"app/.env", "TOKEN=x"}))
			return s.raw(ctx, "POST", prefix+"/v1/file/upload?extract=true", body, ct)
		}, 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.t = t
			st, b := c.do()
			if strings.Contains(unpacked(b), "KEY-MATERIAL") {
				t.Fatalf("status %d: the answer carries the key", st)
			}
			// AIO's JSON file routes answer a refusal 200 with success
			// false (internal/api/aiostatus.go); the streaming routes keep c.want.
			if st != c.want && (st != http.StatusOK || !strings.Contains(string(b), `"success":false`)) {
				t.Fatalf("status %d, want %d (or 200 with success false): %.400s", st, c.want, b)
			}
		})
	}
	s.t = t
	// Nothing of the refused archives was written.
	if out := s.sh(id, "ls -A /workspace; ls -A /workspace/.ssh"); out != ".artifacts\n.ssh\nhl\nid_rsa\n" {
		t.Fatalf("after the refusals: %q", out)
	}
	// A directory without links still archives.
	s.sh(id, "rm /workspace/hl/notes.txt")
	if st, b := s.raw(ctx, "GET", prefix+"/v1/file/archive?format=zip&path=/workspace/hl", nil, ""); st != 200 || !strings.Contains(unpacked(b), "fine") {
		t.Fatalf("archive of a clean directory: %d %.200s", st, b)
	}
}

// TestDeepTreeWalksAnswer builds a 3,000-level directory chain in a real
// sandbox (with the shell, as an agent would) and calls every route that
// walks a tree: each must answer — a 4xx, or a result marked truncated —
// and the sandbox must still run a command afterwards. A hang fails the
// test through the request's context; no wall-clock time is asserted.
func TestDeepTreeWalksAnswer(t *testing.T) {
	s := start(t, nil)
	id := s.newSandbox()
	const levels = 3000
	// 30 steps of 100 levels each (one mkdir -p and one relative cd per
	// step): a path past PATH_MAX can only be built relative to a cwd.
	step := strings.TrimSuffix(strings.Repeat("x/", 100), "/")
	s.sh(id, fmt.Sprintf("set -e; mkdir -p /workspace/deep; cd /workspace/deep; i=0; while [ $i -lt %d ]; do mkdir -p %s; cd %s; i=$((i+1)); done; echo needle > f", levels/100, step, step))
	prefix := "/sandboxes/" + id
	jsonRoutes := []struct {
		route string
		body  map[string]any
	}{
		{"list", map[string]any{"path": "/workspace", "recursive": true}},
		{"find", map[string]any{"path": "/workspace", "glob": "*"}},
		{"grep", map[string]any{"path": "/workspace", "pattern": "needle"}},
		{"glob", map[string]any{"path": "/workspace", "pattern": "**/f"}},
		{"str_replace_editor", map[string]any{"command": "view", "path": "/workspace/deep"}},
	}
	// Generous: the test detects a hang, it does not time the route.
	const hang = 3 * time.Minute
	for _, r := range jsonRoutes {
		t.Run(r.route, func(t *testing.T) {
			s.t = t
			ctx, cancel := context.WithTimeout(t.Context(), hang)
			defer cancel()
			b, _ := json.Marshal(r.body)
			st, raw := s.raw(ctx, "POST", prefix+"/v1/file/"+r.route, bytes.NewReader(b), "application/json")
			if st >= 400 && st < 500 {
				return
			}
			if st != 200 {
				t.Fatalf("status %d: %.300s", st, raw)
			}
			if r.route == "str_replace_editor" {
				return // a two-level view: complete by definition
			}
			var env struct {
				Data struct {
					Truncated bool `json:"truncated"`
				} `json:"data"`
			}
			if err := json.Unmarshal(raw, &env); err != nil || !env.Data.Truncated {
				t.Fatalf("a walk that could not reach level %d answered complete: %.400s", levels, raw)
			}
		})
	}
	t.Run("watch", func(t *testing.T) {
		s.t = t
		ctx, cancel := context.WithTimeout(t.Context(), hang)
		defer cancel()
		b, _ := json.Marshal(map[string]any{"path": "/workspace", "recursive": true})
		st, raw := s.raw(ctx, "POST", prefix+"/v1/file/watch", bytes.NewReader(b), "application/json")
		if st >= 400 && st < 500 {
			return
		}
		var env struct {
			Data struct {
				Truncated bool `json:"truncated"`
			} `json:"data"`
		}
		if st != 200 || json.Unmarshal(raw, &env) != nil || !env.Data.Truncated {
			t.Fatalf("a watch that cannot see level %d answered %d complete: %.300s", levels, st, raw)
		}
	})
	for _, format := range []string{"zip", "tar.gz", "tar"} {
		t.Run("archive "+format, func(t *testing.T) {
			s.t = t
			ctx, cancel := context.WithTimeout(t.Context(), hang)
			defer cancel()
			st, raw := s.raw(ctx, "GET", prefix+"/v1/file/archive?format="+format+"&path=/workspace", nil, "")
			if st < 400 || st >= 500 {
				t.Fatalf("status %d, want a 4xx naming the depth cap: %.300s", st, raw)
			}
			if !strings.Contains(string(raw), "too_deep") {
				t.Fatalf("the refusal does not name the rule: %s", raw)
			}
		})
	}
	s.t = t
	// The init still serves: a command and a file call.
	if out := s.sh(id, "echo alive"); out != "alive\n" {
		t.Fatalf("after the walks: %q", out)
	}
	if r := s.do("POST", prefix+"/v1/file/list", map[string]any{"path": "/workspace"}, ""); r.status != 200 {
		t.Fatalf("list after the walks: %d %s", r.status, r.raw)
	}
}
