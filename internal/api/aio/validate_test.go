package aio

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// countArgs are a probe tool's arguments whose Validate counts its runs.
type countArgs struct {
	dispatch.On
	N int `json:"n"`
}

var validations atomic.Int64

// Validate refuses a negative n.
func (a countArgs) Validate() error {
	validations.Add(1)
	if a.N < 0 {
		return fault.InvalidField("n", "n must not be negative")
	}
	return nil
}

var toolCount = dispatch.Ref[countArgs, int]("test.count")

type haltSwitch struct{ on atomic.Bool }

func (h *haltSwitch) Halted() (bool, string) { return h.on.Load(), "test" }

// TestAIOArgumentsAreValidatedOnce: an AIO call's arguments are validated
// once, by the dispatcher (before: by the edge's decoder, the edge's
// pre-check and the dispatcher — three runs), and a refusal is still AIO's
// 422 on a row that answers field rules that way and on one whose tool's
// run-time refusals are tool-level failures (a run-time refusal stays 200
// there). A call both invalid and halted answers HALT's refusal: the
// dispatcher's order.
func TestAIOArgumentsAreValidatedOnce(t *testing.T) {
	s := newServer(t)
	s.D.MustRegister(dispatch.Define(toolCount, dispatch.Spec{Description: "count", Risk: guard.Safe, Lenient: true},
		func(_ context.Context, _ auth.Caller, a countArgs) (int, error) {
			if a.N == 13 {
				return 0, fault.InvalidField("n", "13 is refused as the tool runs")
			}
			return a.N, nil
		}, dispatch.Hooks[countArgs, int]{}))
	// At two of AIO's paths (the status rule is the table's), with a
	// field rule answered as the 422 (shell's) and as a tool-level
	// failure (code's).
	plain := jsonRow("test", http.MethodPost, "/v1/shell/view", toolCount, "test", "count")
	late := jsonRow("test", http.MethodPost, "/v1/code/execute", toolCount, "test", "count", lateInvalidFails())
	mountRows(s.Server, s.D, []*aioRoute{&plain, &late})
	halt := &haltSwitch{}
	s.D.SetHalt(halt)

	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+s.AgentKey)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, rec.Body)
		}
		return rec.Code, out
	}
	for _, c := range []struct {
		name, path, body string
		halted           bool
		status           int
		detail           bool  // AIO's 422 body: a detail list at body.n
		runs             int64 // Validate's runs
	}{
		{"valid", "/v1/shell/view", `{"n":2}`, false, 200, false, 1},
		{"valid, late row", "/v1/code/execute", `{"n":2}`, false, 200, false, 1},
		{"invalid", "/v1/shell/view", `{"n":-1}`, false, 422, true, 1},
		// The row tells the dispatcher's refusal from the run's by the
		// dispatcher's mark (dispatch.ArgsRefused), not a second Validate.
		{"invalid, late row", "/v1/code/execute", `{"n":-1}`, false, 422, true, 1},
		{"refused as it runs, late row", "/v1/code/execute", `{"n":13}`, false, 200, false, 1},
		{"refused as it runs", "/v1/shell/view", `{"n":13}`, false, 422, true, 1},
		// HALT's refusal (409, dispatch.ErrHalted), not the 422, and no
		// validation.
		{"invalid and halted", "/v1/shell/view", `{"n":-1}`, true, 409, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			halt.on.Store(c.halted)
			before := validations.Load()
			status, out := post(c.path, c.body)
			if status != c.status {
				t.Fatalf("status %d, want %d: %v", status, c.status, out)
			}
			if got := validations.Load() - before; got != c.runs {
				t.Fatalf("Validate ran %d times, want %d", got, c.runs)
			}
			detail, _ := out["detail"].([]any)
			if c.detail {
				d, _ := detail[0].(map[string]any)
				if len(detail) != 1 || d["type"] != "value_error" || len(d["loc"].([]any)) != 2 || d["loc"].([]any)[1] != "n" {
					t.Fatalf("422 body %v, want AIO's detail at body.n", out)
				}
			} else if detail != nil {
				t.Fatalf("a detail list on a %d: %v", status, out)
			}
			if status == 200 && (c.body == `{"n":13}` || c.halted) && (out["success"] != false || out["data"] != nil) {
				t.Fatalf("%v, want success false, data null", out)
			}
			if msg, _ := out["message"].(string); c.halted != strings.Contains(msg, "halted") {
				t.Fatalf("message %q, halted: %v", msg, c.halted)
			}
		})
	}
}
