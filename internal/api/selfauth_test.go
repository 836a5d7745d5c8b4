package api

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
)

// TestSelfAuthenticatedRoutes: a self-authenticated mount gets requests
// with no key (its handler authenticates), with an Authorization header
// that is not a key, with any media type and a body over the JSON cap —
// and only below its prefix (or at its exact path): the routes beside it
// still need a key.
func TestSelfAuthenticatedRoutes(t *testing.T) {
	s, key := newTestServer(t) // SANDBOX_MAX_BODY 4096
	var got []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, hasCaller := auth.CallerFrom(r.Context())
		got = append(got, r.URL.Path+" "+strings.Repeat("x", min(len(b), 1))+" caller="+map[bool]string{true: "yes", false: "no"}[hasCaller])
		w.WriteHeader(http.StatusTeapot)
	})
	s.MountSelfAuthenticated("/proto", h)
	s.MountSelfAuthenticatedPath("/exact", h)
	big := bytes.Repeat([]byte("a"), 10000)
	for _, tc := range []struct {
		name, method, path, ctype, authz string
		body                             []byte
		want                             int
	}{
		{"no key below the prefix", http.MethodGet, "/proto/x", "", "", nil, http.StatusTeapot},
		{"a Basic user header, a body over the cap, any type", http.MethodPost, "/proto/svc/Call", "application/octet-stream", "Basic dXNlcjo=", big, http.StatusTeapot},
		{"multipart", http.MethodPost, "/proto/files", "multipart/form-data; boundary=b", "", []byte("--b--"), http.StatusTeapot},
		{"the exact path", http.MethodPost, "/exact", "text/plain", "", []byte("x"), http.StatusTeapot},
		{"the prefix itself is not mounted", http.MethodGet, "/proto", "", "", nil, http.StatusUnauthorized},
		{"below the exact path is not mounted", http.MethodGet, "/exact/x", "", "", nil, http.StatusUnauthorized},
		{"a neighbour still needs a key", http.MethodGet, "/protox", "", "", nil, http.StatusUnauthorized},
		{"a key route still refuses Basic", http.MethodGet, "/v1/keys", "", "Basic dXNlcjo=", nil, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, bytes.NewReader(tc.body))
			req.Host = "127.0.0.1"
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			if tc.authz != "" {
				req.Header.Set("Authorization", tc.authz)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("%s %s: %d %s (want %d)", tc.method, tc.path, rec.Code, rec.Body, tc.want)
			}
		})
	}
	// The handler saw no caller: nothing was authenticated for it.
	for _, g := range got {
		if !strings.HasSuffix(g, "caller=no") {
			t.Fatalf("a self-authenticated handler got a caller: %v", got)
		}
	}
	_ = key
}
