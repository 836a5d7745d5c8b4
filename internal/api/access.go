package api

import (
	"context"
	"net/http"
	"slices"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch/audittools"
	"github.com/sandhold/sandhold/internal/dispatch/authtools"
	"github.com/sandhold/sandhold/internal/fault"
)

// Route roles: authorization before validation.
//
// Every route's tool checks the caller's role in the dispatcher, but a
// huma route validates its body first: an agent sending PUT /v1/policy with
// a malformed body got 422 and learnt the route's schema. So the auth
// middleware checks the route's roles right after authentication, before
// any body is read, decoded or validated; the wrong caller gets 403 and
// nothing else.
//
// The roles come from the tool the route calls (routeTools: the tool's
// Roles in the dispatcher stay the one authority, and the refusal is
// audited exactly as the dispatcher would: action = the tool, verdict
// denied, reason role). A route not listed takes the dispatcher's default,
// admin and agent, and a refusal there is audited as authz.deny naming the
// route; so a viewer is refused everywhere it is not listed (fail closed
// for the read-only role). The dispatcher checks again when the call
// arrives. A router-walk test in internal/daemon proves, for every route,
// that this agrees with the tool the route really calls and that every
// wrong role gets 403 before validation.
//
// Keys are "METHOD pattern" with the per-sandbox prefix /sandboxes/{id}
// removed (routeKey). The AIO routes are not listed here: their rows in
// the AIO route table (internal/api/aio, read through the server's Table)
// name their tools.
var routeTools = map[string]string{
	// Operator-only tools.
	"GET /v1/keys":                         authtools.ToolKeysList.Name(),
	"POST /v1/keys":                        authtools.ToolKeysCreate.Name(),
	"DELETE /v1/keys/{id}":                 authtools.ToolKeysRevoke.Name(),
	"GET /v1/policy":                       "policy.get",
	"PUT /v1/policy":                       "policy.set",
	"POST /v1/control/halt":                "control.halt",
	"POST /v1/control/unhalt":              "control.unhalt",
	"GET /v1/approvals":                    "approvals.list",
	"POST /v1/approvals/{id}/approve":      "approvals.approve",
	"POST /v1/approvals/{id}/deny":         "approvals.deny",
	"POST /v1/tools/custom/{name}/publish": "tools.publish",
	"GET /v1/audit/verify":                 audittools.ToolVerify.Name(),

	// Tools a viewer may call too.
	"GET /v1/approvals/{id}":                   "approvals.get",
	"GET /v1/audit":                            audittools.ToolQuery.Name(),
	"GET /v1/control":                          "control.get",
	"GET /v1/sandbox/resources":                "sandbox.resources",
	"GET /v1/sandbox/security":                 "sandbox.list",
	"GET /v1/sandboxes":                        "sandbox.list",
	"GET /v1/sandboxes/{id}":                   "sandbox.get",
	"GET /v1/sandboxes/{id}/exec/{command_id}": "exec.read",
	"GET /v1/snapshots":                        "snapshot.list",
	"GET /v1/snapshots/{snapshot}":             "snapshot.get",
	"GET /v1/templates":                        "template.list",
	"GET /v1/templates/{ref}":                  "template.get",
	"GET /v1/templates/builds/{build}/log":     "template.build_log",
	"GET /v1/tools":                            "tools.list",
	"POST /v1/tickets":                         authtools.ToolTicketsCreate.Name(),
	// E2B's control plane reads (internal/e2b).
	"GET /e2b/sandboxes":                     "sandbox.list",
	"GET /e2b/v2/sandboxes":                  "sandbox.list",
	"GET /e2b/sandboxes/{sandboxID}":         "sandbox.get",
	"GET /e2b/sandboxes/{sandboxID}/metrics": "sandbox.resources",
	"GET /e2b/snapshots":                     "snapshot.list",
}

// routeRolesFixed are routes without one tool of their own.
var routeRolesFixed = map[string][]auth.Role{
	// The Prometheus scrape: observation.
	"GET /metrics": {auth.RoleAdmin, auth.RoleViewer},
	// The tool is named in the body (tools/call, MCP's tools/call): the
	// route admits every role and the dispatcher checks the named tool's
	// roles before its arguments are decoded.
	"POST /v1/tools/call": allRoles,
	"POST " + MCPPath:     allRoles,
	"GET " + MCPPath:      allRoles,
	"DELETE " + MCPPath:   allRoles,
	"POST " + MCPAlias:    allRoles,
	"GET " + MCPAlias:     allRoles,
	"DELETE " + MCPAlias:  allRoles,
}

// defaultRoles is the dispatcher's default for a tool without Roles.
var defaultRoles = []auth.Role{auth.RoleAdmin, auth.RoleAgent}

// RouteTool is the tool the edge checks for method on pattern ("" when the
// route is not listed).
func (s *Server) RouteTool(method, pattern string) string {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if rt, ok := s.tableRow(method, pattern); ok {
		return rt.Tool
	}
	return routeTools[accessKey(method, pattern)]
}

// RouteRoles returns the roles that may call method on pattern (a router
// pattern, with or without the /sandboxes/{id} prefix).
func (s *Server) RouteRoles(method, pattern string) []auth.Role {
	key := accessKey(method, pattern)
	if r, ok := routeRolesFixed[key]; ok {
		return r
	}
	if rt, ok := s.tableRow(method, pattern); ok && rt.NamedTool {
		return allRoles
	}
	if name := s.RouteTool(method, pattern); name != "" && s.disp != nil {
		if t, ok := s.disp.Tool(name); ok && len(t.Roles) > 0 {
			return t.Roles
		}
	}
	return defaultRoles
}

func accessKey(method, pattern string) string {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	return method + " " + routeKey(pattern)
}

// authorizeRoute refuses c on the route before its body is read (see the
// top of this file), auditing the refusal.
func (s *Server) authorizeRoute(ctx context.Context, c auth.Caller, method, pattern string) error {
	roles := s.RouteRoles(method, pattern)
	if slices.Contains(roles, c.Role) {
		return nil
	}
	route := method + " " + pattern
	tool := s.RouteTool(method, pattern)
	if tool == "" {
		return s.auth.Require(ctx, c, route, roles...) // audits authz.deny
	}
	// The dispatcher's own record shape for a role refusal.
	if _, err := s.audit.Append(context.WithoutCancel(ctx), audit.Entry{
		Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr, Action: tool, Verdict: "denied",
		Detail: map[string]any{"reason": "role", "route": route, "stage": "edge"},
	}); err != nil {
		LoggerFrom(ctx).Error("audit append failed", "action", tool, "err", err)
	}
	return fault.Errorf(fault.Forbidden, "the %s role may not call %s", c.Role, tool)
}
