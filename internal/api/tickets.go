package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/auth"
)

// TicketOutput is POST /v1/tickets.
type TicketOutput struct {
	Body Envelope[auth.Ticket]
}

func (s *Server) ticketRoutes() {
	huma.Register(s.api, huma.Operation{
		OperationID: "create-ticket", Method: http.MethodPost, Path: "/v1/tickets", Tags: []string{"keys"},
		Summary: "Mint a one-time ticket (30 s, single use) for a WebSocket or browser request", Security: Security,
		DefaultStatus: http.StatusCreated,
	}, s.createTicket)
}

func (s *Server) createTicket(ctx context.Context, _ *struct{}) (*TicketOutput, error) {
	t, err := invoke[auth.Ticket](ctx, s, auth.ToolTicketsCreate, struct{}{})
	if err != nil {
		return nil, err
	}
	return &TicketOutput{Body: OK(t)}, nil
}
