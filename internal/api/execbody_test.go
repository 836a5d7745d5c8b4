package api

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestExecBodyReachesTheRequest: every field of POST /v1/sandboxes/{id}/exec
// arrives in the sandbox's ExecRequest (keep included: without it the
// command's leftovers die with it).
func TestExecBodyReachesTheRequest(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/sandboxes/sb1/exec", strings.NewReader(
		`{"command":"nohup srv &","cwd":"/tmp","env":{"A":"1"},"timeout":5,"stdin":"in","background":true,"keep":true,"sudo":true,"output_limit":10}`))
	var body ExecBody
	if err := decodeJSON(r, &body); err != nil {
		t.Fatal(err)
	}
	a := body.args("sb1")
	req := a.Request()
	checks := []struct {
		name string
		ok   bool
	}{
		{"id", a.ID == "sb1"},
		{"command", req.Command == "nohup srv &"},
		{"cwd", req.Cwd == "/tmp"},
		{"env", req.Env["A"] == "1"},
		{"timeout", req.Timeout.Seconds() == 5},
		{"stdin", string(req.Stdin) == "in"},
		{"background", req.Background},
		{"keep", req.Keep},
		{"sudo", req.Sudo},
		{"output_limit", req.OutputLimit == 10},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s did not reach the request: %+v", c.name, req)
		}
	}
}
