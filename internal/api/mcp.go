package api

import (
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
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
// It also mounts AIO's mcp REST routes (aio_mcp.go) from the AIO route
// table: the servers, their tools, a tool call.
func (s *Server) MCPRoutes(h http.Handler) {
	for _, path := range []string{MCPPath, MCPAlias} {
		for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			s.router.Method(m, path, h)
		}
		s.documentMCP(path)
	}
	s.mountAIO(nil, groupMCP)
}

// documentMCP documents the MCP endpoint at path.
func (s *Server) documentMCP(path string) {
	id := "mcp"
	if path != MCPPath {
		id = "mcp-v1"
	}
	s.api.OpenAPI().AddOperation(&huma.Operation{
		OperationID: id, Method: http.MethodPost, Path: path, Tags: []string{"mcp"}, Security: Security,
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
			Parameters: []*huma.Param{{Name: "Mcp-Session-Id", In: "header", Required: true, Schema: &huma.Schema{Type: "string"}}},
			Responses:  map[string]*huma.Response{"200": {Description: "text/event-stream (GET) or an empty answer (DELETE)"}},
		})
	}
}
