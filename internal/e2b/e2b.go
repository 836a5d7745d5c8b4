package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/approvals"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/workspace"
)

// Where the API is served.
const (
	// Prefix is the control plane: E2B_API_URL=http://host:port/e2b.
	Prefix = "/e2b"
	// SandboxPrefix is the in-sandbox API: E2B_SANDBOX_URL=http://host:port/e2b/sandbox.
	SandboxPrefix = "/e2b/sandbox"
)

// E2B's ports inside a sandbox, named by the E2b-Sandbox-Port header (or
// the content host {port}-{id}).
const (
	EnvdPort        = 49983
	InterpreterPort = 49999
)

// EnvdVersion is the envd version sandhold answers with. The SDK gates
// features on it: 0.6.1 has everything sandhold serves (default user,
// stdin control and closeStdin, recursive watches, streamed uploads) and
// stops before what it does not (file metadata kept in extended
// attributes, entry info in watch events, watches on network mounts), so
// the SDK itself refuses those with its TemplateError.
const EnvdVersion = "0.6.1"

// Deps are what the E2B API needs; the daemon builds them.
type Deps struct {
	API       *api.Server
	Dispatch  *dispatch.Dispatcher
	Sandboxes *sandbox.Manager
	Auth      *auth.Service
	Store     store.Store
	// Templates resolves create's templateID (nil: only host).
	Templates *template.Store
	// Files is the sensitive-path policy the file calls apply.
	Files workspace.Policy
	Guard *guard.Guard
	// ContentDomain is SANDBOX_CONTENT_DOMAIN: getHost(port) answers
	// {port}-{id}.<domain> there.
	ContentDomain string
	Log           *slog.Logger
}

// Service is the E2B API.
type Service struct {
	d      Deps
	tokens *tokens
	procs  *procTable
}

// New returns the service; Tools are registered and Mount serves it.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Service{d: d, tokens: &tokens{st: d.Store}, procs: newProcTable()}
}

// Close ends every process the service started.
func (s *Service) Close() { s.procs.closeAll() }

// Revoke ends the processes a revoked key started.
func (s *Service) Revoke(keyID string) { s.procs.revoke(keyID) }

// Mount serves the control plane under Prefix and the in-sandbox API under
// SandboxPrefix on the server's router.
func (s *Service) Mount() {
	s.controlRoutes(s.d.API.Router())
	envd, interp := s.envdMux(), s.interpMux()
	s.d.API.MountSelfAuthenticated(SandboxPrefix, s.sandboxHandler(envd, interp))
	s.d.API.MountSelfAuthenticatedPath(SignedFilesPath, s.signedFilesHandler(envd, interp))
}

// Errors at the E2B edge. E2B's control plane and envd's HTTP API answer
// {"code": status, "message": text}; Connect RPCs a Connect error. A call
// waiting for an operator's approval is refused the way the SDK reports a
// server-side refusal — 403 (permission_denied) — with a message naming the
// approval: once an operator approves it, the identical call runs once.

// errorJSON is the E2B error body.
type errorJSON struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// approvalMessage is what a client hears of a call that waits for an
// operator.
func approvalMessage(id string) string {
	return "this call needs an operator's approval (approval " + id + "); once an operator approves it, send the identical call again (it runs once)"
}

// statusOf is the HTTP status and public message of err.
func (s *Service) statusOf(ctx context.Context, err error) (int, string) {
	var ar *dispatch.ApprovalRequired
	if errors.As(err, &ar) {
		return http.StatusForbidden, approvalMessage(ar.ID)
	}
	var dn *approvals.DeniedError
	if errors.As(err, &dn) {
		return http.StatusForbidden, "an operator denied this exact call (approval " + dn.ID + ")"
	}
	kind := fault.KindOf(err)
	if kind == "" {
		kind = fault.Internal
	}
	if kind == fault.Internal {
		s.d.Log.Error("e2b: internal error", "request_id", api.RequestID(ctx), "err", err)
		return http.StatusInternalServerError, "internal error (request " + api.RequestID(ctx) + ")"
	}
	return api.StatusOf(kind), fault.Public(err)
}

// writeError answers err as E2B does.
func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := s.statusOf(r.Context(), err)
	if ra := fault.RetryAfterOf(err); ra > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ra))
	}
	var ar *dispatch.ApprovalRequired
	if errors.As(err, &ar) {
		w.Header().Set("Location", "/v1/approvals/"+ar.ID)
	}
	writeJSON(w, status, errorJSON{Code: status, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}

// connectCodes maps error kinds to Connect codes (the SDK maps those to its
// error classes: NotFound → NotFoundError, ResourceExhausted →
// RateLimitError, Unauthenticated → AuthenticationError …).
var connectCodes = map[fault.Kind]connect.Code{
	fault.Invalid:          connect.CodeInvalidArgument,
	fault.Unprocessable:    connect.CodeInvalidArgument,
	fault.Unauthorized:     connect.CodeUnauthenticated,
	fault.Forbidden:        connect.CodePermissionDenied,
	fault.NotFound:         connect.CodeNotFound,
	fault.Conflict:         connect.CodeFailedPrecondition,
	fault.TooLarge:         connect.CodeResourceExhausted,
	fault.RateLimited:      connect.CodeResourceExhausted,
	fault.Unavailable:      connect.CodeUnavailable,
	fault.Timeout:          connect.CodeDeadlineExceeded,
	fault.Unsupported:      connect.CodeUnimplemented,
	fault.MethodNotAllowed: connect.CodeUnimplemented,
	fault.Gone:             connect.CodeNotFound,
}

// rpcError is err as a Connect error.
func (s *Service) rpcError(ctx context.Context, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	var ar *dispatch.ApprovalRequired
	var dn *approvals.DeniedError
	if errors.As(err, &ar) || errors.As(err, &dn) {
		_, msg := s.statusOf(ctx, err)
		return connect.NewError(connect.CodePermissionDenied, errors.New(msg))
	}
	code, ok := connectCodes[fault.KindOf(err)]
	if !ok {
		code = connect.CodeInternal
	}
	_, msg := s.statusOf(ctx, err)
	return connect.NewError(code, errors.New(msg))
}

// EndSandbox kills the processes of a sandbox that stops.
func (s *Service) EndSandbox(id string) { s.procs.endSandbox(id) }
