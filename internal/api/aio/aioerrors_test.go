package aio

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/aiocompat/aiotest"
	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/api/apitest"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/workspace"
)

// newAIORequest returns aioRequest: a request on rt's path in a given
// sandbox, as the server's middleware hands it to the row (with the AIO
// table's status rule). The server mounts no row: every path reaches the
// catch-all that keeps the request.
func newAIORequest(t *testing.T) func(rt *aioRoute) *http.Request {
	s := apitest.New(t, nil)
	s.UseTable(table{})
	var out *http.Request
	s.Router().HandleFunc("/*", func(_ http.ResponseWriter, r *http.Request) { out = r })
	return func(rt *aioRoute) *http.Request {
		out = nil
		req := httptest.NewRequest(rt.Method, aioPath(rt), nil)
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+apitest.AdminKey)
		s.Handler().ServeHTTP(httptest.NewRecorder(), req)
		if out == nil {
			t.Fatalf("%s %s did not reach the catch-all", rt.Method, rt.Path)
		}
		return out
	}
}

// aioPath is rt's path in sandbox sb1, each parameter x.
func aioPath(rt *aioRoute) string {
	path := "/sandboxes/sb1" + rt.Path
	for {
		i := strings.IndexByte(path, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(path[i:], '}')
		path = path[:i] + "x" + path[i+j+1:]
	}
	return path
}

// TestAIOFailuresMatchAIOSchemas renders every failure kind of every AIO
// row (through the edge's writer and WriteError, the plain handlers'):
// a tool-level failure is HTTP 200 whose body AIO's own schema for the
// operation accepts (data null, or a FileOperationError on file rows: AIO's
// SDKs refused {code, request_id} there); every other failure is
// sandhold's error envelope, one shape whatever the category — a rate
// limit is data.code rate_limited on a shell row as on a code or file row.
func TestAIOFailuresMatchAIOSchemas(t *testing.T) {
	v := aiotest.Load(t)
	aioRequest := newAIORequest(t)
	fileForbidden := &fault.Error{Kind: fault.Forbidden, Msg: "sensitive", Err: &workspace.FileError{ErrorType: workspace.TypePermissionDenied}}
	toolLevel := []struct {
		name string
		err  error
	}{
		{"unknown session", fault.New(fault.NotFound, "session not found")},
		{"conflict", fault.New(fault.Conflict, "busy")},
		{"timeout", fault.New(fault.Timeout, "slow")},
		{"unsupported", fault.New(fault.Unsupported, "no")},
		{"file policy", fileForbidden},
	}
	rl := &dispatch.RateLimited{Category: ratelimit.Command, Decision: ratelimit.Decision{Limit: 10, Reset: time.Now().Add(time.Minute)}}
	realStatus := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"rate limited", &fault.Error{Kind: fault.RateLimited, Msg: "slow down", RetryAfter: 3, Err: rl}, 429, "rate_limited"},
		{"policy refusal", fault.New(fault.Forbidden, "policy denies"), 403, "forbidden"},
		{"missing sandbox", fault.Wrap(fault.NotFound, sandbox.ErrNoSandbox, "sandbox not found"), 404, "not_found"},
		{"internal", errors.New("boom"), 500, "internal"},
		{"unavailable", fault.New(fault.Unavailable, "down"), 503, "unavailable"},
	}
	e := &aioEdge{params: map[*aioRoute]map[string]string{}}
	checked := 0
	for i := range aioTable {
		rt := &aioTable[i]
		if rt.Native || rt.RealStatus {
			continue
		}
		if !answersEnvelope(v, rt) {
			// sandhold's own row under an AIO prefix, a stream or a file,
			// or an answer that is more than an envelope (GET /v1/sandbox,
			// which has no tool-level failure): no failure can match AIO's
			// schema there.
			continue
		}
		checked++
		t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
			for _, c := range toolLevel {
				writers := map[string]func(w http.ResponseWriter, r *http.Request){
					"edge": func(w http.ResponseWriter, r *http.Request) { e.fail(w, r, rt, "/workspace/x", c.err) },
				}
				if rt.Fail != failFile {
					writers["WriteError"] = func(w http.ResponseWriter, r *http.Request) { api.WriteError(w, r, c.err) }
				}
				for wn, write := range writers {
					rec := httptest.NewRecorder()
					write(rec, aioRequest(rt))
					if rec.Code != http.StatusOK {
						t.Fatalf("%s, %s: status %d, want 200 (a tool-level failure): %s", c.name, wn, rec.Code, rec.Body)
					}
					if err := v.Validate(rt.Method, rt.Path, rec.Body.Bytes()); err != nil {
						t.Fatalf("%s, %s: %v\nbody: %s", c.name, wn, err, rec.Body)
					}
					var env struct {
						Success bool            `json:"success"`
						Data    json.RawMessage `json:"data"`
					}
					_ = json.Unmarshal(rec.Body.Bytes(), &env)
					if env.Success || (rt.Fail != failFile && string(env.Data) != "null") {
						t.Fatalf("%s, %s: %s, want success false and data null", c.name, wn, rec.Body)
					}
				}
			}
			for _, c := range realStatus {
				rec := httptest.NewRecorder()
				e.fail(rec, aioRequest(rt), rt, "/workspace/x", c.err)
				var env struct {
					Success bool          `json:"success"`
					Data    api.ErrorData `json:"data"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != c.status || env.Success || env.Data.Code != c.code {
					t.Fatalf("%s: %d %s, want %d with data.code %s", c.name, rec.Code, rec.Body, c.status, c.code)
				}
			}
		})
	}
	if checked < 30 {
		t.Fatalf("only %d AIO rows checked: the row filter is wrong", checked)
	}
	t.Logf("%d AIO rows checked", checked)
}

// answersEnvelope says whether AIO documents rt's 200 answer as its
// envelope (success, message, data, hint) in JSON.
func answersEnvelope(v *aiotest.Validator, rt *aioRoute) bool {
	op, err := v.Operation(rt.Method, rt.Path)
	if err != nil {
		return false
	}
	resp := op.Responses.Status(200)
	if resp == nil || resp.Value == nil {
		return false
	}
	mt := resp.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return false
	}
	if _, ok := mt.Schema.Value.Properties["success"]; !ok {
		return false
	}
	for _, r := range mt.Schema.Value.Required {
		switch r {
		case "success", "message", "data", "hint":
		default:
			return false // GET /v1/sandbox: the envelope plus the sandbox's fields
		}
	}
	return true
}
