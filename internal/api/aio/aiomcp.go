package aio

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/customtool"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/mcp"
)

// AIO's mcp namespace lists the MCP servers a sandbox offers, their tools,
// and calls a tool. sandhold offers one MCP server, its own ("sandhold",
// the same tools as /mcp): the dispatcher's tools as the caller may call
// them, each under its MCP name (dots written as underscores, exec.run →
// exec_run; the dotted name is accepted too). A call goes through the
// dispatcher like every other (roles, policy, HALT, rate limits, audit).
// At /sandboxes/{id}/v1/mcp/... a tool that takes a sandbox gets that one.

// mcpServerName is the one MCP server sandhold offers.
const mcpServerName = "sandhold"

const groupMCP = "mcp"

// MCPRoutes mounts AIO's /v1/mcp/... routes (the custom tools as the one
// MCP server), called on the server's dispatcher.
func MCPRoutes(s *api.Server) { mountAIO(s, nil, groupMCP) }

var aioMCPRows = []aioRoute{
	jsonRowAs(groupMCP, http.MethodGet, "/v1/mcp/servers", customtool.ToolList, "mcp",
		"The MCP servers this sandbox offers: sandhold's own (the tools of /mcp)",
		func(*http.Request, struct{}) (struct{}, error) { return struct{}{}, nil },
		func(*http.Request, struct{}, []customtool.Info) ([]string, error) {
			return []string{mcpServerName}, nil
		}),
	jsonRowAs(groupMCP, http.MethodGet, "/v1/mcp/{server_name}/tools", customtool.ToolList, "mcp",
		"The tools of an MCP server (sandhold: the dispatcher's tools the caller may call, by MCP name)",
		func(r *http.Request, _ struct{}) (struct{}, error) { return struct{}{}, checkMCPServer(r) }, mcpToolList, lateInvalidFails()),
	plainRow(groupMCP, http.MethodPost, "/v1/mcp/{server_name}/tools/{tool_name}", namedByRequest{}, "mcp",
		"Call a tool of an MCP server with the body as its arguments (through the dispatcher: roles, policy, HALT, limits, audit)",
		reflect.TypeFor[api.Envelope[MCPCallResult]](), mcpCall, reqType[map[string]any](), namedTool(), lateInvalidFails()),
}

func namedTool() rowOpt { return func(rt *aioRoute) { rt.NamedTool = true } }

// MCPTool is an MCP tool definition (MCP's Tool).
type MCPTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Meta        map[string]any  `json:"_meta,omitempty"`
}

// MCPToolList is MCP's ListToolsResult.
type MCPToolList struct {
	Tools []MCPTool `json:"tools"`
}

// MCPContent is MCP's TextContent.
type MCPContent struct {
	Type string `json:"type" enum:"text"`
	Text string `json:"text"`
}

// MCPCallResult is MCP's CallToolResult: the tool's answer as JSON text,
// and as structuredContent when it is an object.
type MCPCallResult struct {
	Content           []MCPContent    `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError"`
}

func checkMCPServer(r *http.Request) error {
	if name := chi.URLParam(r, "server_name"); name != mcpServerName {
		return fault.Errorf(fault.NotFound, "no MCP server named %q; this sandbox offers %q", name, mcpServerName)
	}
	return nil
}

// mcpToolList maps the caller's tools to MCP's shape, with the names of
// the caller's own table on /mcp: built-ins first, custom tools under
// mcp.CustomPrefix (so none takes a built-in's name).
func mcpToolList(_ *http.Request, _ struct{}, infos []customtool.Info) (MCPToolList, error) {
	slices.SortFunc(infos, func(a, b customtool.Info) int {
		switch {
		case a.Custom != b.Custom:
			if a.Custom {
				return 1
			}
			return -1
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	out := MCPToolList{Tools: []MCPTool{}}
	seen := map[string]bool{}
	for _, in := range infos {
		if in.Review {
			continue // listed for an admin to review; not callable
		}
		name := mcp.ToolName(in.Name)
		if in.Custom {
			name = mcp.CustomPrefix + name
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		schema := in.InputSchema
		if len(schema) == 0 || !bytes.HasPrefix(bytes.TrimSpace(schema), []byte("{")) {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		risk := in.Risk
		out.Tools = append(out.Tools, MCPTool{Name: name, Description: in.Description, InputSchema: schema,
			Meta: map[string]any{"sandhold/tool": in.Name, "sandhold/risk": risk}})
	}
	return out, nil
}

// mcpCall is POST /v1/mcp/{server_name}/tools/{tool_name}: the body is the
// tool's arguments (an object; none means {}).
func mcpCall(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		e.fail(w, r, rt, "", fault.Wrap(fault.TooLarge, err, "request body over the limit"))
		return
	}
	args, err := decodeAIO[map[string]json.RawMessage](raw, nil)
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	if err := checkMCPServer(r); err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	c, err := api.MustCaller(r.Context())
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	d := e.dispatcher()
	name := chi.URLParam(r, "tool_name")
	tool := mcp.Lookup(d.ToolsFor(c), name)
	if tool == nil {
		e.fail(w, r, rt, "", fault.Errorf(fault.NotFound, "no tool named %q on MCP server %q", name, mcpServerName))
		return
	}
	if id := chi.URLParam(r, "id"); id != "" && schemaHas(tool.InputSchema, "sandbox") {
		if args == nil {
			args = map[string]json.RawMessage{}
		}
		args["sandbox"], _ = json.Marshal(id)
	}
	body, err := json.Marshal(args)
	if err != nil {
		e.fail(w, r, rt, "", fault.Wrap(fault.Invalid, err, "arguments are not JSON"))
		return
	}
	res, err := d.Call(r.Context(), c, tool.Name, body)
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	text, err := json.Marshal(res)
	if err != nil {
		e.fail(w, r, rt, "", fault.Wrap(fault.Internal, err, "internal error"))
		return
	}
	out := MCPCallResult{Content: []MCPContent{{Type: "text", Text: string(text)}}}
	if bytes.HasPrefix(text, []byte("{")) {
		out.StructuredContent = text
	}
	api.WriteData(w, http.StatusOK, out)
}

// schemaHas says whether a JSON schema lists property name.
func schemaHas(schema json.RawMessage, name string) bool {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return false
	}
	_, ok := s.Properties[name]
	return ok
}
