package api

import (
	"net/http"

	"github.com/sandhold/sandhold/internal/auth"
)

// Route roles: authorization before validation.
//
// Every route's tool checks the caller's role in the dispatcher, but a
// huma route validates its body first: an agent sending PUT /v1/policy with
// a malformed body got 422 and learnt the route's schema. So the auth
// middleware checks the route's roles from this table right after
// authentication, before any body is read, decoded or validated; the wrong
// caller gets 403 (audited as authz.deny) and nothing else. The dispatcher
// still checks again (the table is the edge's copy, the tool's Roles the
// authority; a router-walk test in internal/daemon proves they agree).
//
// Keys are "METHOD pattern" with the per-sandbox prefix /sandboxes/{id}
// removed (routeKey). A route not listed takes the dispatcher's default:
// admin and agent — so a viewer is refused everywhere it is not listed
// (fail closed for the read-only role).
var (
	rolesAdmin       = []auth.Role{auth.RoleAdmin}
	rolesAdminViewer = []auth.Role{auth.RoleAdmin, auth.RoleViewer}
	rolesAll         = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}
	rolesDefault     = []auth.Role{auth.RoleAdmin, auth.RoleAgent}
)

var routeRoles = map[string][]auth.Role{
	// Operator-only: keys, policy, HALT, approvals decisions, publishing.
	"GET /v1/keys":                         rolesAdmin,
	"POST /v1/keys":                        rolesAdmin,
	"DELETE /v1/keys/{id}":                 rolesAdmin,
	"GET /v1/policy":                       rolesAdmin,
	"PUT /v1/policy":                       rolesAdmin,
	"POST /v1/control/halt":                rolesAdmin,
	"POST /v1/control/unhalt":              rolesAdmin,
	"GET /v1/approvals":                    rolesAdmin,
	"POST /v1/approvals/{id}/approve":      rolesAdmin,
	"POST /v1/approvals/{id}/deny":         rolesAdmin,
	"POST /v1/tools/custom/{name}/publish": rolesAdmin,

	// Observation: admin and viewer.
	"GET /metrics":         rolesAdminViewer,
	"GET /v1/audit/verify": rolesAdminViewer,

	// Every role; the tool narrows further (agents see their own).
	"GET /v1/approvals/{id}":                   rolesAll,
	"GET /v1/artifacts":                        rolesAll,
	"GET /v1/audit":                            rolesAll,
	"GET /v1/bash/sessions":                    rolesAll,
	"GET /v1/code/info":                        rolesAll,
	"GET /v1/control":                          rolesAll,
	"GET /v1/jupyter/info":                     rolesAll,
	"GET /v1/jupyter/sessions":                 rolesAll,
	"GET /v1/sandbox/resources":                rolesAll,
	"GET /v1/sandbox/security":                 rolesAll,
	"GET /v1/sandboxes":                        rolesAll,
	"GET /v1/sandboxes/{id}":                   rolesAll,
	"GET /v1/sandboxes/{id}/exec/{command_id}": rolesAll,
	"GET /v1/shell/sessions":                   rolesAll,
	"GET /v1/shell/sessions/stats":             rolesAll,
	"GET /v1/tools":                            rolesAll,
	"POST /v1/bash/output":                     rolesAll,
	"POST /v1/shell/view":                      rolesAll,
	"POST /v1/shell/wait":                      rolesAll,
	"POST /v1/tickets":                         rolesAll,
	// The tool is named in the body (tools/call, MCP's tools/call): the
	// route admits every role and the dispatcher checks the named tool's
	// roles before its arguments are decoded.
	"POST /v1/tools/call": rolesAll,
	"POST " + MCPPath:     rolesAll,
	"GET " + MCPPath:      rolesAll,
	"DELETE " + MCPPath:   rolesAll,
}

// RouteRoles returns the roles that may call method on pattern (a router
// pattern, with or without the /sandboxes/{id} prefix).
func RouteRoles(method, pattern string) []auth.Role {
	if method == http.MethodHead {
		method = http.MethodGet // chi serves HEAD from GET routes without one
	}
	if r, ok := routeRoles[method+" "+routeKey(pattern)]; ok {
		return r
	}
	return rolesDefault
}
