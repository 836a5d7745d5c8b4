package coderun_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/testenv"
)

type srv struct {
	t    *testing.T
	base string
	key  string
}

// startServer runs the real daemon on 127.0.0.1:0 with a fresh data dir.
func startServer(t *testing.T) *srv {
	t.Helper()
	testenv.RequireSandboxes(t, "/usr/bin/python3")
	d := daemontest.Start(t, nil)
	return &srv{t: t, base: "http://" + d.Addr(), key: d.AdminKey()}
}

// do sends a JSON request and decodes the JSON answer.
func (s *srv) do(method, path string, body any) (int, map[string]any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			buf, _ := json.Marshal(b)
			rd = bytes.NewReader(buf)
		}
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatalf("%s %s: %d, not JSON: %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// requireToolFailure requires AIO's answer to a tool-level failure on a
// code or jupyter route: HTTP 200, success false, data null and a message
// naming the failure.
func requireToolFailure(t *testing.T, what string, st int, out map[string]any, msg string) {
	t.Helper()
	if st != 200 || out["success"] != false || out["data"] != nil {
		t.Errorf("%s: %d %v, want 200 with success:false and data null", what, st, out)
		return
	}
	if m, _ := out["message"].(string); !strings.Contains(m, msg) {
		t.Errorf("%s: message %q, want it to contain %q", what, m, msg)
	}
}

// exec runs code and returns data, failing on a non-200.
func (s *srv) exec(body map[string]any) map[string]any {
	s.t.Helper()
	st, out := s.do("POST", "/v1/code/execute", body)
	if st != 200 {
		s.t.Fatalf("execute %v: %d %v", body, st, out)
	}
	return out["data"].(map[string]any)
}

func resultText(d map[string]any) string {
	for _, o := range d["outputs"].([]any) {
		m := o.(map[string]any)
		if m["output_type"] == "execute_result" {
			return m["data"].(map[string]any)["text/plain"].(string)
		}
	}
	return ""
}

func TestCodeEndToEnd(t *testing.T) {
	s := startServer(t)

	t.Run("python-stateful", func(t *testing.T) {
		d := s.exec(map[string]any{"language": "python", "code": "x = 41", "stateful": true})
		sid, _ := d["session_id"].(string)
		if sid == "" || d["status"] != "ok" {
			t.Fatalf("first call: %v", d)
		}
		start := time.Now()
		d = s.exec(map[string]any{"language": "python", "code": "print('p'); x + 1", "stateful": true, "session_id": sid})
		t.Logf("stateful python call round trip: %s", time.Since(start))
		if got := resultText(d); got != "42" || d["stdout"] != "p\n" || d["session_id"] != sid {
			t.Fatalf("x + 1 = %q (stdout %q): %v", got, d["stdout"], d)
		}
	})

	t.Run("python-traceback", func(t *testing.T) {
		d := s.exec(map[string]any{"language": "python", "code": "def f():\n    return 1/0\nf()"})
		tb, _ := d["traceback"].([]any)
		joined := ""
		for _, l := range tb {
			joined += l.(string) + "\n"
		}
		if d["status"] != "error" || !strings.Contains(joined, "ZeroDivisionError") || !strings.Contains(joined, "return 1/0") ||
			strings.Contains(joined, "run_cell") {
			t.Fatalf("traceback %q: %v", joined, d)
		}
		if ec, _ := d["exit_code"].(float64); ec != 1 {
			t.Fatalf("exit_code %v", d["exit_code"])
		}
	})

	t.Run("javascript-stateless", func(t *testing.T) {
		d := s.exec(map[string]any{"language": "javascript", "code": "console.log('hi'); [1,2,3].map(x => x * 2)"})
		if d["stdout"] != "hi\n" || resultText(d) != "[ 2, 4, 6 ]" || d["session_id"] != nil {
			t.Fatalf("%v", d)
		}
		d = s.exec(map[string]any{"language": "javascript", "code": "typeof y"})
		if resultText(d) != "'undefined'" {
			t.Fatalf("stateless run saw state: %v", d)
		}
	})

	t.Run("javascript-stateful", func(t *testing.T) {
		d := s.exec(map[string]any{"language": "javascript", "code": "let y = 20; var z = 1", "stateful": true})
		sid := d["session_id"].(string)
		d = s.exec(map[string]any{"language": "javascript", "code": "y + z + 21", "stateful": true, "session_id": sid})
		if resultText(d) != "42" {
			t.Fatalf("%v", d)
		}
		d = s.exec(map[string]any{"language": "javascript", "code": "null.x", "stateful": true, "session_id": sid})
		if d["status"] != "error" || !strings.Contains(strings.Join(toStrings(d["traceback"]), "\n"), "TypeError") {
			t.Fatalf("%v", d)
		}
	})

	t.Run("bash", func(t *testing.T) {
		d := s.exec(map[string]any{"language": "bash", "code": "echo out; echo err >&2; exit 3"})
		if d["stdout"] != "out\n" || d["stderr"] != "err\n" || d["exit_code"].(float64) != 3 || d["status"] != "error" {
			t.Fatalf("%v", d)
		}
		d = s.exec(map[string]any{"language": "bash", "code": "cd /tmp; V=7", "stateful": true})
		sid := d["session_id"].(string)
		d = s.exec(map[string]any{"language": "bash", "code": "echo $V $PWD", "stateful": true, "session_id": sid})
		if d["stdout"] != "7 /tmp\n" || d["exit_code"].(float64) != 0 {
			t.Fatalf("%v", d)
		}
		// cwd applies to the call; a missing one stops the cell.
		d = s.exec(map[string]any{"language": "bash", "code": "pwd", "cwd": "/workspace", "stateful": true, "session_id": sid})
		if d["stdout"] != "/workspace\n" {
			t.Fatalf("%v", d)
		}
		d = s.exec(map[string]any{"language": "bash", "code": "echo ran", "cwd": "/nonexistent", "stateful": true, "session_id": sid})
		if d["stdout"] != "" || d["status"] != "error" {
			t.Fatalf("%v", d)
		}
	})

	t.Run("timeout-kills-and-session-recovers", func(t *testing.T) {
		d := s.exec(map[string]any{"language": "python", "code": "k = 5", "stateful": true})
		sid := d["session_id"].(string)
		d = s.exec(map[string]any{"language": "python", "code": "print('before', flush=True)\nwhile True: pass", "stateful": true, "session_id": sid, "timeout": 1})
		if d["status"] != "timeout" || d["state_lost"] != true || d["stdout"] != "before\n" {
			t.Fatalf("timeout: %v", d)
		}
		d = s.exec(map[string]any{"language": "python", "code": "'k' in globals()", "stateful": true, "session_id": sid})
		if d["status"] != "ok" || resultText(d) != "False" || d["state_lost"] != true {
			t.Fatalf("after timeout: %v", d)
		}
		d = s.exec(map[string]any{"language": "python", "code": "k = 6; k", "stateful": true, "session_id": sid})
		if resultText(d) != "6" || d["state_lost"] != false {
			t.Fatalf("recovered session: %v", d)
		}
	})

	t.Run("matplotlib-image", func(t *testing.T) {
		if err := exec.Command("/usr/bin/python3", "-c", "import matplotlib").Run(); err != nil {
			t.Skip("matplotlib is not importable by /usr/bin/python3 (apt-get install python3-matplotlib)")
		}
		d := s.exec(map[string]any{"language": "python", "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"})
		found := false
		for _, o := range d["outputs"].([]any) {
			m := o.(map[string]any)
			if m["output_type"] != "display_data" {
				continue
			}
			b64, _ := m["data"].(map[string]any)["image/png"].(string)
			png, err := base64.StdEncoding.DecodeString(b64)
			if err == nil && bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
				found = true
			}
		}
		if !found || d["status"] != "ok" {
			t.Fatalf("no PNG display_data: status %v stderr %v outputs %v", d["status"], d["stderr"], d["outputs"])
		}
	})

	t.Run("jupyter", func(t *testing.T) {
		st, out := s.do("POST", "/v1/jupyter/sessions/create", map[string]any{"session_id": "nb-1"})
		if st != 200 {
			t.Fatalf("create: %d %v", st, out)
		}
		st, out = s.do("POST", "/v1/jupyter/execute", map[string]any{"code": "a = 2\nprint('s')\na * 21", "session_id": "nb-1"})
		d := out["data"].(map[string]any)
		types := []string{}
		for _, o := range d["outputs"].([]any) {
			types = append(types, o.(map[string]any)["output_type"].(string))
		}
		if st != 200 || d["status"] != "ok" || strings.Join(types, ",") != "stream,execute_result" || resultText(d) != "42" {
			t.Fatalf("%d %v", st, d)
		}
		st, out = s.do("POST", "/v1/jupyter/execute", map[string]any{"code": "raise ValueError('v')", "session_id": "nb-1"})
		outs := out["data"].(map[string]any)["outputs"].([]any)
		last := outs[len(outs)-1].(map[string]any)
		if st != 200 || last["output_type"] != "error" || last["ename"] != "ValueError" || last["evalue"] != "v" {
			t.Fatalf("%d %v", st, out)
		}
		// display() and rich reprs become display_data; a trailing
		// semicolon hides the last value, as in IPython.
		st, out = s.do("POST", "/v1/jupyter/execute", map[string]any{"session_id": "nb-1", "code": "class H:\n    def _repr_html_(self): return '<b>h</b>'\ndisplay(H())\na;"})
		outs = out["data"].(map[string]any)["outputs"].([]any)
		if st != 200 || len(outs) != 1 || outs[0].(map[string]any)["output_type"] != "display_data" ||
			outs[0].(map[string]any)["data"].(map[string]any)["text/html"] != "<b>h</b>" {
			t.Fatalf("display: %d %v", st, out)
		}
		st, out = s.do("GET", "/v1/jupyter/sessions", nil)
		if _, ok := out["data"].(map[string]any)["sessions"].(map[string]any)["nb-1"]; st != 200 || !ok {
			t.Fatalf("%d %v", st, out)
		}
		if st, out = s.do("DELETE", "/v1/jupyter/sessions/nb-1", nil); st != 200 {
			t.Fatalf("%d %v", st, out)
		}
		// AIO's rule: a tool-level failure is HTTP 200 with success:false.
		st, out = s.do("DELETE", "/v1/jupyter/sessions/nb-1", nil)
		requireToolFailure(t, "second delete", st, out, "no such session")
	})

	t.Run("busy-session-conflict", func(t *testing.T) {
		d := s.exec(map[string]any{"language": "bash", "code": "true", "stateful": true})
		sid := d["session_id"].(string)
		done := make(chan map[string]any, 1)
		go func() {
			_, out := s.do("POST", "/v1/code/execute", map[string]any{"language": "bash", "stateful": true, "session_id": sid,
				"code": "touch /tmp/busy-started; sleep 3; echo slept"})
			done <- out
		}()
		// Wait (through another interpreter) until the cell runs, then
		// collide with it once.
		deadline := time.Now().Add(10 * time.Second)
		for s.exec(map[string]any{"language": "bash", "code": "test -e /tmp/busy-started"})["exit_code"].(float64) != 0 {
			if time.Now().After(deadline) {
				t.Fatal("the long cell never started")
			}
			time.Sleep(20 * time.Millisecond)
		}
		st, out := s.do("POST", "/v1/code/execute", map[string]any{"language": "bash", "code": "echo second", "stateful": true, "session_id": sid})
		requireToolFailure(t, "call on a busy session", st, out, "running another execution")
		first := <-done
		if first["data"].(map[string]any)["stdout"] != "slept\n" {
			t.Fatalf("first call: %v", first)
		}
	})

	t.Run("output-flood-is-capped", func(t *testing.T) {
		// 64 MiB from python and from a child process; the server keeps
		// the head and the tail of each stream and says it dropped bytes.
		d := s.exec(map[string]any{"language": "python", "code": "import os, sys\nchunk = 'x' * 65536\nfor _ in range(512): sys.stdout.write(chunk)\nsys.stdout.flush()\nos.system('head -c 33554432 /dev/zero | tr \"\\\\0\" y')\n'done'", "timeout": 60})
		out, _ := d["stdout"].(string)
		if d["status"] != "ok" || d["truncated"] != true || len(out) > 2<<20 || !strings.Contains(out, "bytes truncated") || resultText(d) != "'done'" {
			t.Fatalf("status %v truncated %v len %d result %q", d["status"], d["truncated"], len(out), resultText(d))
		}
		if !strings.HasPrefix(out, "xxxx") || !strings.HasSuffix(out, "yyyy") {
			t.Fatalf("head %q tail %q", out[:8], out[len(out)-8:])
		}
	})

	t.Run("tools-call", func(t *testing.T) {
		// The same capability through the generic tool call (MCP uses
		// the same decoding).
		st, out := s.do("POST", "/v1/tools/call", map[string]any{"name": "code.execute",
			"arguments": map[string]any{"language": "javascript", "code": "40 + 2", "timeout": 10}})
		d, _ := out["data"].(map[string]any)
		if st != 200 || !strings.Contains(fmt.Sprint(d), "42") {
			t.Fatalf("%d %v", st, out)
		}
		st, out = s.do("POST", "/v1/tools/call", `{"name":"code.execute","arguments":{"language":"python","code":"1","timeout":1e309}}`)
		if st != 400 && st != 422 {
			t.Fatalf("timeout 1e309 through tools/call: %d %v", st, out)
		}
	})

	t.Run("openapi-documents-routes", func(t *testing.T) {
		st, out := s.do("GET", "/openapi.json", nil)
		paths, _ := out["paths"].(map[string]any)
		for _, p := range []string{"/v1/code/execute", "/v1/code/info", "/v1/jupyter/execute", "/v1/jupyter/sessions/{session_id}"} {
			if _, ok := paths[p]; st != 200 || !ok {
				t.Errorf("/openapi.json (%d) lacks %s", st, p)
			}
		}
	})

	t.Run("bad-input", func(t *testing.T) {
		cases := []struct {
			name, path, body string
			want             int
			msg              string // the message of a tool-level failure (200)
		}{
			{"negative-timeout", "/v1/code/execute", `{"language":"python","code":"1","timeout":-1}`, 422, ""},
			{"huge-timeout", "/v1/code/execute", `{"language":"python","code":"1","timeout":1e309}`, 422, ""},
			{"fractional-timeout", "/v1/code/execute", `{"language":"python","code":"1","timeout":1.5}`, 422, ""},
			{"unknown-language", "/v1/code/execute", `{"language":"cobol","code":"1"}`, 422, ""},
			{"missing-code", "/v1/code/execute", `{"language":"python"}`, 422, ""},
			{"not-json", "/v1/code/execute", `{"language":`, 422, ""},
			{"array-body", "/v1/jupyter/execute", `[]`, 422, ""},
			{"bad-kernel", "/v1/jupyter/execute", `{"code":"1","kernel_name":"ruby"}`, 422, ""},
			{"bad-session-id", "/v1/code/execute", `{"language":"python","code":"1","stateful":true,"session_id":"../x"}`, 422, ""},
			{"bad-jupyter-session-id", "/v1/jupyter/execute", `{"code":"1","session_id":"a b"}`, 422, ""},
			// A sandbox of the URL that is not there is a routing failure
			// (404), not the tool's (issue 29, row 10).
			{"unknown-sandbox", "/sandboxes/sb-nope/v1/code/execute", `{"language":"python","code":"1"}`, 404, ""},
		}
		for _, c := range cases {
			st, out := s.do("POST", c.path, c.body)
			if c.want == 200 {
				requireToolFailure(t, c.name, st, out, c.msg)
				continue
			}
			if st != c.want {
				t.Errorf("%s: %d %v, want %d", c.name, st, out, c.want)
				continue
			}
			if c.want == 422 {
				det, _ := out["detail"].([]any)
				if len(det) == 0 || det[0].(map[string]any)["loc"] == nil {
					t.Errorf("%s: not AIO's 422 shape: %v", c.name, out)
				}
			}
		}
	})
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
