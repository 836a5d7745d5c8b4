package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/sandhold/sandhold/internal/sandbox"
)

// Table is what the middleware reads of the routes another package mounts
// from a table of rows (the AIO edge, internal/api/aio): the tool a route
// calls, for the role check before the body (access.go); the media types
// of a body that is not JSON (requestShapeMiddleware); and which failures
// of a request are its tool's own, answered 200 (errorBody). The package
// that mounts the rows sets it (UseTable) before serving.
type Table interface {
	// Row is the row of method on pattern, a router pattern with or
	// without the /sandboxes/{id} prefix; HEAD falls back to GET's row.
	Row(method, pattern string) (Row, bool)
	// ToolLevel is the rule that tells a request's failures that are its
	// tool's own (HTTP 200, success false) from the others, for a request
	// of method to path (the URL's, not a pattern); nil when the route
	// keeps real statuses.
	ToolLevel(method, path string) func(error) bool
}

// Row is one route of a Table.
type Row struct {
	// Method is the row's own method (GET for a HEAD that fell back).
	Method string
	// Tool is the tool the route calls first: its roles are checked
	// before the body is read.
	Tool string
	// NamedTool: the request names the tool (MCP's tool call); every role
	// is admitted here and the dispatcher checks the named tool's.
	NamedTool bool
	// BodyTypes are the media types of a body that is not JSON (nil:
	// JSON only).
	BodyTypes []string
}

// UseTable makes t the server's route table. Call before serving.
func (s *Server) UseTable(t Table) { s.table = t }

// tableRow is the table's row of method on pattern.
func (s *Server) tableRow(method, pattern string) (Row, bool) {
	if s.table == nil {
		return Row{}, false
	}
	return s.table.Row(method, pattern)
}

// bodyTypes are the media types a route takes when its body is not JSON
// (nil: JSON only), from its row: the upload takes a multipart form or the
// raw file, an artifact PATCH its chunk (requestShapeMiddleware).
func (s *Server) bodyTypes(method, pattern string) []string {
	if rt, ok := s.tableRow(method, pattern); ok && rt.Method == method {
		return rt.BodyTypes
	}
	return nil
}

type toolLevelKey struct{}

// toolLevelMiddleware gives the requests of a table's routes that answer
// their tool's failures with 200 the table's rule, for errorBody.
func (s *Server) toolLevelMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.table != nil {
			if rule := s.table.ToolLevel(r.Method, r.URL.Path); rule != nil {
				r = r.WithContext(context.WithValue(r.Context(), toolLevelKey{}, rule))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// toolLevel says whether err is the tool's own failure on a route whose
// table answers those 200 (toolLevelMiddleware). A routing failure here
// (no route, no method) never is.
func toolLevel(ctx context.Context, err error) bool {
	rule, _ := ctx.Value(toolLevelKey{}).(func(error) bool)
	if rule == nil || errors.Is(err, errNotFound) || errors.Is(err, errMethod) {
		return false
	}
	return rule(err)
}

// Sandboxes is SandboxRoutes' sandbox manager (nil without sandboxes): the
// AIO rows resolve the sandbox of their URL with it before their tool runs.
func (s *Server) Sandboxes() *sandbox.Manager { return s.sandboxes }
