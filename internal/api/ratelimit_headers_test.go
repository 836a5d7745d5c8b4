package api

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// TestSuccessCarriesRateLimitHeaders: an allowed call answers with the
// X-RateLimit-* headers of the category its tool counts against, a
// command counts as command (not code), and a call of an unlimited tool
// has none.
func TestSuccessCarriesRateLimitHeaders(t *testing.T) {
	e := newEdgeServer(t)
	d := dispatch.New(dispatch.Options{Audit: e.s.audit, Limiter: ratelimit.New(ratelimit.Options{})})
	useFoundation(e.s, d)
	run := func(context.Context, auth.Caller, any) (any, error) { return "ok", nil }
	d.MustRegister(dispatch.Tool{Name: "shell.test", Risk: guard.Safe, Category: ratelimit.Exec, Run: run})
	d.MustRegister(dispatch.Tool{Name: "code.test", Risk: guard.Safe, Category: ratelimit.Exec, Run: run})
	d.MustRegister(dispatch.Tool{Name: "plain.test", Risk: guard.Safe, Run: run})
	for _, name := range []string{"shell.test", "code.test", "plain.test"} {
		e.s.Router().Get("/v1/test/"+name, func(w http.ResponseWriter, r *http.Request) {
			c, _ := MustCaller(r.Context())
			res, err := d.Call(r.Context(), c, name, nil)
			if err != nil {
				WriteError(w, r, err)
				return
			}
			WriteData(w, http.StatusOK, res)
		})
	}
	auth := map[string]string{"Authorization": "Bearer " + e.agentKey}
	get := func(name string) http.Header {
		rec := e.req("GET", "/v1/test/"+name, "192.0.2.1:1", "", auth)
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", name, rec.Code, rec.Body)
		}
		return rec.Header()
	}
	h1, h2 := get("shell.test"), get("shell.test")
	if h1.Get("X-RateLimit-Limit") != strconv.Itoa(ratelimit.DefaultCommandBurst) {
		t.Fatalf("command limit header %q, want %d (the command burst)", h1.Get("X-RateLimit-Limit"), ratelimit.DefaultCommandBurst)
	}
	r1, _ := strconv.Atoi(h1.Get("X-RateLimit-Remaining"))
	r2, _ := strconv.Atoi(h2.Get("X-RateLimit-Remaining"))
	if r1 != ratelimit.DefaultCommandBurst-1 || r2 != r1-1 {
		t.Fatalf("remaining %d then %d, want %d then %d", r1, r2, ratelimit.DefaultCommandBurst-1, ratelimit.DefaultCommandBurst-2)
	}
	if h2.Get("X-RateLimit-Reset") == "" {
		t.Fatal("no X-RateLimit-Reset")
	}
	if h := get("code.test"); h.Get("X-RateLimit-Limit") != strconv.Itoa(ratelimit.DefaultExecBurst) || h.Get("X-RateLimit-Remaining") != strconv.Itoa(ratelimit.DefaultExecBurst-1) {
		t.Fatalf("code headers %v: commands must not have used the code budget", h)
	}
	if h := get("plain.test"); h.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("an unlimited tool got %v", h)
	}
}
