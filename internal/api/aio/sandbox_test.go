package aio

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/sandbox/proxytools"
)

// TestRowsNameTheirSandboxByOn: every row's request type with a sandbox
// field names it through an embedded dispatch.On, so setSandbox puts the
// URL's sandbox there (a row whose arguments named it by a field of their
// own, or whose field hid On's ActOn, would take the body's).
func TestRowsNameTheirSandboxByOn(t *testing.T) {
	targeted := reflect.TypeFor[dispatch.Targeted]()
	n := 0
	for i := range aioTable {
		rt := &aioTable[i]
		if rt.Req == nil || rt.Req.Kind() != reflect.Struct {
			continue
		}
		for _, f := range reflect.VisibleFields(rt.Req) {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "sandbox" {
				continue
			}
			n++
			if !reflect.PointerTo(rt.Req).Implements(targeted) {
				t.Errorf("%s %s: %s has a sandbox field that is not its dispatch.On", rt.Method, rt.Path, rt.Req)
			}
		}
	}
	if n == 0 {
		t.Fatal("no row's arguments name a sandbox: the reader is broken")
	}
}

// whereArgs are a probe tool's arguments: it answers the sandbox it was
// given.
type whereArgs struct {
	dispatch.On
	N int `json:"n"`
}

var toolWhere = dispatch.Ref[whereArgs, string]("test.where")

// TestBodyCannotChooseTheSandbox: a row at /sandboxes/{id}/v1/... acts on
// that sandbox and one at /v1/... on the caller's default, whatever the
// body's "sandbox" says.
func TestBodyCannotChooseTheSandbox(t *testing.T) {
	s := newServer(t)
	s.D.MustRegister(dispatch.Define(toolWhere, dispatch.Spec{Description: "where", Risk: guard.Safe, Lenient: true},
		func(_ context.Context, _ auth.Caller, a whereArgs) (string, error) { return a.SandboxID(), nil },
		dispatch.Hooks[whereArgs, string]{}))
	s.D.MustRegister(dispatch.Define(proxytools.ToolMappingAdd, dispatch.Spec{Description: "where", Risk: guard.Safe, Lenient: true},
		func(_ context.Context, _ auth.Caller, a proxytools.MappingArgs) (proxytools.MappingRoute, error) {
			return proxytools.MappingRoute{Source: a.SandboxID()}, nil
		}, dispatch.Hooks[proxytools.MappingArgs, proxytools.MappingRoute]{}))
	rt := jsonRow("test", http.MethodPost, "/v1/shell/wait", toolWhere, "test", "where")
	mountRows(s.Server, s.D, []*aioRoute{&rt, aioRow(http.MethodPost, "/v1/proxy/mappings")})
	for _, c := range []struct{ path, body, want string }{
		{"/sandboxes/sb1/v1/shell/wait", `{"sandbox":"other","n":1}`, `"sb1"`},
		{"/v1/shell/wait", `{"sandbox":"other","n":1}`, `""`}, // data is the string itself
		{"/sandboxes/sb1/v1/proxy/mappings", `{"sandbox":"other","source":"a.example","target":"3000"}`, `"source":"sb1"`},
		{"/v1/proxy/mappings", `{"sandbox":"other","source":"a.example","target":"3000"}`, `"source":""`},
	} {
		req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+s.AgentKey)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		var out struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != http.StatusOK || !strings.Contains(string(out.Data), c.want) {
			t.Fatalf("%s: %d %s, want the tool to act on %q", c.path, rec.Code, rec.Body, c.want)
		}
	}
}
