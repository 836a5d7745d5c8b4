package daemon_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// TestTicketsOpenOnlyTheirScope is issue 29's row 7: a ticket was a general
// credential (POST /v1/sandboxes/{id}/exec?ticket=… ran, and a ticket
// minted the next). A ticket now opens only the routes of the scope it was
// minted for, and no route that acts or mints takes one.
func TestTicketsOpenOnlyTheirScope(t *testing.T) {
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	a := admin.As(admin.NewKey("agent", "agent").Key)
	anon := a.As("")
	id := a.NewSandbox(nil)
	// refused: 401, or 429 once the refusals (counted like wrong keys)
	// have locked the address out; a valid ticket on its own route still
	// passes then (it has the shape of 32 random bytes).
	refused := func(r daemontest.Reply) bool {
		return r.Status == http.StatusUnauthorized || r.Status == http.StatusTooManyRequests
	}
	mint := func(scope string) string {
		t.Helper()
		var tk struct {
			Ticket string `json:"ticket"`
			Scope  string `json:"scope"`
		}
		a.JSON("POST", "/v1/tickets", map[string]string{"scope": scope}, http.StatusCreated, &tk)
		if tk.Scope != scope {
			t.Fatalf("minted %q, answered scope %q", scope, tk.Scope)
		}
		return url.QueryEscape(tk.Ticket)
	}

	// Routes that act: no ticket of any scope opens them.
	acting := []struct {
		name, method, path string
		body               any
	}{
		{"exec", "POST", "/v1/sandboxes/" + id + "/exec", map[string]string{"command": "id"}},
		{"mint a ticket", "POST", "/v1/tickets", map[string]string{"scope": "terminal"}},
		{"AIO's mint", "POST", "/tickets", nil},
		{"list sandboxes", "GET", "/v1/sandboxes", nil},
		{"AIO exec", "POST", "/sandboxes/" + id + "/v1/shell/exec", map[string]string{"command": "id"}},
		{"read the audit", "GET", "/v1/audit", nil},
	}
	for _, scope := range []string{"terminal", "cdp", "vnc", "preview", "console"} {
		for _, rt := range acting {
			t.Run(scope+" ticket on "+rt.name, func(t *testing.T) {
				r := anon.Do(rt.method, rt.path+"?ticket="+mint(scope), rt.body)
				if !refused(r) {
					t.Fatalf("%s %s with a %s ticket: %d %s, want 401", rt.method, rt.path, scope, r.Status, r.Raw)
				}
			})
		}
	}

	// Each relay route takes its own scope and no other. A route that
	// authenticated answers something other than 401 (a GET without an
	// upgrade is refused by the handler, a foreign port by the tool).
	routes := map[string]string{
		"terminal": "/sandboxes/" + id + "/v1/shell/ws",
		"cdp":      "/sandboxes/sb_nope/cdp/json/version",
		"vnc":      "/sandboxes/" + id + "/vnc/websockify",
		"preview":  "/sandboxes/sb_nope/proxy/3000/",
	}
	for routeScope, path := range routes {
		for _, scope := range []string{"terminal", "cdp", "vnc", "preview", "console"} {
			t.Run(scope+" ticket on the "+routeScope+" route", func(t *testing.T) {
				r := anon.Do("GET", path+"?ticket="+mint(scope), nil)
				if scope == routeScope && refused(r) {
					t.Fatalf("its own route refused it: %s", r.Raw)
				}
				if scope != routeScope && !refused(r) {
					t.Fatalf("a %s ticket on %s: %d %s, want 401", scope, path, r.Status, r.Raw)
				}
			})
		}
	}

	// AIO's auth_request check says who any ticket belongs to.
	if r := anon.Do("GET", "/auth?ticket="+mint("preview"), nil); r.Status != http.StatusOK {
		t.Fatalf("GET /auth with a preview ticket: %d %s", r.Status, r.Raw)
	}
	// A ticket minted without a scope is refused at minting.
	if r := a.Do("POST", "/v1/tickets", map[string]string{}); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a ticket without a scope: %d %s, want 422", r.Status, r.Raw)
	}
}
