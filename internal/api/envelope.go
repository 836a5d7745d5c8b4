package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/approvals"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Envelope is AIO Sandbox's response shape, used by every route:
// {"success": bool, "message": str, "data": any, "hint": str|null}.
type Envelope[T any] struct {
	Success bool    `json:"success" doc:"true when the request did what it asked" example:"true"`
	Message string  `json:"message" doc:"human-readable summary" example:"ok"`
	Data    T       `json:"data"`
	Hint    *string `json:"hint" doc:"what to try next, or null"`
}

// OK wraps data in a success envelope.
func OK[T any](data T) Envelope[T] {
	return Envelope[T]{Success: true, Message: "ok", Data: data}
}

// ErrorData is the data of a native error envelope.
type ErrorData struct {
	Code      string `json:"code" doc:"machine-readable error kind" example:"not_found"`
	RequestID string `json:"request_id" doc:"quote this to the operator; the log has the detail"`
	Field     string `json:"field,omitempty" doc:"the offending input, for invalid requests" example:"body.name"`
	// ApprovalID and Status come with 202 (the call waits for an operator)
	// and with 403 approval_denied (an operator denied this exact call).
	ApprovalID string `json:"approval_id,omitempty" doc:"with 202: poll GET /v1/approvals/{approval_id}; once approved, send the identical request again. With 403 approval_denied: the approval an operator denied"`
	Status     string `json:"status,omitempty" doc:"with 202: pending; with 403 approval_denied: denied" example:"pending"`
}

// ErrorBody is the error envelope. It implements huma.StatusError and
// huma.HeadersError so huma handlers can return it, and is what WriteError
// writes for plain handlers.
type ErrorBody struct {
	status  int
	headers http.Header
	// toolLevel: a tool's own failure on an AIO route (HTTP 200), whose
	// data is null (MarshalJSON).
	toolLevel bool

	Success bool      `json:"success" example:"false"`
	Message string    `json:"message" example:"no such key"`
	Data    ErrorData `json:"data"`
	Hint    *string   `json:"hint"`
}

// Error implements error.
func (e *ErrorBody) Error() string { return e.Message }

// MarshalJSON writes a tool-level failure on an AIO route with data null:
// AIO's answer schemas allow only the result or null there, and its SDKs
// refuse anything else (internal/api/aio's aiostatus.go). Every other failure carries
// ErrorData.
func (e *ErrorBody) MarshalJSON() ([]byte, error) {
	type plain ErrorBody // the same fields, without this method
	if !e.toolLevel {
		return json.Marshal((*plain)(e))
	}
	return json.Marshal(Envelope[any]{Success: e.Success, Message: e.Message, Data: nil, Hint: e.Hint})
}

// GetStatus implements huma.StatusError.
func (e *ErrorBody) GetStatus() int { return e.status }

// GetHeaders implements huma.HeadersError.
func (e *ErrorBody) GetHeaders() http.Header { return e.headers }

// kindStatus is THE table from error kind to HTTP status.
var kindStatus = map[fault.Kind]int{
	fault.Invalid:          http.StatusBadRequest,
	fault.Unauthorized:     http.StatusUnauthorized,
	fault.Forbidden:        http.StatusForbidden,
	fault.NotFound:         http.StatusNotFound,
	fault.Conflict:         http.StatusConflict,
	fault.TooLarge:         http.StatusRequestEntityTooLarge,
	fault.RateLimited:      http.StatusTooManyRequests,
	fault.Unavailable:      http.StatusServiceUnavailable,
	fault.Internal:         http.StatusInternalServerError,
	fault.Timeout:          http.StatusGatewayTimeout,
	fault.Unsupported:      http.StatusNotImplemented,
	fault.Misdirected:      http.StatusMisdirectedRequest,
	fault.Unprocessable:    http.StatusUnprocessableEntity,
	fault.MethodNotAllowed: http.StatusMethodNotAllowed,
	fault.Gone:             http.StatusGone,
	kindMediaType:          http.StatusUnsupportedMediaType,
}

// kindHints are the default hints per kind (null for the rest).
var kindHints = map[fault.Kind]string{
	fault.Unauthorized: "send the key as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
	fault.RateLimited:  "wait for Retry-After seconds before retrying",
	fault.Internal:     "quote the request_id to the operator",
}

// StatusOf returns the HTTP status for a kind (500 for unknown kinds).
func StatusOf(k fault.Kind) int {
	if s, ok := kindStatus[k]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// kindOfStatus maps a status huma produced on its own (validation, body
// size, unknown content type) back to a kind.
func kindOfStatus(status int) fault.Kind {
	switch status {
	case http.StatusUnprocessableEntity:
		return fault.Unprocessable
	case http.StatusUnsupportedMediaType:
		return kindMediaType
	case http.StatusNotAcceptable, http.StatusRequestTimeout:
		return fault.Invalid
	}
	for k, s := range kindStatus {
		if s == status && k != fault.Unprocessable {
			return k
		}
	}
	if status >= 400 && status < 500 {
		return fault.Invalid
	}
	return fault.Internal
}

// errorBody builds the envelope for err. Internal detail is logged with the
// request id, never returned.
func errorBody(ctx context.Context, err error) *ErrorBody {
	rid := RequestID(ctx)
	var ar *dispatch.ApprovalRequired
	if errors.As(err, &ar) {
		// Not a failure: the call is accepted and waits for an operator.
		hint := "poll GET /v1/approvals/" + ar.ID + "; once approved, send the identical request again (it runs once)"
		return &ErrorBody{
			status:  http.StatusAccepted,
			headers: http.Header{"Location": []string{"/v1/approvals/" + ar.ID}},
			Message: "this call needs an operator's approval",
			Data:    ErrorData{Code: "approval_required", RequestID: rid, ApprovalID: ar.ID, Status: "pending"},
			Hint:    &hint,
		}
	}
	kind := fault.KindOf(err)
	if kind == "" {
		kind = fault.Internal
	}
	msg := fault.Public(err)
	if kind == fault.Internal {
		msg = "internal error"
		LoggerFrom(ctx).Error("internal error", "request_id", rid, "err", err)
	}
	if kind == fault.Unavailable && errors.Unwrap(err) != nil {
		// The client hears the public message; the cause (a store that
		// refused an audit record, a dependency down) is for the operator.
		LoggerFrom(ctx).Warn("unavailable", "request_id", rid, "err", err)
	}
	b := &ErrorBody{
		status:  StatusOf(kind),
		headers: http.Header{},
		Message: msg,
		Data:    ErrorData{Code: string(kind), RequestID: rid, Field: fault.FieldOf(err)},
	}
	if h, ok := kindHints[kind]; ok {
		b.Hint = &h
	}
	var dn *approvals.DeniedError
	if errors.As(err, &dn) {
		// An operator's decision, not a role or policy refusal.
		b.Data.Code, b.Data.ApprovalID, b.Data.Status = "approval_denied", dn.ID, "denied"
		hint := "an operator denied this exact call; change it, or ask the operator"
		b.Hint = &hint
	}
	if toolLevel(ctx, err) {
		// AIO's rule: the tool failed, the HTTP call did not (the table's rule, table.go).
		b.status, b.toolLevel = http.StatusOK, true
	}
	if ra := fault.RetryAfterOf(err); ra > 0 {
		b.headers.Set("Retry-After", strconv.Itoa(ra))
	}
	if kind == fault.RateLimited {
		noteRateLimited(ctx, err, b.headers)
	}
	return b
}

// noteRateLimited sets X-RateLimit-Limit/Remaining/Reset on a refusal that
// carries a limiter decision (the dispatcher's limits and the sandbox
// manager's caps) — only Remaining and Reset on one that carries just a
// Retry-After (the failed-auth lockout, whose limit the API does not know)
// — and tells the access log which limit refused, for the refusal metric.
// Reset is a Unix time in seconds.
func noteRateLimited(ctx context.Context, err error, h http.Header) {
	category := "other"
	var rl *dispatch.RateLimited
	if errors.As(err, &rl) && rl.Decision.Limit > 0 {
		category = rl.Category.String()
		SetRateLimitHeaders(h, rl.Decision)
	} else if ra := fault.RetryAfterOf(err); ra > 0 {
		if rl != nil {
			category = rl.Category.String()
		}
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Duration(ra)*time.Second).Unix(), 10))
	}
	if cc, ok := ctx.Value(callerCarrierKey{}).(*callerCarrier); ok {
		cc.limited = category
	}
}

// SetRateLimitHeaders writes d as X-RateLimit-* headers (nothing for a
// category that is not limited).
func SetRateLimitHeaders(h http.Header, d ratelimit.Decision) {
	if d.Limit <= 0 {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(d.Remaining, 0)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(d.Reset.Unix(), 10))
}

// WriteError writes the error envelope for err (any error; non-faults are
// reported as internal). For plain handlers: SSE, WebSocket upgrades,
// streaming downloads.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	b := errorBody(r.Context(), err)
	b.WriteAs(w, b)
}

// ErrorOf is the error envelope of err in the request context ctx: what
// WriteError writes, for a writer that answers some failures in a shape
// of its own (the AIO edge's FileOperationError).
func ErrorOf(ctx context.Context, err error) *ErrorBody { return errorBody(ctx, err) }

// ToolLevel says whether e is a tool's own failure on a route whose table
// answers those with 200 (table.go).
func (e *ErrorBody) ToolLevel() bool { return e.toolLevel }

// WriteAs writes e's headers and status with body as the answer.
func (e *ErrorBody) WriteAs(w http.ResponseWriter, body any) {
	for k, vs := range e.headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	WriteJSON(w, e.status, body)
}

// WriteData writes a success envelope around data with status.
func WriteData(w http.ResponseWriter, status int, data any) {
	WriteJSON(w, status, OK(data))
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = encodeJSON(w, v, true) // the client went away, or v is our own type: nothing to do
}

// humaError turns whatever huma or a handler produced into our envelope.
// Installed as huma.NewErrorWithContext in init.
func humaError(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
	if status == 0 && hctx == nil {
		// huma asks for an example error while building the OpenAPI
		// document: no request, nothing to log.
		return &ErrorBody{status: http.StatusInternalServerError, headers: http.Header{}, Data: ErrorData{Code: string(fault.Internal)}}
	}
	ctx := context.Background()
	if hctx != nil {
		ctx = hctx.Context()
	}
	// A handler's fault error arrives as errs[0] with status 500 (an
	// approval the call waits for, too).
	for _, e := range errs {
		var fe *fault.Error
		var ar *dispatch.ApprovalRequired
		if e != nil && (errors.As(e, &fe) || errors.As(e, &ar)) {
			return finish(ctx, hctx, e)
		}
	}
	kind := kindOfStatus(status)
	field := ""
	for _, e := range errs {
		var d *huma.ErrorDetail
		if errors.As(e, &d) && d != nil {
			if field == "" {
				field = d.Location
				// "expected required property role to be present" at
				// "body" names the field itself: body.role.
				if p, ok := strings.CutPrefix(d.Message, "expected required property "); ok {
					if name, ok := strings.CutSuffix(p, " to be present"); ok && !strings.ContainsAny(name, " .") {
						field += "." + name
					}
				}
				if d.Message != "" {
					msg = msg + ": " + d.Message
				}
			}
		}
	}
	if kind == fault.Internal {
		return finish(ctx, hctx, fault.Wrap(fault.Internal, errors.Join(append([]error{errors.New(msg)}, errs...)...), "internal error"))
	}
	return finish(ctx, hctx, &fault.Error{Kind: kind, Msg: msg, Field: field})
}

func finish(ctx context.Context, hctx huma.Context, err error) huma.StatusError {
	b := errorBody(ctx, err)
	if hctx != nil {
		for k, vs := range b.headers {
			for _, v := range vs {
				hctx.SetHeader(k, v)
			}
		}
	}
	return b
}

func init() {
	// huma's documented hook for a custom error type; the function is
	// stateless, so every Server shares it.
	huma.NewErrorWithContext = humaError
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		return humaError(nil, status, msg, errs...)
	}
}

// logger plumbing: the request-id middleware stores a request-scoped
// logger, built on first use: most requests log only their access line,
// which carries the request id itself (accessLogAndMetrics), so deriving
// a logger (a handler clone per request) is spared for them.
type loggerKey struct{}

// requestLogger is the base logger and the request id, and the logger
// with the id once someone asked for it.
type requestLogger struct {
	base *slog.Logger
	id   string
	once sync.Once
	l    *slog.Logger
}

func (r *requestLogger) get() *slog.Logger {
	r.once.Do(func() { r.l = r.base.With("request_id", r.id) })
	return r.l
}

// LoggerFrom is the request's logger (with its request id), else slog's default.
func LoggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*requestLogger); ok {
		return l.get()
	}
	return slog.Default()
}

// noteTool records the first tool a request calls (a dispatcher observer).
func noteTool(ctx context.Context, _ auth.Caller, name string) {
	if cc, ok := ctx.Value(callerCarrierKey{}).(*callerCarrier); ok {
		cc.mu.Lock()
		if cc.tool == "" {
			cc.tool = name
		}
		cc.mu.Unlock()
	}
}

// allowedRateHeaders gives a successful answer the X-RateLimit-* headers
// of the category its tool counted against (a 429 sets them itself).
func (s *Server) allowedRateHeaders(h http.Header, cc *callerCarrier, status int) {
	if status >= 400 || cc.c == nil || s.disp == nil || h.Get("X-RateLimit-Limit") != "" {
		return
	}
	cc.mu.Lock()
	name := cc.tool
	cc.mu.Unlock()
	l := s.disp.Limiter()
	if name == "" || l == nil {
		return
	}
	t, ok := s.disp.Tool(name)
	if !ok {
		return
	}
	if cat := ratelimit.ForTool(name, t.Category); cat != 0 {
		SetRateLimitHeaders(h, l.Current(cc.c.KeyID, cat))
	}
}
