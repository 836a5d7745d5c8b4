package shell_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

func TestSandboxInfoPrefixesAndStreams(t *testing.T) {
	s := startServer(t, nil)

	t.Run("sandbox-info", func(t *testing.T) {
		r := s.do("GET", "/v1/sandbox", nil)
		if r.status != 200 || r.body["success"] != true || r.body["version"] != "test" || r.body["home_dir"] != "/workspace" {
			t.Fatalf("GET /v1/sandbox: %d %s", r.status, r.raw)
		}
		sys := r.body["detail"].(map[string]any)["system"].(map[string]any)
		if sys["os"] != "linux" || sys["arch"] == "" || sys["user"] == "" || sys["workspace"] != "/workspace" {
			t.Fatalf("system: %v", sys)
		}
		doc := s.do("GET", "/openapi.json", nil)
		for _, p := range []string{`"/v1/bash/exec"`, `"/sandboxes/{id}/v1/shell/exec"`, `"/v1/shell/ws"`, `"/v1/sandbox"`} {
			if !strings.Contains(string(doc.raw), p) {
				t.Fatalf("openapi.json lacks %s", p)
			}
		}
		utils, _ := r.body["detail"].(map[string]any)["utils"].([]any)
		if len(utils) == 0 {
			t.Fatalf("no utils: %s", r.raw)
		}
	})

	t.Run("sandbox-prefix", func(t *testing.T) {
		c := s.do("POST", "/v1/sandboxes", map[string]any{"name": "second"})
		if c.status != 201 {
			t.Fatalf("create sandbox: %d %s", c.status, c.raw)
		}
		id := c.data()["id"].(string)
		d := ok(t, s.do("POST", "/sandboxes/"+id+"/v1/shell/exec", map[string]any{"command": "touch /workspace/only-here; hostname"}))
		sid := d["session_id"].(string)
		// The default sandbox has neither the file nor the session.
		d2 := ok(t, s.do("POST", "/v1/bash/exec", map[string]any{"command": "test -e /workspace/only-here; echo $?"}))
		if d2["stdout"] != "1\n" {
			t.Fatalf("default sandbox sees the other's workspace: %v", d2)
		}
		toolFailed(t, "session visible through the default sandbox", s.do("POST", "/v1/shell/view", map[string]any{"id": sid}))
		ok(t, s.do("POST", "/sandboxes/"+id+"/v1/shell/view", map[string]any{"id": sid}))
		// A sandbox of the URL that is not there is a routing failure (a
		// real 404), not the tool's (issue 29, row 10).
		if r := s.do("POST", "/sandboxes/sb_nope/v1/shell/exec", map[string]any{"command": "true"}); r.status != 404 || r.data()["code"] != "not_found" {
			t.Fatalf("unknown sandbox: %d %s, want 404 with code not_found", r.status, r.raw)
		}
		// terminal-url names a live session of that sandbox.
		u := s.do("GET", "/sandboxes/"+id+"/v1/shell/terminal-url", nil)
		url, _ := u.body["data"].(string)
		if u.status != 200 || !strings.HasPrefix(url, "ws://") || !strings.Contains(url, "/sandboxes/"+id+"/v1/shell/ws?session_id=") {
			t.Fatalf("terminal-url: %d %s", u.status, u.raw)
		}
		h := http.Header{"Authorization": {"Bearer " + s.key}}
		conn, resp, err := websocket.Dial(t.Context(), url, &websocket.DialOptions{HTTPHeader: h})
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
		if err != nil {
			t.Fatalf("dial terminal-url: %v", err)
		}
		_ = conn.Close(websocket.StatusNormalClosure, "bye")
	})

	t.Run("sse", func(t *testing.T) {
		req, _ := http.NewRequest("POST", s.base+"/v1/shell/exec", strings.NewReader(`{"command":"for i in 1 2 3; do echo tick$i; sleep 0.2; done"}`))
		req.Header.Set("Authorization", "Bearer "+s.key)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		var outputs int
		var result map[string]any
		sc := bufio.NewScanner(res.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				switch event {
				case "output":
					outputs++
				case "result":
					_ = json.Unmarshal([]byte(d), &result)
				}
			}
		}
		if outputs < 2 || result["status"] != "completed" || result["output"] != "tick1\ntick2\ntick3\n" {
			t.Fatalf("%d output events, result %v", outputs, result)
		}
	})

	t.Run("packages", func(t *testing.T) {
		for _, lang := range []string{"python", "nodejs"} {
			r := s.do("GET", "/v1/sandbox/packages/"+lang, nil)
			if r.status != 200 || r.body["success"] != true {
				t.Fatalf("%s packages: %d %s", lang, r.status, r.raw)
			}
			// pip's list is an array, npm's an object: passed on as they are.
			_, isList := r.body["data"].([]any)
			_, isObject := r.body["data"].(map[string]any)
			if (lang == "python" && !isList) || (lang == "nodejs" && !isObject) {
				t.Fatalf("%s packages: data %T, want what the package manager answers: %s", lang, r.body["data"], r.raw)
			}
		}
	})
}
