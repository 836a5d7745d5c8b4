package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// notCapabilities are the routes that do not reach the dispatcher, each
// with the reason. Everything else must.
var notCapabilities = map[string]string{
	"GET /healthz":          "liveness, no authentication, no capability",
	"GET /metrics":          "Prometheus scrape (admin/viewer checked in the handler), no capability",
	"GET /openapi.json":     "the API description",
	"GET /docs":             "the API documentation page",
	"GET /openapi.yaml":     "the API description",
	"GET /openapi-3.0.json": "the API description",
	"GET /openapi-3.0.yaml": "the API description",
	// MCP's transport: initialize, tools/list and notifications carry no
	// capability; its tools/call goes through Dispatcher.Call (proved by
	// the MCP package's tests, not by one plain request here).
	"POST /mcp":   "MCP transport (tools/call dispatches)",
	"GET /mcp":    "MCP transport (server-to-client stream)",
	"DELETE /mcp": "MCP transport (ends a session)",
	// The preview proxy without its trailing slash: a redirect to the
	// form with one, so relative links resolve (nothing is opened).
	"GET /proxy/{port}":                    "redirect to /proxy/{port}/",
	"HEAD /proxy/{port}":                   "redirect to /proxy/{port}/",
	"GET /absproxy/{port}":                 "redirect to /absproxy/{port}/",
	"HEAD /absproxy/{port}":                "redirect to /absproxy/{port}/",
	"GET /sandboxes/{id}/proxy/{port}":     "redirect to /proxy/{port}/",
	"HEAD /sandboxes/{id}/proxy/{port}":    "redirect to /proxy/{port}/",
	"GET /sandboxes/{id}/absproxy/{port}":  "redirect to /absproxy/{port}/",
	"HEAD /sandboxes/{id}/absproxy/{port}": "redirect to /absproxy/{port}/",
	// The web console (internal/console): static pages and its sign-in,
	// which exchanges a key for a session; the console's actions are API
	// calls that reach the dispatcher like any other.
	"GET /":                              "the web console page",
	"GET /console/assets/*":              "the web console's bundled assets",
	"GET /sandboxes/{id}/vnc/index.html": "the noVNC page (its WebSocket relay is a capability)",
	"POST /console/session":              "console sign-in (key checked by auth, audited)",
	"GET /console/session":               "console session info",
	"DELETE /console/session":            "console sign-out (audited)",
	// AIO's alias of the same endpoint.
	"POST /v1/mcp":   "MCP transport (tools/call dispatches)",
	"GET /v1/mcp":    "MCP transport (server-to-client stream)",
	"DELETE /v1/mcp": "MCP transport (ends a session)",
	// An integer path parameter: the walk's placeholder "x" is AIO's 422
	// before the tool runs. internal/api's TestAIOBrowserRoutesConform
	// calls them with real indexes.
	"DELETE /v1/browser/tabs/{index}":                      "integer path parameter (called by the browser conformance test)",
	"PUT /v1/browser/tabs/{index}/activate":                "integer path parameter (called by the browser conformance test)",
	"DELETE /sandboxes/{id}/v1/browser/tabs/{index}":       "integer path parameter (called by the browser conformance test)",
	"PUT /sandboxes/{id}/v1/browser/tabs/{index}/activate": "integer path parameter (called by the browser conformance test)",
	// A required query parameter the walk does not send: AIO's 422 before
	// the tool runs. internal/aiocompat's TestAIOProxyConformance calls it.
	"GET /v1/proxy/diagnose":                "required query parameter url (called by the proxy conformance test)",
	"GET /sandboxes/{id}/v1/proxy/diagnose": "required query parameter url (called by the proxy conformance test)",
	// E2B's API beyond what sandhold serves (fork, snapshots, templates,
	// volumes …): 501 before anything runs.
	"GET /e2b/*":    "E2B calls sandhold does not serve (501)",
	"POST /e2b/*":   "E2B calls sandhold does not serve (501)",
	"PUT /e2b/*":    "E2B calls sandhold does not serve (501)",
	"PATCH /e2b/*":  "E2B calls sandhold does not serve (501)",
	"DELETE /e2b/*": "E2B calls sandhold does not serve (501)",
}

// pathValues fill path parameters whose value decides whether the route
// has anything to call ("x" elsewhere): the MCP routes know one server.
var pathValues = map[string]string{"server_name": "sandhold", "tool_name": "tools_list"}

// validRequests are bodies and headers for plain handlers whose input is
// not in the OpenAPI document (keyed by the path after any
// /sandboxes/{id} prefix): the walk must send a request the handler
// accepts, or it proves nothing.
var validRequests = map[string]struct {
	body   any
	header map[string]string
	// suffix replaces a trailing * of the pattern: the DevTools relay
	// dispatches only for the paths it serves.
	suffix string
}{
	"GET /cdp/*":                     {suffix: "json/version"},
	"PUT /cdp/*":                     {suffix: "json/new"},
	"POST /v1/shell/exec":            {body: map[string]any{"command": "true"}},
	"POST /v1/shell/view":            {body: map[string]any{"id": "x"}},
	"POST /v1/shell/wait":            {body: map[string]any{"id": "x"}},
	"POST /v1/shell/kill":            {body: map[string]any{"id": "x"}},
	"POST /v1/shell/write":           {body: map[string]any{"id": "x", "input": "x"}},
	"POST /v1/shell/sessions/update": {body: map[string]any{"id": "x"}},
	"POST /v1/bash/exec":             {body: map[string]any{"command": "true"}},
	"POST /v1/bash/output":           {body: map[string]any{"session_id": "x"}},
	"POST /v1/bash/write":            {body: map[string]any{"session_id": "x", "input": "x"}},
	"POST /v1/bash/kill":             {body: map[string]any{"session_id": "x"}},
	"POST /v1/code/execute":          {body: map[string]any{"language": "python", "code": "1"}},
	"POST /v1/jupyter/execute":       {body: map[string]any{"code": "1"}},
	"PATCH /v1/artifacts/{ref}":      {header: map[string]string{"Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"}},
	"POST /v1/file/upload":           {header: map[string]string{"Content-Type": "application/octet-stream"}},
	"POST /v1/skills/register":       {header: map[string]string{"Content-Type": "multipart/form-data; boundary=x"}},
	// templates: a pull from a registry nothing listens on, an empty
	// archive and context (each refused by its tool).
	"POST /v1/templates":        {body: map[string]any{"image": "127.0.0.1:1/none:latest"}},
	"POST /v1/templates/import": {header: map[string]string{"Content-Type": "application/x-tar"}},
	"POST /v1/snapshots/import": {header: map[string]string{"Content-Type": "application/x-tar"}},
	"POST /v1/templates/build":  {header: map[string]string{"Content-Type": "application/x-tar"}},
	// browser: bodies that pass the operations' field rules.
	"POST /v1/browser/actions":                {body: map[string]any{"action_type": "WAIT", "duration": 0}},
	"POST /v1/browser/cookies":                {body: map[string]any{"cookies": []any{map[string]any{"name": "a", "value": "b", "url": "http://x"}}}},
	"POST /v1/browser/network/route":          {body: map[string]any{"url_pattern": "*", "abort": true}},
	"DELETE /v1/browser/network/route":        {body: map[string]any{"url_pattern": "*"}},
	"POST /v1/browser/network/scoped_headers": {body: map[string]any{"origin": "http://x", "headers": map[string]string{"a": "b"}}},
	"POST /v1/browser/page/fill_form":         {body: map[string]any{"items": []any{map[string]any{"selector": "a", "value": "b"}}}},
	"POST /v1/browser/page/hot_key":           {body: map[string]any{"keys": []string{"Enter"}}},
	"POST /v1/browser/page/navigate":          {body: map[string]any{"url": "about:blank"}},
	"POST /v1/browser/page/select_option":     {body: map[string]any{"selector": "s", "value": "v"}},
	"POST /v1/browser/page/upload_file":       {body: map[string]any{"selector": "s", "files": []string{"a.txt"}}},
	"POST /v1/browser/page/wait":              {body: map[string]any{"type": "load"}},
	// proxy: bodies that pass the operations' field rules.
	"POST /v1/proxy/mappings": {body: map[string]any{"source": "a.example", "target": ":3000"}},
	"PUT /v1/proxy/upstream":  {body: map[string]any{"server": "proxy.example:3128"}},
	// E2B's control plane: a timeout is required.
	"POST /e2b/sandboxes/{sandboxID}/timeout": {body: map[string]any{"timeout": 60}},
	"DELETE /v1/proxy/excludes":               {body: map[string]any{"pattern": "a.example"}},
	"GET /v1/shell/ws": {header: map[string]string{"Connection": "Upgrade", "Upgrade": "websocket",
		"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}},
	"GET /vnc/websockify": {header: map[string]string{"Connection": "Upgrade", "Upgrade": "websocket",
		"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}},
}

var pathParam = regexp.MustCompile(`\{([^}/]+)\}`)

// Every route reaching the dispatcher is proved by the chokepoint
// conformance test (chokepoint_test.go), with a real sandbox for the
// /sandboxes/{id}/… routes, beside HALT, revocation, the viewer role,
// audit records and rate-limit categories.

// send makes one request as the admin with a short timeout (streams are
// cut off: only reaching the dispatcher matters) and returns the request id.
func (s *server) send(method, path string, body any, hdr map[string]string) (string, int) {
	s.t.Helper()
	return s.sendTo(s.base, s.d.AdminKey(), method, path, body, hdr)
}

// sendTo is send to another base address (the content listener) with key.
func (s *server) sendTo(base, key, method, path string, body any, hdr map[string]string) (string, int) {
	s.t.Helper()
	// Generous: some routes answer only after running a command in a
	// sandbox (package listings), which takes seconds on a loaded host.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0
	}
	_ = res.Body.Close()
	return res.Header.Get("X-Request-Id"), res.StatusCode
}

// exampleBody builds a body that passes the operation's schema: required
// properties filled with an example, enum or a zero of their type.
func exampleBody(oapi *huma.OpenAPI, method, pattern string) any {
	item := oapi.Paths[pattern]
	if item == nil {
		return map[string]any{}
	}
	var op *huma.Operation
	switch method {
	case http.MethodPost:
		op = item.Post
	case http.MethodPut:
		op = item.Put
	case http.MethodPatch:
		op = item.Patch
	}
	if op == nil || op.RequestBody == nil {
		return map[string]any{}
	}
	mt := op.RequestBody.Content["application/json"]
	if mt == nil || mt.Schema == nil {
		return map[string]any{}
	}
	return exampleOf(oapi, mt.Schema, 0)
}

func exampleOf(oapi *huma.OpenAPI, sch *huma.Schema, depth int) any {
	if sch == nil || depth > 8 {
		return nil
	}
	if sch.Ref != "" {
		sch = oapi.Components.Schemas.SchemaFromRef(sch.Ref)
		if sch == nil {
			return nil
		}
	}
	if len(sch.Examples) > 0 {
		return sch.Examples[0]
	}
	if len(sch.Enum) > 0 {
		return sch.Enum[0]
	}
	switch sch.Type {
	case "object":
		out := map[string]any{}
		for _, name := range sch.Required {
			out[name] = exampleOf(oapi, sch.Properties[name], depth+1)
		}
		return out
	case "array":
		return []any{}
	case "string":
		if sch.MinLength != nil && *sch.MinLength > 0 {
			return strings.Repeat("x", *sch.MinLength)
		}
		return "x"
	case "integer", "number":
		if sch.Minimum != nil {
			return *sch.Minimum
		}
		return 1
	case "boolean":
		return false
	}
	return nil
}
