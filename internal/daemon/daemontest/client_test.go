package daemontest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/agent/agenttest"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// TestMain lets the test binary serve as the sandboxes' init.
func TestMain(m *testing.M) { agenttest.Main(m) }

// TestClientDo checks what Do sends and how it reads answers, against a
// recording server (no sandboxes, runs under -short).
func TestClientDo(t *testing.T) {
	var got struct {
		auth, ctype, extra, body string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.auth, got.ctype, got.extra, got.body = r.Header.Get("Authorization"), r.Header.Get("Content-Type"), r.Header.Get("X-Extra"), string(b)
		switch r.URL.Path {
		case "/env":
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, `{"success":false,"message":"no","data":{"code":"x"},"hint":null}`)
		default:
			_, _ = io.WriteString(w, "plain text")
		}
	}))
	defer srv.Close()
	c := &daemontest.Client{Base: srv.URL, Key: "shk_a"}
	c = daemontest.WithT(c, t)

	r := c.Do("POST", "/env", map[string]int{"n": 1}, "X-Extra", "v")
	if got.auth != "Bearer shk_a" || got.ctype != "application/json" || got.extra != "v" || got.body != `{"n":1}` {
		t.Errorf("request: %+v", got)
	}
	if r.Status != http.StatusTeapot || !r.Envelope || r.Success || r.Message != "no" || string(r.Data) != `{"code":"x"}` {
		t.Errorf("reply: %+v (%s)", r, r.Raw)
	}

	r = c.As("").Do("PUT", "/plain", strings.NewReader("raw"))
	if got.auth != "" || got.ctype != "" || got.body != "raw" {
		t.Errorf("raw request: %+v", got)
	}
	if r.Status != http.StatusOK || r.Envelope || string(r.Raw) != "plain text" {
		t.Errorf("plain reply: %+v", r)
	}
}

// TestClientEndToEnd drives a real server: an agent key, a sandbox, a
// command in it, and JSON's decoding of the answer.
func TestClientEndToEnd(t *testing.T) {
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	k := admin.NewKey("client-agent", "agent")
	if k.Role != "agent" {
		t.Errorf("new key: %+v", k)
	}
	agent := admin.As(k.Key)
	if r := agent.Do("GET", "/v1/keys", nil); r.Status != http.StatusForbidden || r.Success {
		t.Errorf("agent key listing keys: %d %s", r.Status, r.Raw)
	}
	id := agent.NewSandbox(map[string]any{"name": "client"})
	res := agent.Exec(id, "echo hi; echo err >&2; exit 3")
	if res.Stdout != "hi\n" || res.Stderr != "err\n" || res.ExitCode == nil || *res.ExitCode != 3 {
		t.Errorf("exec: %+v", res)
	}
	var list []json.RawMessage
	agent.JSON("GET", "/v1/sandboxes", nil, http.StatusOK, &list)
	if len(list) != 1 {
		t.Errorf("agent sees %d sandboxes, want 1", len(list))
	}
}
