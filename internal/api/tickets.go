package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch/authtools"
)

// TicketInput is POST /v1/tickets: the scope the ticket is minted for.
type TicketInput struct {
	Body auth.TicketArgs
}

// TicketOutput is POST /v1/tickets.
type TicketOutput struct {
	Body Envelope[auth.Ticket]
}

func (s *Server) ticketRoutes() {
	huma.Register(s.api, huma.Operation{
		OperationID: "create-ticket", Method: http.MethodPost, Path: "/v1/tickets", Tags: []string{"keys"},
		Summary: "Mint a one-time ticket (30 s, single use) of one scope for a WebSocket or browser request",
		Description: "The scope is fixed here: terminal (the shell WebSocket), cdp (the DevTools relay), vnc (the desktop relay), preview " +
			"(the preview proxy; on the content origin it starts a content session), console (POST /console/session signs a browser in with it). " +
			"Every other route refuses the ticket, and a request authenticated by a ticket mints none.",
		Security: Security, DefaultStatus: http.StatusCreated,
	}, s.createTicket)
}

func (s *Server) createTicket(ctx context.Context, in *TicketInput) (*TicketOutput, error) {
	t, err := call(ctx, s.disp, authtools.ToolTicketsCreate, in.Body)
	if err != nil {
		return nil, err
	}
	return &TicketOutput{Body: OK(t)}, nil
}

// TicketScopes are the ticket scopes method on pattern (a router pattern)
// takes: nil for a route that takes no ticket — every route that acts
// (exec, files, keys, minting a ticket) takes only a key or the console
// session. The table is short on purpose: a route added later takes no
// ticket until it is listed here.
func TicketScopes(method, pattern string) []auth.TicketScope {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	p := strings.TrimPrefix(pattern, "/sandboxes/{id}")
	switch {
	case method == http.MethodGet && p == "/v1/shell/ws":
		return []auth.TicketScope{auth.ScopeTerminal}
	case pattern == "/sandboxes/{id}/cdp/*":
		return []auth.TicketScope{auth.ScopeCDP}
	case method == http.MethodGet && pattern == "/sandboxes/{id}/vnc/websockify":
		return []auth.TicketScope{auth.ScopeVNC}
	case strings.HasPrefix(p, "/proxy/{port}"), strings.HasPrefix(p, "/absproxy/{port}"):
		return []auth.TicketScope{auth.ScopePreview}
	case method == http.MethodGet && p == "/auth":
		// AIO's auth_request check: it only says who the ticket belongs
		// to (and spends it), for a request of any scope.
		return auth.TicketScopes
	}
	return nil
}
