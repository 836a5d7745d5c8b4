package api

import (
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"
)

// The OpenAPI document lists every route the server serves. Routes of
// AIO's namespaces are mounted twice, at /v1/... (the caller's default
// sandbox) and at /sandboxes/{id}/v1/...; several packages document only
// the first form. completeDocument mirrors each documented /v1/...
// operation whose /sandboxes/{id} form is served but not documented, once,
// before the document is first served (huma caches it then). A test in
// internal/aiocompat walks the real router and compares both ways.

// SandboxPrefix is the per-sandbox form of the AIO routes.
const SandboxPrefix = "/sandboxes/{id}"

// openAPIDocMiddleware completes the document before its first request.
func (s *Server) openAPIDocMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/openapi") {
			s.docOnce.Do(s.completeDocument)
		}
		next.ServeHTTP(w, r)
	})
}

// completeDocument adds the missing /sandboxes/{id} forms and the
// Prometheus route.
func (s *Server) completeDocument() {
	oa := s.api.OpenAPI()
	served := map[string]bool{}
	_ = chi.Walk(s.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served[method+" "+route] = true
		return nil
	})
	has := func(method, path string) bool {
		item := oa.Paths[path]
		return item != nil && operationOf(item, method) != nil
	}
	var add []*huma.Operation
	for path, item := range oa.Paths {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			op := operationOf(item, method)
			if op == nil || !served[method+" "+SandboxPrefix+path] || has(method, SandboxPrefix+path) {
				continue
			}
			c := *op
			c.OperationID = "sandbox-" + op.OperationID
			c.Method, c.Path = method, SandboxPrefix+path
			c.Parameters = append([]*huma.Param{{Name: "id", In: "path", Required: true,
				Description: "the sandbox; /v1/... without this prefix acts on the caller's default sandbox",
				Schema:      &huma.Schema{Type: "string"}}}, op.Parameters...)
			add = append(add, &c)
		}
	}
	for _, op := range add {
		oa.AddOperation(op)
	}
	if served["GET /metrics"] && !has(http.MethodGet, "/metrics") {
		oa.AddOperation(&huma.Operation{OperationID: "metrics", Method: http.MethodGet, Path: "/metrics", Tags: []string{"system"},
			Security: Security, Summary: "Prometheus metrics (admin or viewer)",
			Responses: map[string]*huma.Response{"200": {Description: "Prometheus text exposition format"}}})
	}
}

func operationOf(item *huma.PathItem, method string) *huma.Operation {
	switch method {
	case http.MethodGet:
		return item.Get
	case http.MethodPost:
		return item.Post
	case http.MethodPut:
		return item.Put
	case http.MethodPatch:
		return item.Patch
	case http.MethodDelete:
		return item.Delete
	}
	return nil
}

// Document helpers of routes whose parameters or answers huma cannot
// derive (streams, binary bodies).
var (
	StringSchema = &huma.Schema{Type: "string"}
	BinarySchema = &huma.Schema{Type: "string", Format: "binary"}
	BinaryBody   = map[string]*huma.MediaType{"application/octet-stream": {Schema: BinarySchema}}
)

// QueryParams documents string query parameters by name.
func QueryParams(names ...string) []*huma.Param {
	var ps []*huma.Param
	for _, n := range names {
		ps = append(ps, &huma.Param{Name: n, In: "query", Schema: StringSchema})
	}
	return ps
}
