package aiocompat_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// routesNotDocumented are served routes the OpenAPI document leaves out on
// purpose, each with its reason.
var routesNotDocumented = map[string]string{
	"GET /docs":             "the HTML page that renders /openapi.json",
	"GET /openapi.json":     "the document itself",
	"GET /openapi.yaml":     "the document itself",
	"GET /openapi-3.0.json": "the document itself, downgraded for older tools",
	"GET /openapi-3.0.yaml": "the document itself, downgraded for older tools",
	// The web console's pages (internal/console): HTML and bundled assets
	// for a person's browser, not API operations.
	"GET /":                              "the web console's page",
	"GET /console/assets/*":              "the web console's bundled assets",
	"GET /sandboxes/{id}/vnc/index.html": "the noVNC page (its WebSocket relay is documented)",
}

// foreignAPIs are route prefixes (and paths) of another product's API
// served as that product defines it, so their contract is that product's
// own documents, not sandhold's OpenAPI, each with its reason.
var foreignAPIs = map[string]string{
	"/e2b/":  "E2B's control plane and envd protocol (docs/e2b.md): E2B's OpenAPI and .proto files are the contract",
	"/files": "E2B's signed file URLs at the host's root (docs/e2b.md)",
}

func foreignAPI(pattern string) bool {
	for p := range foreignAPIs {
		if pattern == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(pattern, p)) {
			return true
		}
	}
	return false
}

// TestOpenAPIListsEveryRoute walks the real router and compares it with
// GET /openapi.json in both directions: every served route (both prefixes
// of the AIO routes) is documented, and every documented operation is
// served.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	s := startServer(t)
	st, _, body := s.call("GET", "/openapi.json", "", nil)
	if st != 200 {
		t.Fatalf("GET /openapi.json: %d", st)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for p, item := range doc.Paths {
		for m := range item {
			switch m {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				documented[strings.ToUpper(m)+" "+p] = true
			}
		}
	}
	var missing, extra []string
	for r := range s.routes {
		method, pattern, _ := strings.Cut(r, " ")
		if method == http.MethodHead || method == http.MethodOptions || routesNotDocumented[r] != "" || foreignAPI(pattern) {
			continue
		}
		pattern = strings.TrimSuffix(pattern, "/*")
		if !documented[method+" "+pattern] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		// A documented path stands for its subtree when the router
		// serves it with a trailing wildcard (the relays).
		if !s.routes[r] && !s.routes[r+"/*"] {
			extra = append(extra, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, r := range missing {
		t.Errorf("served but not in /openapi.json: %s", r)
	}
	for _, r := range extra {
		t.Errorf("in /openapi.json but not served: %s", r)
	}
	t.Logf("%d routes served, %d operations documented", len(s.routes), len(documented))
}
