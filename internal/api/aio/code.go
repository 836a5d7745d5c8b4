package aio

import (
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/coderun"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
)

// CodeConfig is what the code routes report about sessions.
type CodeConfig struct {
	IdleTimeout time.Duration
	MaxSessions int
}

// CodeRoutes mounts AIO Sandbox 1.9.4's code and jupyter routes from the
// AIO route table, at /v1/... (the caller's default sandbox) and
// /sandboxes/{id}/v1/... (a given one). A failure's data is null (AIO's
// code and jupyter schemas allow only the result or null there).
func CodeRoutes(s *api.Server, d *dispatch.Dispatcher, cfg CodeConfig) {
	mountAIO(s, d, groupCode).codeCfg = cfg
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

// codeExecute turns AIO's CodeExecuteRequest into code.execute's
// arguments.
func codeExecute(r *http.Request, in CodeExecuteRequest) (coderun.ExecuteArgs, error) {
	return coderun.ArgsOf(chi.URLParam(r, "id"), coderun.Request{Language: in.Language, Code: in.Code,
		Cwd: deref(in.Cwd), Stateful: in.Stateful, SessionID: deref(in.SessionID), Timeout: seconds(in.Timeout)}), nil
}

// codeExecuteAnswer is AIO's CodeExecuteResponse of a result.
func codeExecuteAnswer(_ *http.Request, in CodeExecuteRequest, out coderun.Result) (CodeExecuteResponse, error) {
	resp := CodeExecuteResponse{Language: out.Language, Status: out.Status, Outputs: out.Outputs, Code: in.Code,
		Stdout: &out.Stdout, Stderr: &out.Stderr, ExitCode: out.ExitCode, Traceback: out.Traceback,
		ExecutionCount: out.ExecutionCount, StateLost: out.StateLost, Reason: out.Reason, Truncated: out.Truncated,
		DurationMS: out.DurationMS, CPUMS: out.CPUMS}
	if out.SessionID != "" {
		resp.SessionID = &out.SessionID
	}
	return resp, nil
}

// codeInfo lists AIO's languages (python, javascript); bash, a sandhold
// extension of /v1/code/execute, is named under details.
func codeInfo(_ *http.Request, _ struct{}, res []coderun.LanguageInfo) (codeInfoData, error) {
	var langs []coderun.LanguageInfo
	var extra []string
	for _, l := range res {
		if l.Language == coderun.Python || l.Language == coderun.JavaScript {
			langs = append(langs, l)
		} else {
			extra = append(extra, l.Language)
		}
	}
	for i := range langs {
		if langs[i].Details == nil {
			langs[i].Details = map[string]any{}
		}
		langs[i].Details["extra_languages"] = extra
	}
	return codeInfoData{Languages: langs}, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func seconds(p *int) time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(*p) * time.Second
}

// timeoutRule is AIO's timeout field: whole seconds in [1, max].
func timeoutRule(t *int) error {
	maxSec := int(coderun.MaxTimeout.Seconds())
	switch {
	case t == nil:
	case *t < 1:
		return fieldError(inBody, "timeout", "greater_than_equal", "Input should be greater than or equal to 1")
	case *t > maxSec:
		return fieldError(inBody, "timeout", "less_than_equal", fmt.Sprintf("Input should be less than or equal to %d", maxSec))
	}
	return nil
}

func kernelRule(k *string) error {
	if k != nil && *k != "" && !kernelName.MatchString(*k) {
		return fieldError(inBody, "kernel_name", "value_error", "Input should be 'python3' or 'python3.N'")
	}
	return nil
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

// jupyterExecute turns AIO's JupyterExecuteRequest into code.execute's
// arguments: python, in a session.
func jupyterExecute(r *http.Request, in JupyterExecuteRequest) (coderun.ExecuteArgs, error) {
	return coderun.ArgsOf(chi.URLParam(r, "id"), coderun.Request{Language: coderun.Python, Code: in.Code,
		Cwd: deref(in.Cwd), Stateful: true, SessionID: deref(in.SessionID), Timeout: seconds(in.Timeout)}), nil
}

func jupyterExecuteAnswer(_ *http.Request, in JupyterExecuteRequest, out coderun.Result) (JupyterExecuteResponse, error) {
	return JupyterExecuteResponse{KernelName: jupyterKernel, SessionID: out.SessionID, Status: out.Status,
		ExecutionCount: out.ExecutionCount, Outputs: out.Outputs, Code: in.Code, MsgID: uuid.NewString(), StateLost: out.StateLost}, nil
}

// jupyterInfo is GET /v1/jupyter/info: the service and the caller's
// session count (the session limits come from CodeRoutes' config).
func jupyterInfo(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	list, err := coderun.ToolSessions.Call(r.Context(), e.dispatcher(), callerOf(r), pythonSessions(r))
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	cfg := e.codeCfg
	api.WriteData(w, http.StatusOK, jupyterInfoData{
		DefaultKernel: jupyterKernel, AvailableKernels: []string{jupyterKernel}, ActiveSessions: len(list),
		SessionTimeoutSeconds: int(cfg.IdleTimeout.Seconds()), MaxSessions: cfg.MaxSessions,
		Description:     "Python sessions backed by a resident /usr/bin/python3 per session inside the sandbox (not a Jupyter kernel; outputs use Jupyter's shapes)",
		KernelDetection: "fixed: the sandbox's /usr/bin/python3",
	})
}

func pythonSessions(r *http.Request) coderun.SandboxArgs {
	return coderun.SandboxArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Language: coderun.Python}
}

type jupyterSessionInfo struct {
	KernelName string  `json:"kernel_name"`
	LastUsed   float64 `json:"last_used"`
	AgeSeconds int     `json:"age_seconds"`
}

func jupyterSessions(_ *http.Request, _ struct{}, list []coderun.SessionInfo) (jupyterSessionsData, error) {
	out := map[string]jupyterSessionInfo{}
	for _, s := range list {
		out[s.ID] = jupyterSessionInfo{KernelName: jupyterKernel, LastUsed: float64(s.LastUsed.UnixMilli()) / 1000,
			AgeSeconds: int(time.Since(s.Created).Seconds())}
	}
	return jupyterSessionsData{Sessions: out}, nil
}

// jupyterDelete names one session of the URL; an id that cannot be one
// is no such session (a tool-level failure).
func jupyterDelete(r *http.Request, _ struct{}) (coderun.SandboxArgs, error) {
	id := chi.URLParam(r, "session_id")
	if coderun.CheckSessionID(id) != nil {
		return coderun.SandboxArgs{}, errNoSession
	}
	return coderun.SandboxArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, SessionID: id}, nil
}

var errNoSession = fault.New(fault.NotFound, "no such session")

func jupyterCreate(r *http.Request, in JupyterCreateSessionRequest) (coderun.SandboxArgs, error) {
	return coderun.SandboxArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Language: coderun.Python, SessionID: deref(in.SessionID), Cwd: deref(in.Cwd)}, nil
}

func jupyterCreateAnswer(_ *http.Request, _ JupyterCreateSessionRequest, info coderun.SessionInfo) (jupyterCreateData, error) {
	return jupyterCreateData{SessionID: info.ID, KernelName: jupyterKernel, Message: "session created"}, nil
}

// AIO's request shapes of the code and jupyter routes: the edge decodes
// a body into one (decodeAIO) and checks its Validate.
type (
	// CodeExecuteRequest is AIO's CodeExecuteRequest (+ language bash).
	CodeExecuteRequest struct {
		Language  string  `json:"language" required:"true" enum:"python,javascript,bash" doc:"bash is a sandhold extension"`
		Code      string  `json:"code" required:"true"`
		Timeout   *int    `json:"timeout,omitempty" minimum:"1" maximum:"300" doc:"wall timeout in seconds (default 30); exceeding it kills the interpreter"`
		Cwd       *string `json:"cwd,omitempty"`
		Stateful  bool    `json:"stateful,omitempty" doc:"run in a session that keeps state between calls"`
		SessionID *string `json:"session_id,omitempty" doc:"an existing session (404 otherwise); omit with stateful to start one"`
	}
	// JupyterExecuteRequest is AIO's JupyterExecuteRequest.
	JupyterExecuteRequest struct {
		Code       string  `json:"code" required:"true"`
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

// Validate implements dispatch.Validator.
func (q CodeExecuteRequest) Validate() error { return timeoutRule(q.Timeout) }

// Validate implements dispatch.Validator.
func (q JupyterExecuteRequest) Validate() error {
	if err := kernelRule(q.KernelName); err != nil {
		return err
	}
	return timeoutRule(q.Timeout)
}

// Validate implements dispatch.Validator.
func (q JupyterCreateSessionRequest) Validate() error {
	if err := kernelRule(q.KernelName); err != nil {
		return err
	}
	if q.SessionID != nil && *q.SessionID != "" && coderun.CheckSessionID(*q.SessionID) != nil {
		return fieldError(inBody, "session_id", "value_error", "session_id must be 1-128 letters, digits or ._:-")
	}
	return nil
}
