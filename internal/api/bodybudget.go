package api

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
)

// bodyBudget bounds the request bodies the server holds in memory at once
// (SANDBOX_BODY_BUDGET): JSON bodies are a call's arguments, read whole
// before the dispatcher decides on the call, so many large ones at once —
// from one key or several — could take the server's memory although each
// is within SANDBOX_MAX_BODY and every call is then refused. A request
// reserves its announced length before a byte is read and gives it back
// when it is answered; one key may hold a quarter of the budget, so one
// client cannot starve the rest. Streamed bodies (uploads) are read by
// their tool in chunks into the sandbox and are not counted.
type bodyBudget struct {
	total, perKey int64

	// mu guards the fields below.
	mu    sync.Mutex
	used  int64
	byKey map[string]int64
}

// bodyBudgetShare is the part of the budget one key may hold.
const bodyBudgetShare = 4

func newBodyBudget(total, maxBody int64) *bodyBudget {
	return &bodyBudget{total: total, perKey: max(total/bodyBudgetShare, maxBody), byKey: map[string]int64{}}
}

// take reserves n bytes for key; it returns the release, or the refusal.
func (b *bodyBudget) take(key string, n int64) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.byKey[key]+n > b.perKey:
		return nil, &fault.Error{Kind: fault.RateLimited, RetryAfter: 1,
			Msg: fmt.Sprintf("this key has %d bytes of request bodies in flight, its share of the server's body budget; retry when they are answered", b.byKey[key])}
	case b.used+n > b.total:
		return nil, &fault.Error{Kind: fault.Unavailable, RetryAfter: 1,
			Msg: "the server holds as many request bodies as it may (SANDBOX_BODY_BUDGET); retry shortly"}
	}
	b.used += n
	b.byKey[key] += n
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.used -= n
			if b.byKey[key] -= n; b.byKey[key] <= 0 {
				delete(b.byKey, key)
			}
		})
	}, nil
}

// bodyBudgetMiddleware reserves a request's body in the budget before the
// handler reads it (after authentication: the key is known). Bodies of
// streamed routes and bodiless requests pass.
func (s *Server) bodyBudgetMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || s.largeBody(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		// An unannounced length may be anything up to the cap.
		limit := s.cfg.MaxBody.Bytes()
		n := min(r.ContentLength, limit+1)
		if n < 0 {
			n = limit + 1
		}
		key := ""
		if c, ok := auth.CallerFrom(r.Context()); ok {
			key = c.KeyID
		}
		release, err := s.bodies.take(key, n)
		if err != nil {
			w.Header().Set("Connection", "close") // the body is not read
			WriteError(w, r, err)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// largeBody reports whether path's body is streamed (AllowLargeBodies).
func (s *Server) largeBody(path string) bool {
	for _, p := range s.largeBodyPrefixes {
		if pathHasPrefix(path, p) {
			return true
		}
	}
	return false
}

// pathHasPrefix is strings.HasPrefix where a "*" segment of prefix
// matches any one non-empty segment of p.
func pathHasPrefix(p, prefix string) bool {
	if !strings.Contains(prefix, "*") {
		return strings.HasPrefix(p, prefix)
	}
	// Segment by segment without splitting: it runs for every request
	// (bodyLimitMiddleware), so it allocates nothing.
	for {
		q, qRest, qMore := strings.Cut(prefix, "/")
		s, sRest, sMore := strings.Cut(p, "/")
		switch {
		case q == "*":
			if s == "" {
				return false
			}
		case !qMore: // the pattern's last segment: a prefix of the path's
			return strings.HasPrefix(s, q)
		case s != q:
			return false
		}
		if !qMore {
			return true
		}
		if !sMore {
			return false // the path has fewer segments than the pattern
		}
		prefix, p = qRest, sRest
	}
}
