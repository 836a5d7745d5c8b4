package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
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

func (s *Server) createTicket(ctx context.Context, _ *struct{}) (*TicketOutput, error) {
	c, err := MustCaller(ctx)
	if err != nil {
		return nil, err
	}
	t, exp, err := s.auth.IssueTicket(ctx, c)
	if err != nil {
		return nil, err
	}
	return &TicketOutput{Body: OK(Ticket{Ticket: t, ExpiresAt: exp})}, nil
}
