package aio

import (
	"context"
	"net/http"
	"reflect"
	"time"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/dispatch/authtools"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// AIO's ticket flow mapped onto sandhold's tickets: POST /tickets mints
// a one-time ticket (30 s, single use; the same as POST /v1/tickets, of
// the scope in ?scope=, the terminal's when absent) and
// GET /auth answers 200 for a request that authenticates — with a key in
// a header, or with ?ticket=… of any scope on the request itself (a
// ticket is used up by it) — and 401 otherwise, so it can serve as an auth_request
// subrequest. sandhold reads no JWT and no X-Original-URI: a ticket
// travels on the request it authenticates.

const groupAuth = "auth"

// AuthRoutes mounts AIO's POST /tickets and GET /auth, whose tools are
// called on the server's dispatcher (api.Server.UseDispatcher).
func AuthRoutes(s *api.Server) { mountAIO(s, nil, groupAuth) }

// ToolAuthCheck is the tool behind GET /auth: who the request
// authenticated as.
var ToolAuthCheck = dispatch.Ref[struct{}, AuthCheck]("auth.check")

var aioAuthRows = []aioRoute{
	plainRow(groupAuth, http.MethodPost, "/tickets", authtools.ToolTicketsCreate, "auth",
		"Mint a one-time ticket (30 s, single use) for a WebSocket or browser request (AIO's ticket flow); ?scope= terminal (default), cdp, vnc, preview or console",
		reflect.TypeFor[AIOTicket](), aioTicket, native(), bQuery("scope")),
	plainRow(groupAuth, http.MethodGet, "/auth", ToolAuthCheck, "auth",
		"Authenticate this request (a key in a header, or ?ticket=…): 200 with the key's id, name and role, else 401",
		reflect.TypeFor[map[string]string](), aioAuth, native()),
}

// AIOTicket is POST /tickets: the envelope, with the ticket beside it as
// AIO's clients read it.
type AIOTicket struct {
	Success   bool        `json:"success"`
	Message   string      `json:"message"`
	Data      auth.Ticket `json:"data"`
	Hint      *string     `json:"hint"`
	Ticket    string      `json:"ticket"`
	ExpiresAt time.Time   `json:"expires_at"`
	ExpiresIn int         `json:"expires_in" doc:"seconds"`
}

// AuthCheck is auth.check's answer.
type AuthCheck struct {
	Status  string `json:"status"`
	KeyID   string `json:"key_id"`
	KeyName string `json:"key_name"`
	Role    string `json:"role"`
}

// AuthTools are the tools of AIO's auth routes.
func AuthTools() []dispatch.Tool {
	return []dispatch.Tool{dispatch.Define(ToolAuthCheck, dispatch.Spec{
		Description: "Say which key authenticated the request (AIO's GET /auth)", Risk: guard.Safe, Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer},
	}, func(_ context.Context, c auth.Caller, _ struct{}) (AuthCheck, error) {
		return AuthCheck{Status: "authenticated", KeyID: c.KeyID, KeyName: c.KeyName, Role: string(c.Role)}, nil
	}, dispatch.Hooks[struct{}, AuthCheck]{})}
}

func aioTicket(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	// AIO's POST /tickets has no body: ?scope= names the routes the
	// ticket opens, the terminal WebSocket when absent.
	args := auth.TicketArgs{Scope: r.URL.Query().Get("scope")}
	if args.Scope == "" {
		args.Scope = string(auth.ScopeTerminal)
	}
	t, err := authtools.ToolTicketsCreate.Call(r.Context(), e.dispatcher(), callerOf(r), args)
	if err == nil && t.Ticket == "" {
		err = fault.New(fault.Internal, "internal error")
	}
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, AIOTicket{Success: true, Message: "ok", Data: t, Ticket: t.Ticket, ExpiresAt: t.ExpiresAt,
		ExpiresIn: max(0, int(time.Until(t.ExpiresAt).Round(time.Second).Seconds()))})
}

func aioAuth(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	a, err := ToolAuthCheck.Call(r.Context(), e.dispatcher(), callerOf(r), struct{}{})
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": a.Status, "key_id": a.KeyID, "key_name": a.KeyName, "role": a.Role})
}
