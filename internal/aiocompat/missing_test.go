package aiocompat_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// requestIDs are the parts of an answer that differ from call to call.
var requestIDs = regexp.MustCompile(`req_[0-9a-f]+`)

// TestMissingOrForeignSandboxIs404 calls every AIO operation the
// conformance run calls at /sandboxes/{id}/v1/... with an id that does not
// exist and with another key's sandbox: both are a real 404 (a routing
// failure, not the tool's: AIO's 200 with success:false stays for tool
// results), and the two answers are the same, so nothing tells a caller
// that the other key's sandbox exists.
func TestMissingOrForeignSandboxIs404(t *testing.T) {
	s := startServer(t)
	owner := s.c.As(s.c.NewKey("owner", "agent").Key)
	other := s.c.As(s.c.NewKey("other", "agent").Key)
	foreign := owner.NewSandbox(map[string]any{"name": "foreign"})
	calls := 0
	for _, sp := range steps() {
		if !strings.HasPrefix(sp.path, "/v1/") || !s.routes[sp.method+" /sandboxes/{id}"+sp.path] {
			continue // not served per sandbox (tickets, auth)
		}
		path := sp.path
		for k, v := range sp.params {
			path = strings.ReplaceAll(path, "{"+k+"}", url.PathEscape(v))
		}
		path = regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllString(path, "x")
		if sp.query != "" {
			path += "?" + sp.query
		}
		body, ctype := stepBody(sp, state{"command_id": "x"})
		answers := map[string]string{}
		for name, id := range map[string]string{"missing": "sb0000000000000000", "foreign": foreign} {
			var hdr []string
			if ctype != "" {
				hdr = []string{"Content-Type", ctype}
			}
			r := other.Do(sp.method, "/sandboxes/"+id+path, bytes.NewReader(body), hdr...)
			calls++
			if r.Status != 404 {
				t.Errorf("%s %s in a %s sandbox: status %d, want 404: %s", sp.method, path, name, r.Status, trim(r.Raw))
				continue
			}
			var env struct {
				Success bool `json:"success"`
				Data    struct {
					Code string `json:"code"`
				} `json:"data"`
			}
			if err := json.Unmarshal(r.Raw, &env); err != nil || env.Success || env.Data.Code != "not_found" {
				t.Errorf("%s %s in a %s sandbox: %s, want the error envelope with code not_found", sp.method, path, name, trim(r.Raw))
			}
			answers[name] = requestIDs.ReplaceAllString(string(r.Raw), "req_")
		}
		if len(answers) == 2 && answers["missing"] != answers["foreign"] {
			t.Errorf("%s %s: a missing and a foreign sandbox answer differently:\n%s\n%s", sp.method, path, answers["missing"], answers["foreign"])
		}
	}
	if calls < 100 {
		t.Fatalf("only %d calls: the steps were not found", calls)
	}
	t.Logf("%d calls", calls)
}
