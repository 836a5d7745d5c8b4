package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// Ticket is a one-time credential for browsers and WebSockets: pass it as
// ?ticket=… on one request within 30 s.
type Ticket struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TicketOutput is POST /v1/tickets.
type TicketOutput struct {
	Body Envelope[Ticket]
}

func (s *Server) ticketRoutes() {
	huma.Register(s.api, huma.Operation{
		OperationID: "create-ticket", Method: http.MethodPost, Path: "/v1/tickets", Tags: []string{"keys"},
		Summary: "Mint a one-time ticket (30 s, single use) for a WebSocket or browser request", Security: Security,
		DefaultStatus: http.StatusCreated,
	}, s.createTicket)
}

func (s *Server) ticketTools(d *dispatch.Dispatcher) {
	d.MustRegister(dispatch.Tool{
		Name: ToolTicketsCreate, Description: "Mint a one-time ticket for a WebSocket or browser request", Risk: guard.Safe, Roles: allRoles,
		Run: func(ctx context.Context, c auth.Caller, _ any) (any, error) {
			t, exp, err := s.auth.IssueTicket(ctx, c)
			if err != nil {
				return nil, err
			}
			return Ticket{Ticket: t, ExpiresAt: exp}, nil
		},
	})
}

func (s *Server) createTicket(ctx context.Context, _ *struct{}) (*TicketOutput, error) {
	res, err := s.call(ctx, ToolTicketsCreate, nil)
	if err != nil {
		return nil, err
	}
	return &TicketOutput{Body: OK(res.(Ticket))}, nil
}
