package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// fakeClock is a movable clock for the limiter.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRateLimitedAnswer drives a real dispatcher and limiter (tiny rule,
// fake clock) through WriteError: the refusal is a 429 with Retry-After
// and X-RateLimit-*, and the client is let back in once the window passed.
func TestRateLimitedAnswer(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	lim := ratelimit.New(ratelimit.Options{Now: clk.Now, Rules: ratelimit.Rules{ratelimit.Exec: {PerMinute: 60, Burst: 2}}})
	d := dispatch.New(dispatch.Options{Limiter: lim})
	d.MustRegister(dispatch.Tool{Name: "exec.test", Risk: guard.Safe, Category: ratelimit.Exec,
		Run: func(context.Context, auth.Caller, any) (any, error) { return "ok", nil }})
	caller := auth.Caller{KeyID: "k1", Role: auth.RoleAgent}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := d.Dispatch(r.Context(), caller, "exec.test", nil); err != nil {
			WriteError(w, r, err)
			return
		}
		WriteData(w, http.StatusOK, "ok")
	})
	call := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/x", nil))
		return rec
	}
	for i := range 2 {
		if rec := call(); rec.Code != http.StatusOK {
			t.Fatalf("call %d: %d", i, rec.Code)
		}
	}
	for _, step := range []struct {
		name      string
		advance   time.Duration
		status    int
		remaining string
	}{
		{"over the burst", 0, http.StatusTooManyRequests, "0"},
		{"still refused, and refusals are not counted", 500 * time.Millisecond, http.StatusTooManyRequests, "0"},
		{"one token back after a second", 500 * time.Millisecond, http.StatusOK, ""},
		{"empty again", 0, http.StatusTooManyRequests, "0"},
	} {
		clk.advance(step.advance)
		rec := call()
		if rec.Code != step.status {
			t.Fatalf("%s: status %d, want %d", step.name, rec.Code, step.status)
		}
		if step.status != http.StatusTooManyRequests {
			continue
		}
		hd := rec.Header()
		reset, err := strconv.ParseInt(hd.Get("X-RateLimit-Reset"), 10, 64)
		if hd.Get("Retry-After") != "1" || hd.Get("X-RateLimit-Limit") != "2" || hd.Get("X-RateLimit-Remaining") != step.remaining ||
			err != nil || reset <= clk.Now().Unix() {
			t.Fatalf("%s: headers %v", step.name, hd)
		}
	}
}

func TestSetRateLimitHeadersUnlimited(t *testing.T) {
	h := http.Header{}
	SetRateLimitHeaders(h, ratelimit.Decision{Allowed: true})
	if len(h) != 0 {
		t.Fatalf("an unlimited decision set headers: %v", h)
	}
}

// TestRetryAfterOnlyRefusal: a 429 without a limiter decision (the
// failed-auth lockout) still says when to come back.
func TestRetryAfterOnlyRefusal(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, httptest.NewRequest("GET", "/x", nil), fault.WithRetryAfter(fault.RateLimited, 60, "locked out"))
	h := rec.Header()
	reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if rec.Code != http.StatusTooManyRequests || h.Get("Retry-After") != "60" || h.Get("X-RateLimit-Remaining") != "0" ||
		err != nil || reset < time.Now().Unix()+59 || h.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("%d %v", rec.Code, h)
	}
}
