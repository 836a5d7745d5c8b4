package aio

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/api/apitest"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/transfer"
	"github.com/sandhold/sandhold/internal/workspace"
)

func TestIsAIOPath(t *testing.T) {
	for _, c := range []struct {
		name, method, path string
		want               bool
	}{
		{"file", "POST", "/v1/file/read", true},
		{"per-sandbox file", "POST", "/sandboxes/sb1/v1/file/read", true},
		{"shell", "POST", "/v1/shell/exec", true},
		{"code", "POST", "/sandboxes/x/v1/code/execute", true},
		{"jupyter", "POST", "/v1/jupyter/sessions/create", true},
		{"sandbox info", "GET", "/v1/sandbox", true},
		{"own sandboxes", "GET", "/v1/sandboxes", false},
		{"own sandbox item", "POST", "/v1/sandboxes/sb1/exec", false},
		{"keys", "POST", "/v1/keys", false},
		{"audit", "GET", "/v1/audit", false},
		{"policy", "GET", "/v1/policy", false},
		{"download is binary", "GET", "/v1/file/download", false},
		{"per-sandbox download", "GET", "/sandboxes/sb/v1/file/download", false},
		{"upload streams", "POST", "/sandboxes/sb/v1/file/upload", false},
		{"bare sandboxes prefix", "GET", "/sandboxes/sb", false},
		{"healthz", "GET", "/healthz", false},
		{"tricky: namespace as suffix", "GET", "/v1/keys/file", false},
		{"watch poll with id", "POST", "/sandboxes/sb/v1/file/watch/w1/poll", true},
		{"watch stop", "DELETE", "/v1/file/watch/w1", true},
		{"own extension: extract", "POST", "/v1/file/extract", false},
		{"own extension: archive", "GET", "/sandboxes/sb/v1/file/archive", false},
		{"terminal websocket", "GET", "/v1/shell/ws", false},
		{"tricky: empty id segment", "DELETE", "/v1/file/watch/", false},
		{"tricky: extra segment", "POST", "/v1/file/read/x", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := isAIOPath(c.method, c.path); got != c.want {
				t.Fatalf("isAIOPath(%s %s) = %v, want %v", c.method, c.path, got, c.want)
			}
		})
	}
}

// TestAIOToolFailuresAre200 checks the status of each kind of failure on
// an AIO route and on sandhold's own route.
func TestAIOToolFailuresAre200(t *testing.T) {
	fileForbidden := &fault.Error{Kind: fault.Forbidden, Msg: "sensitive", Err: &workspace.FileError{ErrorType: workspace.TypePermissionDenied}}
	fileTooBig := &fault.Error{Kind: fault.TooLarge, Msg: "big", Err: &workspace.FileError{ErrorType: workspace.TypeNoSpace}}
	cases := []struct {
		name     string
		err      error
		aio, own int
	}{
		{"not found", fault.New(fault.NotFound, "no such file"), 200, 404},
		{"conflict", fault.New(fault.Conflict, "exists"), 200, 409},
		{"halted by the operator", fault.Wrap(fault.Conflict, dispatch.ErrHalted, "the server is halted"), 409, 409},
		{"invalid value", fault.InvalidField("regex", "bad regex"), 200, 400},
		{"timeout", fault.New(fault.Timeout, "slow"), 200, 504},
		{"unsupported", fault.New(fault.Unsupported, "no"), 200, 501},
		{"file policy", fileForbidden, 200, 403},
		{"file over cap", fileTooBig, 200, 413},
		{"role or guard refusal", fault.New(fault.Forbidden, "agents may not"), 403, 403},
		{"unauthorized", fault.New(fault.Unauthorized, "no key"), 401, 401},
		{"rate limited", fault.WithRetryAfter(fault.RateLimited, 3, "slow down"), 429, 429},
		{"validation", fault.New(fault.Unprocessable, "schema"), 422, 422},
		{"media type", fault.New("unsupported_media_type", "json only"), 415, 415},
		{"body over limit", fault.New(fault.TooLarge, "body"), 413, 413},
		{"internal", errors.New("boom"), 500, 500},
		{"unavailable", fault.New(fault.Unavailable, "down"), 503, 503},
		{"download changed", transfer.ErrChanged, 409, 409},
	}
	// The server's middleware reads the table (AuthRoutes set it); each
	// route answers the case's error.
	s := newServer(t)
	var fail error
	for _, p := range []string{"/v1/file/read", "/sandboxes/{id}/v1/shell/exec", "/v1/sandboxes/{id}/exec"} {
		s.Router().Post(p, func(w http.ResponseWriter, r *http.Request) { api.WriteError(w, r, fail) })
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fail = c.err
			for _, p := range []struct {
				path string
				want int
			}{{"/v1/file/read", c.aio}, {"/sandboxes/sb1/v1/shell/exec", c.aio}, {"/v1/sandboxes/sb1/exec", c.own}} {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("POST", p.path, strings.NewReader("{}"))
				req.Host = "127.0.0.1"
				req.Header.Set("Authorization", "Bearer "+apitest.AdminKey)
				req.Header.Set("Content-Type", "application/json")
				s.Handler().ServeHTTP(rec, req)
				if rec.Code != p.want {
					t.Fatalf("%s: status %d, want %d", p.path, rec.Code, p.want)
				}
				var env struct {
					Success *bool `json:"success"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Success == nil || *env.Success {
					t.Fatalf("%s: body %s is not a failure envelope", p.path, rec.Body)
				}
			}
		})
	}
}

func TestParseEventID(t *testing.T) {
	for _, c := range []struct {
		name, v string
		want    int64
		ok      bool
	}{
		{"aio form", "w1:7", 7, true},
		{"bare seq", "7", 7, true},
		{"zero", "w1:0", 0, true},
		{"other watch", "w2:7", 0, false},
		{"negative", "w1:-1", 0, false},
		{"garbage", "w1:x", 0, false},
		{"empty", "", 0, false},
		{"tricky: two colons", "w1:3:4", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, ok := parseEventID("w1", c.v)
			if n != c.want || ok != c.ok {
				t.Fatalf("parseEventID(%q) = %d, %v; want %d, %v", c.v, n, ok, c.want, c.ok)
			}
		})
	}
}
