package api

import (
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/sandbox"
)

// MCPPath is where the MCP streamable HTTP endpoint is served; MCPAlias
// serves it too, as AIO does.
const (
	MCPPath  = "/mcp"
	MCPAlias = "/v1/mcp"
)

// MCPRoutes mounts the MCP endpoint (internal/mcp's Hub) behind the same
// middleware as every route: a key in a header, Host/Origin checks, the
// body cap. Tool calls inside go through the dispatcher.
//
// It also mounts AIO's mcp REST routes (aiomcp.go) from the AIO route
// table: the servers, their tools, a tool call.
//
// At /sandboxes/{id}/mcp and /sandboxes/{id}/v1/mcp (an AIO SDK or MCP
// client given the sandbox's base URL) the sessions' calls that name no
// sandbox act on that one (sandbox.WithScope), not the key's default
// sandbox; a missing or another key's sandbox is 404 there.
func (s *Server) MCPRoutes(h http.Handler) {
	scoped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		if s.sandboxes != nil {
			c, err := MustCaller(r.Context())
			if err == nil {
				err = s.sandboxes.Addressed(r.Context(), s.disp, c, id)
			}
			if err != nil {
				WriteError(w, r, err)
				return
			}
		}
		h.ServeHTTP(w, r.WithContext(sandbox.WithScope(r.Context(), id)))
	})
	for _, path := range []string{MCPPath, MCPAlias} {
		for _, p := range []string{path, SandboxPrefix + path} {
			handler := h
			if p != path {
				handler = scoped
			}
			for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
				s.router.Method(m, p, handler)
			}
			s.documentMCP(p)
		}
	}
}

// documentMCP documents the MCP endpoint at path.
func (s *Server) documentMCP(path string) {
	id := "mcp"
	if strings.HasSuffix(path, MCPAlias) {
		id = "mcp-v1"
	}
	var params []*huma.Param
	if strings.HasPrefix(path, SandboxPrefix) {
		id += "-in-sandbox"
		params = []*huma.Param{{Name: "id", In: "path", Required: true,
			Description: "the sandbox the session's calls act on when they name none; " + path[len(SandboxPrefix):] + " without this prefix acts on the caller's default sandbox",
			Schema:      &huma.Schema{Type: "string"}}}
	}
	s.api.OpenAPI().AddOperation(&huma.Operation{
		OperationID: id, Method: http.MethodPost, Path: path, Tags: []string{"mcp"}, Security: Security, Parameters: params,
		Summary: "Model Context Protocol (streamable HTTP)",
		Description: "JSON-RPC messages of the Model Context Protocol (streamable HTTP transport; GET opens a session's " +
			"event stream, DELETE ends the session). Tools are the dispatcher's tools with dots written as underscores " +
			"(exec.run → exec_run) plus AIO Sandbox's MCP tool names (sandbox_execute_bash, sandbox_execute_code, " +
			"sandbox_file_operations, sandbox_str_replace_editor, sandbox_get_context). A session belongs to the key " +
			"that opened it and ends when the key is revoked.",
		Responses: map[string]*huma.Response{
			"200": {Description: "JSON-RPC response(s), as application/json or text/event-stream"},
			"202": {Description: "accepted (notifications and responses)"},
		},
	})
	for _, m := range []struct{ method, id, summary string }{
		{http.MethodGet, "mcp-stream", "Model Context Protocol: a session's server-to-client event stream"},
		{http.MethodDelete, "mcp-end", "Model Context Protocol: end a session"},
	} {
		s.api.OpenAPI().AddOperation(&huma.Operation{
			OperationID: m.id + strings.TrimPrefix(id, "mcp"), Method: m.method, Path: path, Tags: []string{"mcp"}, Security: Security, Summary: m.summary,
			Parameters: append([]*huma.Param{{Name: "Mcp-Session-Id", In: "header", Required: true, Schema: &huma.Schema{Type: "string"}}}, params...),
			Responses:  map[string]*huma.Response{"200": {Description: "text/event-stream (GET) or an empty answer (DELETE)"}},
		})
	}
}
