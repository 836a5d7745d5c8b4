package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/sandhold/sandhold/internal/audit"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "exec.run ok", "exec.run ok"},
		{"unicode-kept", "café ✓", "café ✓"},
		{"esc-sequence", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"newline-cr-tab", "a\nb\rc\td", `a\nb\rc\td`},
		{"del", "x\x7fy", `x\x7fy`},
		{"c1-csi", "x\u009by", `x\u009by`},
		{"bidi-override", "abc\u202edcba", `abc\u202edcba`},
		{"zero-width", "a\u200bb", `a\u200bb`},
		{"tag-char", "a\U000E0041b", `a\U000e0041b`},
		{"invalid-utf8", "a\xffb", `a\xffb`},
		{"backslash-unambiguous", `a\x1b`, `a\\x1b`},
		{"bell-backspace", "\a\b", `\x07\x08`},
		{"line-separator", "a\u2028b\u2029c", `a\u2028b\u2029c`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Escape(tc.in); got != tc.want {
				t.Fatalf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestAuditJSONEscapesEverythingUnprintable: encoding/json leaves DEL,
// C1 and bidi controls raw; AuditJSON must not, and must stay valid JSON
// that decodes back to the same record.
func TestAuditJSONEscapesEverythingUnprintable(t *testing.T) {
	hostile := "rm \x1b]0;pwned\x07 \x7f \u009b2J \u202e \U000E0041 \xff"
	r := AuditRecord{Seq: 7, Action: "exec.run", Actor: "key_x\x1b[2J", Detail: map[string]any{"command": hostile}}
	line, err := AuditJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, rn := range line {
		if audit.Hidden(rn) {
			t.Fatalf("raw %U in %q", rn, line)
		}
	}
	if !strings.Contains(line, `\u001b`) || !strings.Contains(line, `\u007f`) || !strings.Contains(line, `\u009b`) ||
		!strings.Contains(line, `\u202e`) || !strings.Contains(line, `\udb40\udc41`) {
		t.Fatalf("escapes missing: %s", line)
	}
	var back AuditRecord
	if err := json.Unmarshal([]byte(line), &back); err != nil {
		t.Fatalf("not JSON: %v: %s", err, line)
	}
	want := strings.ToValidUTF8(hostile, "\ufffd")
	if back.Detail["command"] != want || back.Actor != r.Actor {
		t.Fatalf("round trip: %q / %q", back.Detail["command"], back.Actor)
	}
}

func TestConfigSaveLoad(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv(EnvURL, "")
	t.Setenv(EnvKey, "")
	t.Setenv(EnvSandbox, "")
	if _, err := LoadConfig(); !errors.Is(err, ErrNotLoggedIn) {
		t.Fatalf("no login: %v", err)
	}
	p, err := SaveConfig(Config{URL: "http://127.0.0.1:9", Key: "shk_secret", Sandbox: "sb1"})
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(dir, "sandhold", "client.json") {
		t.Fatalf("path %s", p)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{p, 0o600}, {filepath.Dir(p), 0o700}} {
		fi, err := os.Stat(c.path)
		if err != nil || fi.Mode().Perm() != c.mode {
			t.Fatalf("%s: mode %v, want %o (%v)", c.path, fi.Mode().Perm(), c.mode, err)
		}
	}
	c, err := LoadConfig()
	if err != nil || c.Key != "shk_secret" || c.Sandbox != "sb1" {
		t.Fatalf("load: %+v %v", c, err)
	}
	t.Setenv(EnvKey, "shk_from_env")
	t.Setenv(EnvSandbox, "sb2")
	if c, _ := LoadConfig(); c.Key != "shk_from_env" || c.Sandbox != "sb2" || c.URL != "http://127.0.0.1:9" {
		t.Fatalf("env does not override: %+v", c)
	}
	// A login file others can read is refused, and the error names the
	// fix but not the key.
	if err := os.Chmod(p, 0o644); err != nil { // #nosec G302 -- the test makes the file too open on purpose
		t.Fatal(err)
	}
	_, err = LoadConfig()
	if err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "shk_") {
		t.Fatalf("world-readable login accepted or leaks: %v", err)
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"http://127.0.0.1:8080", true},
		{"https://sandhold.example/prefix/", true},
		{"ftp://x", false},
		{"127.0.0.1:8080", false},
		{"http://user:shk_x@host", false},
		{"http://host/?key=shk_x", false},
	} {
		if _, err := ParseURL(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParseURL(%q): %v", tc.in, err)
		}
	}
}

// TestErrorsSayWhatToDo drives the client against canned answers of the
// server's shapes: each refusal is one line naming the next step.
func TestErrorsSayWhatToDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env := func(status int, msg, code string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"success": false, "message": msg, "data": map[string]any{"code": code, "request_id": "req_1"}})
		}
		switch {
		case r.Header.Get("Authorization") != "Bearer shk_good":
			env(401, "invalid API key", "unauthorized")
		case strings.HasPrefix(r.URL.Path, "/v1/sandboxes/gone"):
			env(404, "sandbox not found", "not_found")
		case r.URL.Path == "/v1/sandboxes" && r.Method == http.MethodPost:
			w.Header().Set("Retry-After", "17")
			env(429, "rate limit exceeded\x1b[2J", "rate_limited")
		case r.URL.Path == "/redirect":
			http.Redirect(w, r, "http://evil.example/", http.StatusFound)
		default:
			env(500, "internal error", "internal")
		}
	}))
	defer srv.Close()
	bad, _ := New(Config{URL: srv.URL, Key: "shk_bad"})
	good, _ := New(Config{URL: srv.URL, Key: "shk_good"})
	ctx := t.Context()
	_, err := bad.List(ctx)
	assertLine(t, err, "sandhold login")
	assertLine(t, good.Delete(ctx, "gone"), "sandbox gone not found", "sandhold ls")
	_, err = good.Create(ctx, CreateRequest{})
	assertLine(t, err, "rate limited", "wait 17s")
	if strings.Contains(err.Error(), "\x1b") {
		t.Fatalf("server text reached the terminal raw: %q", err)
	}
	_, err = good.List(ctx)
	assertLine(t, err, "internal error", "req_1")
	// Redirects are not followed (the key would go along).
	req, _ := good.newRequest(ctx, http.MethodGet, "/redirect", nil, nil)
	res, err := good.do(req, http.StatusFound)
	if err != nil || res.StatusCode != http.StatusFound {
		t.Fatalf("redirect followed: %v", err)
	}
	_ = res.Body.Close()
	// Nothing listening: say so and what to do.
	srv.Close()
	_, err = good.List(ctx)
	assertLine(t, err, "cannot reach the server", "sandhold serve")
}

func assertLine(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Fatalf("error is not one line: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("error %q does not say %q", msg, w)
		}
	}
}

// TestProgressPlainLines: off a terminal, one line per 5 % and the last,
// each with the byte counts; a resumed copy starts at its offset and its
// rate counts only this run's bytes.
func TestProgressPlainLines(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	p := NewProgress(&buf, false, "upload", 1000, 400)
	p.now = func() time.Time { return now }
	p.start = now
	for range 60 {
		now = now.Add(100 * time.Millisecond)
		p.Add(10)
	}
	p.Finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 13 { // 40 % at start, 45 … 100 %, the last once
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	if !strings.HasPrefix(lines[0], "progress 400/1000 bytes 40%") {
		t.Fatalf("first line %q", lines[0])
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "progress 1000/1000 bytes 100%") || !strings.Contains(last, "100 B/s") || !strings.HasSuffix(last, "ETA 0s") {
		t.Fatalf("last line %q", last)
	}
	if !strings.Contains(lines[1], "100 B/s ETA 6s") { // 50 B in 0.5 s, 550 B left
		t.Fatalf("eta in %q", lines[1])
	}
}

func TestProgressTTYRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	p := NewProgress(&buf, true, "download", 1000<<10, 0)
	p.now = func() time.Time { return now }
	p.start, p.lastDraw = now, time.Time{}
	for range 10 {
		now = now.Add(time.Second)
		p.Add(100 << 10)
	}
	p.Finish()
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") || strings.Count(out, "\r") < 10 {
		t.Fatalf("not redrawn in place: %q", out)
	}
	if !strings.Contains(out, "[========================] 100%") {
		t.Fatalf("final bar missing: %q", out)
	}
}

func TestRemotePath(t *testing.T) {
	for in, want := range map[string]string{"": "/workspace/", "a/b": "/workspace/a/b", "d/": "/workspace/d/", "/tmp/x": "/tmp/x"} {
		if got := RemotePath(in); got != want {
			t.Errorf("RemotePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadSSE(t *testing.T) {
	in := "event: stdout\ndata: {\"data\":\"a\"}\n\n: comment\nevent: stderr\ndata: {\"data\":\"b\"}\n\nevent: exit\ndata: {\"status\":\"completed\",\"exit_code\":3}\n\nevent: stdout\ndata: {}\n\n"
	var got []string
	err := readSSE(strings.NewReader(in), func(ev string, data []byte) error {
		got = append(got, ev+"="+string(data))
		if ev == "exit" {
			return errStopSSE
		}
		return nil
	})
	if err != nil || len(got) != 3 || got[2] != `exit={"status":"completed","exit_code":3}` {
		t.Fatalf("%v %q", err, got)
	}
	long := "data: " + strings.Repeat("x", maxSSELine+10) + "\n\n"
	if err := readSSE(strings.NewReader(long), func(string, []byte) error { return nil }); err == nil {
		t.Fatal("an oversized event was accepted")
	}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
