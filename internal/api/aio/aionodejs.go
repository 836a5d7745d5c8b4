package aio

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/coderun"
	"github.com/sandhold/sandhold/internal/dispatch"
)

const groupNode = "nodejs"

// nodeUpdateRequest is AIO's NodeJSUpdateSessionRequest.
type nodeUpdateRequest struct {
	MaxIdleTime *int    `json:"max_idle_time,omitempty" minimum:"60" maximum:"86400"`
	Cwd         *string `json:"cwd,omitempty"`
}

// nodeSessionOf names the path's session of the route's sandbox.
func nodeSessionOf(r *http.Request) coderun.NodeSessionArgs {
	return coderun.NodeSessionArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, SessionID: chi.URLParam(r, "session_id")}
}

// aioNodeRows are AIO's nodejs namespace (7 operations): the javascript
// runtime of the code machinery (coderun.NodeTools). AIO's version query
// parameter picks a node; the one installed is the only choice, and
// nodejs.execute's version field refuses another.
var aioNodeRows = []aioRoute{
	jsonRow(groupNode, http.MethodPost, "/v1/nodejs/execute", coderun.ToolNodeExecute, "nodejs",
		"Run JavaScript with Node.js, statelessly or in a session (AIO)", lateInvalidFails()),
	jsonRow(groupNode, http.MethodGet, "/v1/nodejs/info", coderun.ToolNodeInfo, "nodejs",
		"Node.js runtime information (AIO)", lateInvalidFails()),
	jsonRow(groupNode, http.MethodPost, "/v1/nodejs/sessions", coderun.ToolNodeSessionCreate, "nodejs",
		"Start a Node.js session (AIO)", lateInvalidFails()),
	jsonRow(groupNode, http.MethodGet, "/v1/nodejs/sessions", coderun.ToolNodeSessions, "nodejs",
		"List the caller's Node.js sessions (AIO)", lateInvalidFails()),
	jsonRowAs(groupNode, http.MethodGet, "/v1/nodejs/sessions/{session_id}", coderun.ToolNodeSession, "nodejs",
		"Describe a Node.js session (AIO)", func(r *http.Request, _ struct{}) (coderun.NodeSessionArgs, error) { return nodeSessionOf(r), nil },
		same[struct{}, coderun.NodeSessionResult], lateInvalidFails()),
	jsonRowAs(groupNode, http.MethodPatch, "/v1/nodejs/sessions/{session_id}", coderun.ToolNodeSessionUpdate, "nodejs",
		"Change a Node.js session's cwd or idle time (AIO)", func(r *http.Request, in nodeUpdateRequest) (coderun.NodeSessionArgs, error) {
			a := nodeSessionOf(r)
			a.MaxIdleTime, a.Cwd = in.MaxIdleTime, deref(in.Cwd)
			return a, nil
		}, same[nodeUpdateRequest, coderun.NodeUpdateResult], lateInvalidFails()),
	jsonRowAs(groupNode, http.MethodDelete, "/v1/nodejs/sessions/{session_id}", coderun.ToolNodeSessionDelete, "nodejs",
		"End a Node.js session (AIO)", func(r *http.Request, _ struct{}) (coderun.NodeSessionArgs, error) { return nodeSessionOf(r), nil },
		same[struct{}, coderun.NodeDeleteResult], lateInvalidFails()),
}

// NodeRoutes mounts AIO's nodejs routes at /v1/... and /sandboxes/{id}/v1/....
func NodeRoutes(s *api.Server, d *dispatch.Dispatcher) { mountAIO(s, d, groupNode) }
