package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// NetworkInput is PUT /v1/sandboxes/{id}/network.
type NetworkInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		Mode    string   `json:"mode,omitempty" enum:"none,proxy,host" doc:"new network mode; omitted keeps the current one. A change restarts the sandbox's init and needs restart: true"`
		Allow   []string `json:"allow" maxItems:"256" doc:"the complete new allow list (proxy mode): host, host:port, *.suffix[:port], IP/CIDR[:port], localhost:port (admin only for addresses, private ranges and localhost)" example:"[\"api.example.com\", \"*.pypi.org:443\"]"`
		Restart bool     `json:"restart,omitempty" doc:"allow a mode change to stop the sandbox's init (running commands end)"`
	}
}

// NetworkOutput is the sandbox's network after the change.
type NetworkOutput struct {
	Body Envelope[sandbox.NetworkResult]
}

// NetworkRoutes mounts PUT /v1/sandboxes/{id}/network (tool
// network.update).
func (s *Server) NetworkRoutes(d *dispatch.Dispatcher) {
	huma.Register(s.api, huma.Operation{
		OperationID: "update-sandbox-network", Method: http.MethodPut, Path: "/v1/sandboxes/{id}/network",
		Tags: []string{"sandboxes"}, Security: Security, MaxBodyBytes: 64 << 10,
		Summary: "Change a sandbox's egress allow list (live) or network mode (restarts its init)",
		Description: "In proxy mode the new allow list applies to the next request of every connection; established CONNECT tunnels are not cut. " +
			"A mode change stops the sandbox's init (send restart: true); the next use starts it in the new mode. " +
			"Entries that reach loopback, private or link-local addresses, and mode host, are admin only.",
	}, func(ctx context.Context, in *NetworkInput) (*NetworkOutput, error) {
		res, err := call(ctx, d, sandbox.ToolNetworkUpdate, sandbox.NetworkUpdate{
			ID: in.ID, Mode: in.Body.Mode, Allow: in.Body.Allow, Restart: in.Body.Restart})
		if err != nil {
			return nil, err
		}
		out := &NetworkOutput{Body: OK(res)}
		if out.Body.Data.Restarted {
			out.Body.Message = "network changed; the sandbox restarts in the new mode on its next use"
		}
		return out, nil
	})
}
