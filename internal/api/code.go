package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sandhold/sandhold/internal/coderun"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
)

// CodeConfig is what the code routes report about sessions.
type CodeConfig struct {
	IdleTimeout time.Duration
	MaxSessions int
}

// CodeRoutes mounts AIO Sandbox 1.9.4's code and jupyter routes, at /v1/...
// (the caller's default sandbox) and /sandboxes/{id}/v1/... (a given one).
// Every handler calls the dispatcher. Invalid bodies get AIO's 422 shape
// ({"detail": [{loc, msg, type}]}); other errors AIO's envelope with data
// null and the real status code.
func (s *Server) CodeRoutes(d *dispatch.Dispatcher, cfg CodeConfig) {
	h := &codeHandlers{d: d, cfg: cfg}
	s.documentCode()
	for _, prefix := range []string{"", "/sandboxes/{id}"} {
		s.router.Post(prefix+"/v1/code/execute", h.execute)
		s.router.Get(prefix+"/v1/code/info", h.info)
		s.router.Post(prefix+"/v1/jupyter/execute", h.jupyterExecute)
		s.router.Get(prefix+"/v1/jupyter/info", h.jupyterInfo)
		s.router.Get(prefix+"/v1/jupyter/sessions", h.jupyterSessions)
		s.router.Delete(prefix+"/v1/jupyter/sessions", h.jupyterDeleteAll)
		s.router.Delete(prefix+"/v1/jupyter/sessions/{session_id}", h.jupyterDelete)
		s.router.Post(prefix+"/v1/jupyter/sessions/create", h.jupyterCreate)
	}
}

type codeHandlers struct {
	d   *dispatch.Dispatcher
	cfg CodeConfig
}

func (h *codeHandlers) call(ctx context.Context, tool string, args any) (any, error) {
	c, err := MustCaller(ctx)
	if err != nil {
		return nil, err
	}
	return h.d.Dispatch(ctx, c, tool, args)
}

// aioValidationError is one entry of AIO's (FastAPI's) 422 body.
type aioValidationError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// writeCodeError writes an error the way AIO's code and jupyter routes
// do: the Response envelope with data null (their schemas allow only the
// result or null there). The status is the kind's; the request id travels
// in X-Request-Id, and the detail of an internal error only in the log.
func writeCodeError(w http.ResponseWriter, r *http.Request, err error) {
	b := errorBody(r.Context(), err)
	for k, vs := range b.headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	writeJSON(w, b.status, Envelope[any]{Success: false, Message: b.Message, Data: nil, Hint: b.Hint})
}

// writeCodeValidation writes AIO's 422 shape.
func writeCodeValidation(w http.ResponseWriter, errs []aioValidationError) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": errs})
}

// aioBody is a request body being validated the way AIO's pydantic models
// do: unknown fields are ignored, null means absent for optional fields.
type aioBody struct {
	fields map[string]json.RawMessage
	errs   []aioValidationError
}

func readAIOBody(r *http.Request) (*aioBody, []aioValidationError) {
	var raw json.RawMessage
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&raw); err != nil {
		return nil, []aioValidationError{{Loc: []any{"body"}, Msg: "JSON decode error", Type: "json_invalid"}}
	}
	b := &aioBody{}
	if err := json.Unmarshal(raw, &b.fields); err != nil || b.fields == nil {
		return nil, []aioValidationError{{Loc: []any{"body"}, Msg: "Input should be a valid dictionary or object to extract fields from", Type: "model_attributes_type"}}
	}
	return b, nil
}

func (b *aioBody) fail(field, msg, typ string) {
	b.errs = append(b.errs, aioValidationError{Loc: []any{"body", field}, Msg: msg, Type: typ})
}

func (b *aioBody) present(field string) (json.RawMessage, bool) {
	v, ok := b.fields[field]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, false
	}
	return v, true
}

func (b *aioBody) str(field string, required bool) string {
	v, ok := b.present(field)
	if !ok {
		if required {
			b.fail(field, "Field required", "missing")
		}
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		b.fail(field, "Input should be a valid string", "string_type")
	}
	return s
}

func (b *aioBody) boolean(field string) bool {
	v, ok := b.present(field)
	if !ok {
		return false
	}
	var x bool
	if json.Unmarshal(v, &x) != nil {
		b.fail(field, "Input should be a valid boolean", "bool_type")
	}
	return x
}

// timeout reads an integer number of seconds in [1, max]; 0 when absent.
func (b *aioBody) timeout(field string, maxSec int) time.Duration {
	v, ok := b.present(field)
	if !ok {
		return 0
	}
	var n json.Number
	if json.Unmarshal(v, &n) != nil {
		b.fail(field, "Input should be a valid integer", "int_type")
		return 0
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	switch {
	case err != nil || math.IsInf(f, 0) || math.IsNaN(f):
		b.fail(field, "Input should be a finite number", "finite_number")
	case f != math.Trunc(f):
		b.fail(field, "Input should be a valid integer, got a number with a fractional part", "int_from_float")
	case f < 1:
		b.fail(field, "Input should be greater than or equal to 1", "greater_than_equal")
	case f > float64(maxSec):
		b.fail(field, fmt.Sprintf("Input should be less than or equal to %d", maxSec), "less_than_equal")
	default:
		return time.Duration(f) * time.Second
	}
	return 0
}

// CodeExecuteResponse is AIO's CodeExecuteResponse, with sandhold's
// additions (execution_count, state_lost, reason, truncated, durations).
type CodeExecuteResponse struct {
	Language       string           `json:"language"`
	Status         string           `json:"status"`
	Outputs        []coderun.Output `json:"outputs"`
	Code           string           `json:"code"`
	Stdout         *string          `json:"stdout"`
	Stderr         *string          `json:"stderr"`
	ExitCode       *int             `json:"exit_code"`
	Traceback      []string         `json:"traceback"`
	SessionID      *string          `json:"session_id"`
	ExecutionCount int              `json:"execution_count"`
	StateLost      bool             `json:"state_lost"`
	Reason         string           `json:"reason,omitempty"`
	Truncated      bool             `json:"truncated"`
	DurationMS     int64            `json:"duration_ms"`
	CPUMS          int64            `json:"cpu_ms"`
}

func (h *codeHandlers) execute(w http.ResponseWriter, r *http.Request) {
	b, errs := readAIOBody(r)
	if errs != nil {
		writeCodeValidation(w, errs)
		return
	}
	req := coderun.Request{Language: b.str("language", true), Code: b.str("code", true), Cwd: b.str("cwd", false),
		Stateful: b.boolean("stateful"), SessionID: b.str("session_id", false),
		Timeout: b.timeout("timeout", int(coderun.MaxTimeout.Seconds()))}
	if _, ok := b.present("language"); ok && req.Language != coderun.Python && req.Language != coderun.JavaScript && req.Language != coderun.Bash {
		b.fail("language", "Input should be 'python', 'javascript' or 'bash'", "enum")
	}
	if b.errs != nil {
		writeCodeValidation(w, b.errs)
		return
	}
	res, err := h.call(r.Context(), coderun.ToolExecute, coderun.ArgsOf(chi.URLParam(r, "id"), req))
	if err != nil {
		writeCodeError(w, r, err)
		return
	}
	out := res.(coderun.Result)
	resp := CodeExecuteResponse{Language: out.Language, Status: out.Status, Outputs: out.Outputs, Code: req.Code,
		Stdout: &out.Stdout, Stderr: &out.Stderr, ExitCode: out.ExitCode, Traceback: out.Traceback,
		ExecutionCount: out.ExecutionCount, StateLost: out.StateLost, Reason: out.Reason, Truncated: out.Truncated,
		DurationMS: out.DurationMS, CPUMS: out.CPUMS}
	if out.SessionID != "" {
		resp.SessionID = &out.SessionID
	}
	WriteData(w, http.StatusOK, resp)
}

func (h *codeHandlers) info(w http.ResponseWriter, r *http.Request) {
	res, err := h.call(r.Context(), coderun.ToolInfo, coderun.SandboxArgs{Sandbox: chi.URLParam(r, "id")})
	if err != nil {
		writeCodeError(w, r, err)
		return
	}
	// AIO's Language enum is python and javascript: bash (a sandhold
	// extension of /v1/code/execute) is listed under details.
	var langs []coderun.LanguageInfo
	var extra []string
	for _, l := range res.([]coderun.LanguageInfo) {
		if l.Language == coderun.Python || l.Language == coderun.JavaScript {
			langs = append(langs, l)
		} else {
			extra = append(extra, l.Language)
		}
	}
	for i := range langs {
		langs[i].Details["extra_languages"] = extra
	}
	WriteData(w, http.StatusOK, map[string]any{"languages": langs})
}

// kernelName accepts python3 and python3.N: there is one python in a
// sandbox, /usr/bin/python3.
var kernelName = regexp.MustCompile(`^python3(\.[0-9]{1,2})?$`)

const jupyterKernel = "python3"

// JupyterExecuteResponse is AIO's JupyterExecuteResponse.
type JupyterExecuteResponse struct {
	KernelName     string           `json:"kernel_name"`
	SessionID      string           `json:"session_id"`
	Status         string           `json:"status"`
	ExecutionCount int              `json:"execution_count"`
	Outputs        []coderun.Output `json:"outputs"`
	Code           string           `json:"code"`
	MsgID          string           `json:"msg_id"`
	StateLost      bool             `json:"state_lost"`
}

func (h *codeHandlers) jupyterExecute(w http.ResponseWriter, r *http.Request) {
	b, errs := readAIOBody(r)
	if errs != nil {
		writeCodeValidation(w, errs)
		return
	}
	req := coderun.Request{Language: coderun.Python, Code: b.str("code", true), Cwd: b.str("cwd", false), Stateful: true,
		SessionID: b.str("session_id", false), Timeout: b.timeout("timeout", int(coderun.MaxTimeout.Seconds()))}
	if k := b.str("kernel_name", false); k != "" && !kernelName.MatchString(k) {
		b.fail("kernel_name", "Input should be 'python3' or 'python3.N'", "value_error")
	}
	if b.errs != nil {
		writeCodeValidation(w, b.errs)
		return
	}
	res, err := h.call(r.Context(), coderun.ToolExecute, coderun.ArgsOf(chi.URLParam(r, "id"), req))
	if err != nil {
		writeCodeError(w, r, err)
		return
	}
	out := res.(coderun.Result)
	WriteData(w, http.StatusOK, JupyterExecuteResponse{KernelName: jupyterKernel, SessionID: out.SessionID, Status: out.Status,
		ExecutionCount: out.ExecutionCount, Outputs: out.Outputs, Code: req.Code, MsgID: uuid.NewString(), StateLost: out.StateLost})
}

func (h *codeHandlers) sessions(r *http.Request) ([]coderun.SessionInfo, error) {
	res, err := h.call(r.Context(), coderun.ToolSessions, coderun.SandboxArgs{Sandbox: chi.URLParam(r, "id"), Language: coderun.Python})
	if err != nil {
		return nil, err
	}
	return res.([]coderun.SessionInfo), nil
}

func (h *codeHandlers) jupyterInfo(w http.ResponseWriter, r *http.Request) {
	list, err := h.sessions(r)
	if err != nil {
		writeCodeError(w, r, err)
		return
	}
	WriteData(w, http.StatusOK, map[string]any{
		"default_kernel": jupyterKernel, "available_kernels": []string{jupyterKernel}, "active_sessions": len(list),
		"session_timeout_seconds": int(h.cfg.IdleTimeout.Seconds()), "max_sessions": h.cfg.MaxSessions,
		"description":      "Python sessions backed by a resident /usr/bin/python3 per session inside the sandbox (not a Jupyter kernel; outputs use Jupyter's shapes)",
		"kernel_detection": "fixed: the sandbox's /usr/bin/python3",
	})
}

type jupyterSessionInfo struct {
	KernelName string  `json:"kernel_name"`
	LastUsed   float64 `json:"last_used"`
	AgeSeconds int     `json:"age_seconds"`
}

func (h *codeHandlers) jupyterSessions(w http.ResponseWriter, r *http.Request) {
	list, err := h.sessions(r)
	if err != nil {
		writeCodeError(w, r, err)
		return
	}
	out := map[string]jupyterSessionInfo{}
	for _, s := range list {
		out[s.ID] = jupyterSessionInfo{KernelName: jupyterKernel, LastUsed: float64(s.LastUsed.UnixMilli()) / 1000,
			AgeSeconds: int(time.Since(s.Created).Seconds())}
	}
	WriteData(w, http.StatusOK, map[string]any{"sessions": out})
}

func (h *codeHandlers) jupyterDeleteAll(w http.ResponseWriter, r *http.Request) {
	res, err := h.call(r.Context(), coderun.ToolSessionDelete, coderun.SandboxArgs{Sandbox: chi.URLParam(r, "id"), Language: coderun.Python, All: true})
	if err != nil {
		writeCodeError(w, r, err)
		return
	}
	WriteData(w, http.StatusOK, map[string]any{"deleted": res})
}

func (h *codeHandlers) jupyterDelete(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "session_id")
	if coderun.CheckSessionID(id) != nil {
		writeCodeError(w, r, errNoSession)
		return
	}
	if _, err := h.call(r.Context(), coderun.ToolSessionDelete, coderun.SandboxArgs{Sandbox: chi.URLParam(r, "id"), SessionID: id}); err != nil {
		writeCodeError(w, r, err)
		return
	}
	WriteData(w, http.StatusOK, map[string]any{"session_id": id})
}

var errNoSession = fault.New(fault.NotFound, "no such session")

func (h *codeHandlers) jupyterCreate(w http.ResponseWriter, r *http.Request) {
	b, errs := readAIOBody(r)
	if errs != nil {
		writeCodeValidation(w, errs)
		return
	}
	id, cwd := b.str("session_id", false), b.str("cwd", false)
	if k := b.str("kernel_name", false); k != "" && !kernelName.MatchString(k) {
		b.fail("kernel_name", "Input should be 'python3' or 'python3.N'", "value_error")
	}
	if id != "" && coderun.CheckSessionID(id) != nil {
		b.fail("session_id", "session_id must be 1-128 letters, digits or ._:-", "value_error")
	}
	if b.errs != nil {
		writeCodeValidation(w, b.errs)
		return
	}
	res, err := h.call(r.Context(), coderun.ToolSessionCreate, coderun.SandboxArgs{Sandbox: chi.URLParam(r, "id"),
		Language: coderun.Python, SessionID: id, Cwd: cwd})
	if err != nil {
		writeCodeError(w, r, err)
		return
	}
	info := res.(coderun.SessionInfo)
	WriteData(w, http.StatusOK, map[string]any{"session_id": info.ID, "kernel_name": jupyterKernel, "message": "session created"})
}

// Request shapes, for the OpenAPI document only: the handlers validate
// bodies themselves to answer AIO's 422 shape.
type (
	// CodeExecuteRequest is AIO's CodeExecuteRequest (+ language bash).
	CodeExecuteRequest struct {
		Language  string  `json:"language" enum:"python,javascript,bash" doc:"bash is a sandhold extension"`
		Code      string  `json:"code"`
		Timeout   *int    `json:"timeout,omitempty" minimum:"1" maximum:"300" doc:"wall timeout in seconds (default 30); exceeding it kills the interpreter"`
		Cwd       *string `json:"cwd,omitempty"`
		Stateful  bool    `json:"stateful,omitempty" doc:"run in a session that keeps state between calls"`
		SessionID *string `json:"session_id,omitempty" doc:"an existing session (404 otherwise); omit with stateful to start one"`
	}
	// JupyterExecuteRequest is AIO's JupyterExecuteRequest.
	JupyterExecuteRequest struct {
		Code       string  `json:"code"`
		Timeout    *int    `json:"timeout,omitempty" minimum:"1" maximum:"300"`
		KernelName *string `json:"kernel_name,omitempty" doc:"python3 or python3.N (one python per sandbox)"`
		SessionID  *string `json:"session_id,omitempty" doc:"an existing session (404 otherwise); omitted: a new session"`
		Cwd        *string `json:"cwd,omitempty"`
	}
	// JupyterCreateSessionRequest is AIO's JupyterCreateSessionRequest.
	JupyterCreateSessionRequest struct {
		SessionID  *string `json:"session_id,omitempty"`
		KernelName *string `json:"kernel_name,omitempty"`
		Cwd        *string `json:"cwd,omitempty"`
	}
	// AIOValidationError is AIO's 422 body (FastAPI's HTTPValidationError).
	AIOValidationError struct {
		Detail []aioValidationError `json:"detail"`
	}
	codeInfoData struct {
		Languages []coderun.LanguageInfo `json:"languages"`
	}
	jupyterInfoData struct {
		DefaultKernel         string   `json:"default_kernel"`
		AvailableKernels      []string `json:"available_kernels"`
		ActiveSessions        int      `json:"active_sessions"`
		SessionTimeoutSeconds int      `json:"session_timeout_seconds"`
		MaxSessions           int      `json:"max_sessions"`
		Description           string   `json:"description"`
		KernelDetection       string   `json:"kernel_detection"`
	}
	jupyterSessionsData struct {
		Sessions map[string]jupyterSessionInfo `json:"sessions"`
	}
	jupyterCreateData struct {
		SessionID  string `json:"session_id"`
		KernelName string `json:"kernel_name"`
		Message    string `json:"message"`
	}
)

// documentCode adds the code and jupyter routes to the OpenAPI document.
func (s *Server) documentCode() {
	oa := s.api.OpenAPI()
	schema := func(t reflect.Type, hint string) *huma.Schema { return oa.Components.Schemas.Schema(t, true, hint) }
	errSchema := schema(reflect.TypeFor[AIOValidationError](), "AIOValidationError")
	type route struct {
		id, method, path, summary string
		req, res                  reflect.Type
	}
	routes := []route{
		{"code-execute", http.MethodPost, "/v1/code/execute", "Run python, javascript or bash code, statelessly or in a session (AIO)",
			reflect.TypeFor[CodeExecuteRequest](), reflect.TypeFor[Envelope[CodeExecuteResponse]]()},
		{"code-info", http.MethodGet, "/v1/code/info", "Supported runtimes and versions (AIO)", nil, reflect.TypeFor[Envelope[codeInfoData]]()},
		{"jupyter-execute", http.MethodPost, "/v1/jupyter/execute", "Run python in a session with Jupyter-shaped outputs (AIO)",
			reflect.TypeFor[JupyterExecuteRequest](), reflect.TypeFor[Envelope[JupyterExecuteResponse]]()},
		{"jupyter-info", http.MethodGet, "/v1/jupyter/info", "Python session service information (AIO)", nil, reflect.TypeFor[Envelope[jupyterInfoData]]()},
		{"jupyter-sessions", http.MethodGet, "/v1/jupyter/sessions", "The caller's python sessions in the sandbox (AIO)", nil, reflect.TypeFor[Envelope[jupyterSessionsData]]()},
		{"jupyter-sessions-delete", http.MethodDelete, "/v1/jupyter/sessions", "End the caller's python sessions in the sandbox (AIO)", nil, reflect.TypeFor[Envelope[map[string]int]]()},
		{"jupyter-session-delete", http.MethodDelete, "/v1/jupyter/sessions/{session_id}", "End one session (AIO)", nil, reflect.TypeFor[Envelope[map[string]string]]()},
		{"jupyter-session-create", http.MethodPost, "/v1/jupyter/sessions/create", "Start a python session (AIO)",
			reflect.TypeFor[JupyterCreateSessionRequest](), reflect.TypeFor[Envelope[jupyterCreateData]]()},
	}
	for _, r := range routes {
		op := &huma.Operation{OperationID: r.id, Method: r.method, Path: r.path, Tags: []string{"code"}, Security: Security,
			Summary:     r.summary,
			Description: "Acts on the caller's default sandbox; the same route under /sandboxes/{id} acts on sandbox id.",
			Responses: map[string]*huma.Response{
				"200": {Description: "ok", Content: map[string]*huma.MediaType{"application/json": {Schema: schema(r.res, r.id+"-response")}}},
			},
		}
		if strings.Contains(r.path, "{session_id}") {
			op.Parameters = []*huma.Param{{Name: "session_id", In: "path", Required: true, Schema: &huma.Schema{Type: "string"}}}
		}
		if r.req != nil {
			op.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {Schema: schema(r.req, r.id+"-request")}}}
			op.Responses["422"] = &huma.Response{Description: "invalid request (AIO's shape)", Content: map[string]*huma.MediaType{"application/json": {Schema: errSchema}}}
		}
		oa.AddOperation(op)
	}
}
