package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/dispatch/ratetools"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Posture describes the server's isolation for /v1/sandbox/security.
type Posture struct {
	// Insecure is --insecure-no-isolation: announced in every response.
	Insecure bool
	// Checks are the host's features as sandhold doctor reports them.
	Checks any
}

// SandboxRoutes mounts the sandbox routes: lifecycle, exec, posture and
// resources. Every handler calls the dispatcher; the manager is read
// directly only for the posture report's figures.
func (s *Server) SandboxRoutes(d *dispatch.Dispatcher, m *sandbox.Manager, p Posture) {
	h := &sandboxHandlers{s: s, d: d, m: m, posture: p}
	s.sandboxes = m
	reg := func(op huma.Operation, tag string) huma.Operation {
		op.Tags = []string{tag}
		op.Security = Security
		return op
	}
	huma.Register(s.api, reg(huma.Operation{OperationID: "create-sandbox", Method: http.MethodPost, Path: "/v1/sandboxes",
		Summary: "Create a sandbox", DefaultStatus: http.StatusCreated, MaxBodyBytes: s.MaxBody()}, "sandboxes"), h.create)
	huma.Register(s.api, reg(huma.Operation{OperationID: "list-sandboxes", Method: http.MethodGet, Path: "/v1/sandboxes",
		Summary: "List the caller's sandboxes (admins and viewers: all)"}, "sandboxes"), h.list)
	huma.Register(s.api, reg(huma.Operation{OperationID: "get-sandbox", Method: http.MethodGet, Path: "/v1/sandboxes/{id}",
		Summary: "Get a sandbox"}, "sandboxes"), h.get)
	huma.Register(s.api, reg(huma.Operation{OperationID: "delete-sandbox", Method: http.MethodDelete, Path: "/v1/sandboxes/{id}",
		Summary: "Delete a sandbox, its processes and its workspace"}, "sandboxes"), h.delete)
	huma.Register(s.api, reg(huma.Operation{OperationID: "pause-sandbox", Method: http.MethodPost, Path: "/v1/sandboxes/{id}/pause",
		Summary: "Freeze every process of a sandbox"}, "sandboxes"), h.pause)
	huma.Register(s.api, reg(huma.Operation{OperationID: "resume-sandbox", Method: http.MethodPost, Path: "/v1/sandboxes/{id}/resume",
		Summary: "Thaw a paused sandbox"}, "sandboxes"), h.resume)
	huma.Register(s.api, reg(huma.Operation{OperationID: "get-execution", Method: http.MethodGet, Path: "/v1/sandboxes/{id}/exec/{command_id}",
		Summary: "Read a (background) execution's status and output by byte offsets",
		Description: "Output the server no longer keeps answers 410 gone for offsets before a stream's end: the output budget " +
			"(SANDBOX_OUTPUT_BUDGET, SANDBOX_OUTPUT_BUDGET_PER_KEY) evicts the oldest finished executions' output first.",
		Errors: []int{http.StatusGone}}, "exec"), h.getExec)
	huma.Register(s.api, reg(huma.Operation{OperationID: "kill-execution", Method: http.MethodPost, Path: "/v1/sandboxes/{id}/exec/{command_id}/kill",
		Summary: "Kill an execution's whole process tree"}, "exec"), h.killExec)
	huma.Register(s.api, reg(huma.Operation{OperationID: "sandbox-security", Method: http.MethodGet, Path: "/v1/sandbox/security",
		Summary: "Isolation posture: layers, limits, policy"}, "monitoring"), h.security)
	huma.Register(s.api, reg(huma.Operation{OperationID: "sandbox-resources", Method: http.MethodGet, Path: "/v1/sandbox/resources",
		Summary: "Live cgroup figures per sandbox"}, "monitoring"), h.resources)

	// Exec answers JSON or, with Accept: text/event-stream, streams; one
	// plain handler serves both, documented here by hand.
	s.router.Post("/v1/sandboxes/{id}/exec", h.exec)
	reqSchema := s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[ExecBody](), true, "ExecRequest")
	resSchema := s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[Envelope[sandbox.Result]](), true, "ExecResponse")
	s.api.OpenAPI().AddOperation(&huma.Operation{
		OperationID: "exec", Method: http.MethodPost, Path: "/v1/sandboxes/{id}/exec", Tags: []string{"exec"}, Security: Security,
		Summary: "Run a command in a sandbox",
		Description: "Runs argv, or command with /bin/bash -c, inside the sandbox. With `Accept: text/event-stream` the output streams as SSE events (stdout, stderr, exit). With background: true it returns a command_id at once.\n\n" +
			"A one-shot execution ends what it started: when the command exits, every process it left running (`nohup python3 -m http.server 8000 &`, a daemon) is killed with it. " +
			"With keep: true those processes run on, within the sandbox's limits, until they exit, are killed from inside the sandbox, or the sandbox stops; the answer's kept says some did. " +
			"The call answers once the command exited and its output was read; what kept processes print later is discarded (redirect it to a file).",
		Parameters:  []*huma.Param{{Name: "id", In: "path", Required: true, Schema: &huma.Schema{Type: "string"}}},
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {Schema: reqSchema}}},
		Responses: map[string]*huma.Response{
			"200": {Description: "the finished execution (or the started one, with background)", Content: map[string]*huma.MediaType{
				"application/json": {Schema: resSchema}, "text/event-stream": {Schema: &huma.Schema{Type: "string"}}}},
		},
	})
}

type sandboxHandlers struct {
	s       *Server
	d       *dispatch.Dispatcher
	m       *sandbox.Manager
	posture Posture
}

// LimitsBody is how clients write limits: sizes as "512MB", durations as
// "30s", cpu in CPUs.
type LimitsBody struct {
	Memory  string  `json:"memory,omitempty" doc:"memory limit, e.g. 512MB" example:"512MB"`
	CPU     float64 `json:"cpu,omitempty" doc:"CPU quota in CPUs, e.g. 0.5" minimum:"0"`
	Pids    int64   `json:"pids,omitempty" doc:"process/thread limit" minimum:"0"`
	Disk    string  `json:"disk,omitempty" doc:"workspace quota, e.g. 1GB"`
	CPUTime string  `json:"cpu_time,omitempty" doc:"CPU time per execution, e.g. 30s"`
}

// SandboxCreateInput is POST /v1/sandboxes.
type SandboxCreateInput struct {
	Body struct {
		Name    string          `json:"name,omitempty" maxLength:"128"`
		Limits  LimitsBody      `json:"limits,omitempty"`
		Network sandbox.Network `json:"network,omitempty"`
		TTL     string          `json:"ttl,omitempty" doc:"delete the sandbox this long after creation, e.g. 2h"`
		Browser bool            `json:"browser,omitempty" doc:"start the sandbox's browser with it; unset limits get the browser's defaults (within the server's maxima)"`
		// Template is the root to run on (GET /v1/templates).
		Template string `json:"template,omitempty" maxLength:"300" doc:"template name[:tag] or sha256 digest (GET /v1/templates); default host, the host's /usr read-only"`
		// Snapshot restores a snapshot into the new sandbox.
		Snapshot string `json:"snapshot,omitempty" maxLength:"64" doc:"snapshot id (GET /v1/snapshots) to make the sandbox from: its files, installed packages, template, network and limits; processes are not restored (the answer's processes_restored is false)"`
	}
}

func (b LimitsBody) limits() (sandbox.Limits, error) {
	var l sandbox.Limits
	size := func(field, v string) (int64, error) {
		if v == "" {
			return 0, nil
		}
		sz, err := config.ParseSize(v)
		if err != nil {
			return 0, fault.InvalidField(field, fmt.Sprintf("%s: %q is not a size like 512MB", field, v))
		}
		return sz.Bytes(), nil
	}
	var err error
	if l.MemoryBytes, err = size("limits.memory", b.Memory); err != nil {
		return l, err
	}
	if l.DiskBytes, err = size("limits.disk", b.Disk); err != nil {
		return l, err
	}
	if b.CPU < 0 || math.IsNaN(b.CPU) || math.IsInf(b.CPU, 0) || b.CPU > 1e6 {
		return l, fault.InvalidField("limits.cpu", "limits.cpu must be a number of CPUs between 0 and 1e6")
	}
	l.CPUMilli = int64(math.Round(b.CPU * 1000))
	l.Pids = b.Pids
	if b.CPUTime != "" {
		d, err := time.ParseDuration(b.CPUTime)
		if err != nil {
			return l, fault.InvalidField("limits.cpu_time", fmt.Sprintf("limits.cpu_time: %q is not a duration like 30s", b.CPUTime))
		}
		l.CPUTime = d
	}
	return l, nil
}

// SandboxOutput is one sandbox.
type SandboxOutput struct {
	Body Envelope[sandbox.Info]
}

// SandboxListOutput is a list of sandboxes.
type SandboxListOutput struct {
	Body Envelope[[]SandboxRow]
}

// SandboxRow is a sandbox in a list: its record and its owner's key name
// (the console's fleet table shows names, not key ids).
type SandboxRow struct {
	sandbox.Info
	OwnerName string `json:"owner_name,omitempty" doc:"the name of the owning key (absent when the key is gone)"`
}

// SandboxIDInput names a sandbox.
type SandboxIDInput struct {
	ID string `path:"id" maxLength:"64"`
}

func (h *sandboxHandlers) create(ctx context.Context, in *SandboxCreateInput) (*SandboxOutput, error) {
	l, err := in.Body.Limits.limits()
	if err != nil {
		return nil, err
	}
	spec := sandbox.Spec{Name: in.Body.Name, Limits: l, Network: in.Body.Network, Browser: in.Body.Browser, Template: in.Body.Template, Snapshot: in.Body.Snapshot}
	if in.Body.TTL != "" {
		d, err := time.ParseDuration(in.Body.TTL)
		if err != nil {
			return nil, fault.InvalidField("ttl", fmt.Sprintf("ttl: %q is not a duration like 2h", in.Body.TTL))
		}
		spec.TTL = d
	}
	info, err := call(ctx, h.d, sandbox.ToolCreate, spec)
	if err != nil {
		return nil, err
	}
	return &SandboxOutput{Body: OK(info)}, nil
}

func (h *sandboxHandlers) list(ctx context.Context, _ *struct{}) (*SandboxListOutput, error) {
	infos, err := call(ctx, h.d, sandbox.ToolList, sandbox.NoArgs{})
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	if len(infos) > 0 {
		// The caller sees only sandboxes it may, so only their owners'
		// names; a failed lookup leaves the names out, not the list.
		if keys, err := h.s.auth.ListKeys(ctx); err == nil {
			for _, k := range keys {
				names[k.ID] = k.Name
			}
		} else {
			h.s.log.Warn("sandbox list: owner names", "err", err)
		}
	}
	rows := make([]SandboxRow, 0, len(infos))
	for _, in := range infos {
		rows = append(rows, SandboxRow{Info: in, OwnerName: names[in.Owner]})
	}
	return &SandboxListOutput{Body: OK(rows)}, nil
}

func (h *sandboxHandlers) get(ctx context.Context, in *SandboxIDInput) (*SandboxOutput, error) {
	info, err := call(ctx, h.d, sandbox.ToolGet, sandbox.IDArgs{ID: in.ID})
	if err != nil {
		return nil, err
	}
	return &SandboxOutput{Body: OK(info)}, nil
}

// EmptyOutput is a success without data.
type EmptyOutput struct {
	Body Envelope[map[string]any]
}

func done(msg string) *EmptyOutput {
	out := &EmptyOutput{Body: OK(map[string]any{})}
	out.Body.Message = msg
	return out
}

func (h *sandboxHandlers) delete(ctx context.Context, in *SandboxIDInput) (*EmptyOutput, error) {
	if _, err := call(ctx, h.d, sandbox.ToolDelete, sandbox.IDArgs{ID: in.ID}); err != nil {
		return nil, err
	}
	return done("sandbox deleted"), nil
}

func (h *sandboxHandlers) pause(ctx context.Context, in *SandboxIDInput) (*EmptyOutput, error) {
	if _, err := call(ctx, h.d, sandbox.ToolPause, sandbox.IDArgs{ID: in.ID}); err != nil {
		return nil, err
	}
	return done("sandbox paused"), nil
}

func (h *sandboxHandlers) resume(ctx context.Context, in *SandboxIDInput) (*EmptyOutput, error) {
	if _, err := call(ctx, h.d, sandbox.ToolResume, sandbox.IDArgs{ID: in.ID}); err != nil {
		return nil, err
	}
	return done("sandbox resumed"), nil
}

// ExecBody is POST /v1/sandboxes/{id}/exec.
type ExecBody struct {
	Command     string            `json:"command,omitempty" doc:"run with /bin/bash -c"`
	Argv        []string          `json:"argv,omitempty" doc:"run as is (instead of command)"`
	Cwd         string            `json:"cwd,omitempty" doc:"absolute path inside the sandbox; default /workspace"`
	Env         map[string]string `json:"env,omitempty"`
	Timeout     *float64          `json:"timeout,omitempty" doc:"wall timeout in seconds (default 60, max 600; a background command in a sandbox with a ttl has none unless given: the ttl bounds it)"`
	Stdin       string            `json:"stdin,omitempty"`
	Background  bool              `json:"background,omitempty" doc:"return a command_id at once"`
	Keep        bool              `json:"keep,omitempty" doc:"let processes the command leaves running (nohup server &) outlive it; without keep the end of the command kills them"`
	Sudo        bool              `json:"sudo,omitempty" doc:"uid 0 inside the sandbox (needs SANDBOX_ENABLE_SUDO)"`
	OutputLimit int               `json:"output_limit,omitempty" doc:"bytes kept per stream (default 50000)"`
}

func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return fault.New(fault.TooLarge, "request body too large")
		case errors.As(err, &te):
			return fault.InvalidField("body."+te.Field, fmt.Sprintf("body.%s: wrong type", te.Field))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return fault.InvalidField("body."+name, fmt.Sprintf("unknown field %q", name))
		case errors.Is(err, io.EOF):
			return fault.InvalidField("body", "request body is empty")
		}
		return fault.InvalidField("body", "request body is not valid JSON")
	}
	if dec.More() {
		return fault.InvalidField("body", "request body holds more than one JSON value")
	}
	return nil
}

// args is exec.run's arguments for sandbox id; their rules (the timeout's
// range …) are checked by the tool, once, for every caller.
func (b ExecBody) args(id string) sandbox.ExecArgs {
	return sandbox.ExecArgs{ID: id, Command: b.Command, Argv: b.Argv, Cwd: b.Cwd, Env: b.Env, Timeout: b.Timeout,
		Stdin: b.Stdin, Background: b.Background, Keep: b.Keep, Sudo: b.Sudo, OutputLimit: b.OutputLimit}
}

func (h *sandboxHandlers) exec(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body ExecBody
	if err := decodeJSON(r, &body); err != nil {
		WriteError(w, r, err)
		return
	}
	id := chi.URLParam(r, "id")
	if id == "" {
		// An empty id would mean "the default sandbox" to the tool;
		// the native route names its sandbox.
		WriteError(w, r, fault.New(fault.NotFound, "sandbox not found"))
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		ctx = dispatch.WithStreaming(ctx)
	}
	out, err := call(ctx, h.d, sandbox.ToolExec, body.args(id))
	if err != nil {
		WriteError(w, r, err)
		return
	}
	if e := out.Running(); e != nil {
		h.stream(w, r, e)
		return
	}
	WriteData(w, http.StatusOK, out)
}

// stream runs the execution and sends its output as SSE events while it
// runs: "stdout" and "stderr" with the new bytes, then "exit" with the
// result. A client that goes away kills the execution.
func (h *sandboxHandlers) stream(w http.ResponseWriter, r *http.Request, e *sandbox.Execution) {
	ctx := r.Context()
	fl, ok := w.(http.Flusher)
	if !ok {
		e.Kill()
		WriteError(w, r, fault.New(fault.Unsupported, "streaming is not supported on this connection"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	var outOff, errOff int64
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	// flush sends every byte not yet sent, as stdout and stderr events.
	flush := func() {
		for _, st := range []struct {
			name string
			out  *outbuf.Output
			off  *int64
		}{{"stdout", e.Stdout, &outOff}, {"stderr", e.Stderr, &errOff}} {
			for {
				data, next, dropped := st.out.ReadAt(*st.off, 32<<10)
				if len(data) == 0 {
					break
				}
				send(st.name, map[string]any{"data": string(data), "offset": *st.off + dropped, "dropped": dropped})
				*st.off = next
			}
		}
		fl.Flush()
	}
	for {
		outCh, _ := e.Stdout.Wait()
		errCh, _ := e.Stderr.Wait()
		flush()
		select {
		case <-e.Done():
			flush()
			res := e.Result()
			res.Stdout, res.Stderr = "", ""
			send("exit", res)
			fl.Flush()
			return
		case <-ctx.Done():
			e.Kill()
			return
		case <-outCh:
		case <-errCh:
		}
	}
}

// ExecReadInput reads an execution by offsets, optionally waiting.
type ExecReadInput struct {
	ID           string `path:"id" maxLength:"64"`
	CommandID    string `path:"command_id" maxLength:"64"`
	StdoutOffset int64  `query:"stdout_offset" minimum:"0"`
	StderrOffset int64  `query:"stderr_offset" minimum:"0"`
	Wait         int    `query:"wait" minimum:"0" maximum:"60" doc:"seconds to wait for new output or the end"`
}

// ExecChunk is output read by offset.
type ExecChunk struct {
	sandbox.Result
	StdoutOffset int64 `json:"stdout_offset" doc:"offset to read stdout from next"`
	StderrOffset int64 `json:"stderr_offset"`
	Dropped      int64 `json:"dropped" doc:"bytes skipped because they were no longer kept"`
}

// ExecReadOutput is GET /v1/sandboxes/{id}/exec/{command_id}.
type ExecReadOutput struct {
	Body Envelope[ExecChunk]
}

func (h *sandboxHandlers) getExec(ctx context.Context, in *ExecReadInput) (*ExecReadOutput, error) {
	e, err := call(ctx, h.d, sandbox.ToolExecRead, sandbox.ExecRef{ID: in.ID, CommandID: in.CommandID})
	if err != nil {
		return nil, err
	}
	if in.Wait > 0 {
		outCh, _ := e.Stdout.Wait()
		errCh, _ := e.Stderr.Wait()
		if e.Stdout.Total() <= in.StdoutOffset && e.Stderr.Total() <= in.StderrOffset {
			select {
			case <-e.Done():
			case <-outCh:
			case <-errCh:
			case <-ctx.Done():
			case <-time.After(time.Duration(in.Wait) * time.Second):
			}
		}
	}
	if err := e.OutputGone(in.StdoutOffset, in.StderrOffset); err != nil {
		return nil, err
	}
	const chunk = 1 << 20
	r := e.Result()
	out, nextOut, d1 := e.Stdout.ReadAt(in.StdoutOffset, chunk)
	errOut, nextErr, d2 := e.Stderr.ReadAt(in.StderrOffset, chunk)
	r.Stdout, r.Stderr = string(out), string(errOut)
	return &ExecReadOutput{Body: OK(ExecChunk{Result: r, StdoutOffset: nextOut, StderrOffset: nextErr, Dropped: d1 + d2})}, nil
}

// ExecIDInput names an execution.
type ExecIDInput struct {
	ID        string `path:"id" maxLength:"64"`
	CommandID string `path:"command_id" maxLength:"64"`
}

func (h *sandboxHandlers) killExec(ctx context.Context, in *ExecIDInput) (*EmptyOutput, error) {
	if _, err := call(ctx, h.d, sandbox.ToolExecKill, sandbox.ExecRef{ID: in.ID, CommandID: in.CommandID}); err != nil {
		return nil, err
	}
	return done("execution killed"), nil
}

// SecurityReport is GET /v1/sandbox/security.
type SecurityReport struct {
	Insecure   bool                   `json:"insecure_no_isolation"`
	Warning    string                 `json:"warning,omitempty"`
	Layers     []agent.Layer          `json:"layers" doc:"isolation layers in force in the most recently started sandbox"`
	Host       any                    `json:"host" doc:"kernel features, as sandhold doctor reports them"`
	Limits     SecurityLimits         `json:"limits"`
	Pool       sandbox.PoolStatus     `json:"pool"`
	Network    sandbox.NetworkPosture `json:"network" doc:"network modes on offer"`
	Caps       sandbox.Caps           `json:"caps" doc:"the per-key sandbox and per-sandbox execution caps"`
	RateLimits *ratelimit.Report      `json:"rate_limits" doc:"the rate-limit rules (tool ratelimit.rules)"`
	Sandboxes  []SandboxSecurityRow   `json:"sandboxes"`
}

// SecurityLimits are the server's maxima and defaults.
type SecurityLimits struct {
	MaxMemory      int64  `json:"max_memory"`
	MaxProcesses   int64  `json:"max_processes"`
	MaxCPUTime     string `json:"max_cpu_time"`
	MaxDisk        int64  `json:"max_disk"`
	DefaultTimeout string `json:"default_timeout"`
	MaxTimeout     string `json:"max_timeout"`
	SudoEnabled    bool   `json:"sudo_enabled"`
}

// SandboxSecurityRow is one sandbox's network mode and limits.
type SandboxSecurityRow struct {
	ID      string          `json:"id"`
	State   sandbox.State   `json:"state"`
	Network sandbox.Network `json:"network"`
	Limits  sandbox.Limits  `json:"limits"`
	// Template is the root the sandbox runs on: host (the host's /usr)
	// or a template's name:tag, with its digest.
	Template       string `json:"template"`
	TemplateDigest string `json:"template_digest,omitempty"`
}

// SecurityOutput wraps SecurityReport.
type SecurityOutput struct {
	Body Envelope[SecurityReport]
}

func (h *sandboxHandlers) security(ctx context.Context, _ *struct{}) (*SecurityOutput, error) {
	infos, err := call(ctx, h.d, sandbox.ToolList, sandbox.NoArgs{})
	if err != nil {
		return nil, err
	}
	cfg := h.s.cfg
	rep := SecurityReport{
		Insecure: h.posture.Insecure,
		Layers:   h.m.Layers(),
		Host:     h.posture.Checks,
		Limits: SecurityLimits{
			MaxMemory: cfg.MaxMemory.Bytes(), MaxProcesses: int64(cfg.MaxProcesses), MaxCPUTime: cfg.MaxCPUTime.String(),
			MaxDisk: cfg.MaxDisk.Bytes(), DefaultTimeout: sandbox.DefaultTimeout.String(), MaxTimeout: sandbox.MaxTimeout.String(),
			SudoEnabled: cfg.EnableSudo,
		},
		Pool:      h.m.PoolStatus(),
		Network:   h.m.NetworkPosture(),
		Caps:      h.m.Caps(),
		Sandboxes: []SandboxSecurityRow{},
	}
	if _, ok := h.d.Tool(ratetools.ToolRules.Name()); ok {
		rules, err := call(ctx, h.d, ratetools.ToolRules, struct{}{})
		if err != nil {
			return nil, err
		}
		rep.RateLimits = &rules
	}
	if c, ok := auth.CallerFrom(ctx); !ok || (c.Role != auth.RoleAdmin && c.Role != auth.RoleViewer) {
		// Every key's creates: not an agent's to see.
		rep.Pool.Spares.Taken, rep.Pool.Spares.Missed = 0, 0
	}
	if rep.Layers == nil {
		rep.Layers = []agent.Layer{}
	}
	if h.posture.Insecure {
		rep.Warning = "INSECURE: started with --insecure-no-isolation; sandboxes may run without some isolation layers"
	}
	for _, in := range infos {
		rep.Sandboxes = append(rep.Sandboxes, SandboxSecurityRow{ID: in.ID, State: in.State, Network: in.Network, Limits: in.Limits,
			Template: in.Template, TemplateDigest: in.TemplateDigest})
	}
	return &SecurityOutput{Body: OK(rep)}, nil
}

// ResourcesOutput is GET /v1/sandbox/resources.
type ResourcesOutput struct {
	Body Envelope[[]sandbox.Stats]
}

func (h *sandboxHandlers) resources(ctx context.Context, _ *struct{}) (*ResourcesOutput, error) {
	st, err := call(ctx, h.d, sandbox.ToolResources, sandbox.NoArgs{})
	if err != nil {
		return nil, err
	}
	if st == nil {
		st = []sandbox.Stats{}
	}
	return &ResourcesOutput{Body: OK(st)}, nil
}
