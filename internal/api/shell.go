package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/coder/websocket"
	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/shell"
)

// ShellRoutes mounts AIO Sandbox 1.9.4's shell, terminal, bash pipe and
// sandbox-info routes at /v1/... (the caller's default sandbox) and at
// /sandboxes/{id}/v1/... (a given one), so an AIO SDK works unchanged with
// either base URL. Every handler decodes, validates (invalid input gets
// AIO's 422 body) and calls the dispatcher.
func (s *Server) ShellRoutes(d *dispatch.Dispatcher) {
	h := &shellHandlers{s: s, d: d}
	for _, prefix := range []string{"", "/sandboxes/{id}"} {
		r := s.router
		r.Post(prefix+"/v1/shell/exec", h.shellExec)
		r.Post(prefix+"/v1/shell/view", aioJSON[shell.ShellSessionArgs](h, shell.ToolShellView))
		r.Post(prefix+"/v1/shell/wait", aioJSON[shell.ShellWaitArgs](h, shell.ToolShellWait))
		r.Post(prefix+"/v1/shell/write", aioJSON[shell.ShellWriteArgs](h, shell.ToolShellWrite))
		r.Post(prefix+"/v1/shell/kill", aioJSON[shell.ShellSessionArgs](h, shell.ToolShellKill))
		r.Post(prefix+"/v1/shell/sessions/create", aioJSON[shell.ShellCreateArgs](h, shell.ToolShellCreate))
		r.Post(prefix+"/v1/shell/sessions/update", aioJSON[shell.ShellUpdateArgs](h, shell.ToolShellUpdate))
		r.Get(prefix+"/v1/shell/sessions", h.shellList(shell.ToolShellList))
		r.Get(prefix+"/v1/shell/sessions/stats", h.shellList(shell.ToolShellStats))
		r.Delete(prefix+"/v1/shell/sessions", aioJSON[shell.ListArgs](h, shell.ToolShellDelAll))
		r.Delete(prefix+"/v1/shell/sessions/{session_id}", h.shellDelete)
		r.Get(prefix+"/v1/shell/ws", h.terminal)
		h.bashRoutes(r, prefix)
		r.Get(prefix+"/v1/sandbox", h.sandboxInfo)
		r.Get(prefix+"/v1/sandbox/packages/python", h.sandboxPackages("python"))
		r.Get(prefix+"/v1/sandbox/packages/nodejs", h.sandboxPackages("nodejs"))
		r.Get(prefix+"/v1/shell/terminal-url", h.terminalURL)
	}
	s.documentShell()
}

type shellHandlers struct {
	s *Server
	d *dispatch.Dispatcher
}

// shellValidation is one entry of AIO's (FastAPI's) 422 body.
type shellValidation struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// shellInvalidBody is AIO's HTTPValidationError with our envelope fields
// beside it, so AIO clients and ours both read it.
type shellInvalidBody struct {
	Detail  []shellValidation `json:"detail"`
	Success bool              `json:"success"`
	Message string            `json:"message"`
	Data    ErrorData         `json:"data"`
	Hint    *string           `json:"hint"`
}

// writeShellError writes invalid requests in AIO's 422 shape and every
// other error as the native envelope.
func writeShellError(w http.ResponseWriter, r *http.Request, err error) {
	kind := fault.KindOf(err)
	if kind != fault.Invalid && kind != fault.Unprocessable {
		WriteError(w, r, err)
		return
	}
	field := fault.FieldOf(err)
	loc := []any{"body"}
	if f := strings.TrimPrefix(field, "body."); f != "" && f != "body" {
		for _, p := range strings.Split(f, ".") {
			loc = append(loc, p)
		}
	}
	msg := fault.Public(err)
	writeJSON(w, http.StatusUnprocessableEntity, shellInvalidBody{
		Detail:  []shellValidation{{Loc: loc, Msg: msg, Type: "value_error"}},
		Message: msg,
		Data:    ErrorData{Code: string(fault.Unprocessable), RequestID: RequestID(r.Context()), Field: field},
	})
}

// decodeAIO reads a JSON body into v the way AIO's pydantic models do:
// unknown fields are ignored; wrong types, numbers out of range (1e309)
// and broken JSON are invalid.
func decodeAIO(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return fault.New(fault.TooLarge, "request body too large")
		case errors.As(err, &te):
			return fault.InvalidField("body."+te.Field, fmt.Sprintf("%s: wrong type or out of range", te.Field))
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

// setSandbox names the route's sandbox in args (a pointer to a struct with
// a Sandbox string field); a body cannot choose it.
func setSandbox(args any, r *http.Request) {
	f := reflect.ValueOf(args).Elem().FieldByName("Sandbox")
	if f.IsValid() && f.Kind() == reflect.String {
		f.SetString(chi.URLParam(r, "id"))
	}
}

// dispatch checks args and calls tool for the request's caller.
func (h *shellHandlers) dispatch(r *http.Request, tool string, args shell.Checker) (any, error) {
	if err := args.Validate(); err != nil {
		return nil, err
	}
	c, err := MustCaller(r.Context())
	if err != nil {
		return nil, err
	}
	return h.d.Dispatch(r.Context(), c, tool, args)
}

// aioJSON serves a POST (or DELETE) route whose JSON body is T.
func aioJSON[T shell.Checker](h *shellHandlers, tool string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var args T
		if r.Method == http.MethodPost {
			if err := decodeAIO(r, &args); err != nil {
				writeShellError(w, r, err)
				return
			}
		}
		setSandbox(&args, r)
		res, err := h.dispatch(r, tool, args)
		if err != nil {
			writeShellError(w, r, err)
			return
		}
		WriteData(w, http.StatusOK, res)
	}
}

func (h *shellHandlers) shellExec(w http.ResponseWriter, r *http.Request) {
	var args shell.ShellExecArgs
	if err := decodeAIO(r, &args); err != nil {
		writeShellError(w, r, err)
		return
	}
	setSandbox(&args, r)
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		r = r.WithContext(dispatch.WithStreaming(r.Context()))
	}
	res, err := h.dispatch(r, shell.ToolShellExec, args)
	if err != nil {
		writeShellError(w, r, err)
		return
	}
	out, err := dispatch.ResultAs[shell.Result](shell.ToolShellExec, res)
	if err != nil {
		writeShellError(w, r, err)
		return
	}
	if run := out.Running(); run != nil {
		h.streamShell(w, r, run)
		return
	}
	WriteData(w, http.StatusOK, res)
}

// streamShell sends a shell command's output as SSE "output" events while
// it runs and its result as a "result" event. A client that goes away
// leaves the command running in its session (AIO's behaviour).
func (h *shellHandlers) streamShell(w http.ResponseWriter, r *http.Request, run *shell.Running) {
	fl, ok := w.(http.Flusher)
	if !ok {
		WriteError(w, r, fault.New(fault.Unsupported, "streaming is not supported on this connection"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	var off int64
	flush := func() {
		for {
			data, next, _ := run.Output().ReadAt(off, 32<<10)
			if len(data) == 0 {
				break
			}
			send("output", map[string]any{"session_id": run.Session.ID, "output": strings.ReplaceAll(string(data), "\r\n", "\n")})
			off = next
		}
		fl.Flush()
	}
	for {
		ch, _ := run.Output().Wait()
		flush()
		select {
		case <-run.Done():
			flush()
			send("result", run.Result())
			fl.Flush()
			return
		case <-r.Context().Done():
			return
		case <-ch:
		}
	}
}

// shellList serves the session list and stats: at /v1/... every session
// the caller may see (the monitoring view: an admin's or viewer's are all
// of them), at /sandboxes/{id}/v1/... that sandbox's.
func (h *shellHandlers) shellList(tool string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		res, err := h.dispatch(r, tool, shell.ListArgs{Sandbox: id, All: id == ""})
		if err != nil {
			writeShellError(w, r, err)
			return
		}
		WriteData(w, http.StatusOK, res)
	}
}

func (h *shellHandlers) shellDelete(w http.ResponseWriter, r *http.Request) {
	args := shell.ShellSessionArgs{Sandbox: chi.URLParam(r, "id"), ID: chi.URLParam(r, "session_id")}
	if _, err := h.dispatch(r, shell.ToolShellDelete, args); err != nil {
		writeShellError(w, r, err)
		return
	}
	WriteData(w, http.StatusOK, nil)
}

// terminal is WS /v1/shell/ws: a live terminal on a new session, or on
// ?session_id=… (reattach). Browsers authenticate with ?ticket=… (the auth
// middleware redeems it); other clients with a header. The dispatcher
// takes one of the key's terminal slots before the upgrade, so a refusal
// is a plain HTTP answer (429).
func (h *shellHandlers) terminal(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		WriteError(w, r, fault.New(fault.Invalid, "this route needs a WebSocket upgrade"))
		return
	}
	q := r.URL.Query()
	args := shell.TerminalArgs{Sandbox: chi.URLParam(r, "id"), SessionID: q.Get("session_id")}
	for name, dst := range map[string]*int{"rows": &args.Rows, "cols": &args.Cols} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				writeShellError(w, r, fault.InvalidField(name, name+" must be a whole number"))
				return
			}
			*dst = n
		}
	}
	res, err := h.dispatch(r, shell.ToolTerminal, args)
	if err != nil {
		writeShellError(w, r, err)
		return
	}
	t := res.(*shell.Terminal)
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		t.Close()
		return
	}
	t.Serve(r.Context(), conn)
}

// terminalURL is GET /v1/shell/terminal-url: a new interactive session and
// the WebSocket URL that attaches a live terminal to it (connect with a
// header, or add ?ticket=… from POST /v1/tickets).
func (h *shellHandlers) terminalURL(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	res, err := h.dispatch(r, shell.ToolShellCreate, shell.ShellCreateArgs{Sandbox: id, Terminal: true})
	if err != nil {
		writeShellError(w, r, err)
		return
	}
	scheme := "ws"
	if r.TLS != nil {
		scheme = "wss"
	}
	path := "/v1/shell/ws"
	if id != "" {
		path = "/sandboxes/" + url.PathEscape(id) + path
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: path, RawQuery: "session_id=" + url.QueryEscape(res.(shell.CreateResult).SessionID)}
	WriteData(w, http.StatusOK, u.String())
}

// documentShell adds the shell, bash and sandbox-info routes to the OpenAPI
// document (they are plain handlers: AIO's 422 shape and SSE need them).
func (s *Server) documentShell() {
	oa := s.api.OpenAPI()
	schema := func(t reflect.Type, hint string) *huma.Schema { return oa.Components.Schemas.Schema(t, true, hint) }
	invalid := schema(reflect.TypeFor[shellInvalidBody](), "ShellInvalidBody")
	type route struct {
		id, method, path, tag, summary string
		req, res                       reflect.Type
	}
	routes := []route{
		{"shell-exec", http.MethodPost, "/v1/shell/exec", "shell", "Run a command in a PTY shell session that keeps cwd and env (SSE with Accept: text/event-stream)",
			reflect.TypeFor[shell.ShellExecArgs](), reflect.TypeFor[Envelope[shell.Result]]()},
		{"shell-view", http.MethodPost, "/v1/shell/view", "shell", "A session's latest command and output",
			reflect.TypeFor[shell.ShellSessionArgs](), reflect.TypeFor[Envelope[shell.ViewResult]]()},
		{"shell-wait", http.MethodPost, "/v1/shell/wait", "shell", "Wait for a session's command to finish",
			reflect.TypeFor[shell.ShellWaitArgs](), reflect.TypeFor[Envelope[shell.StatusResult]]()},
		{"shell-write", http.MethodPost, "/v1/shell/write", "shell", "Write input to a session's terminal",
			reflect.TypeFor[shell.ShellWriteArgs](), reflect.TypeFor[Envelope[shell.StatusResult]]()},
		{"shell-kill", http.MethodPost, "/v1/shell/kill", "shell", "Stop a session's running command",
			reflect.TypeFor[shell.ShellSessionArgs](), reflect.TypeFor[Envelope[shell.KillResult]]()},
		{"shell-session-create", http.MethodPost, "/v1/shell/sessions/create", "shell", "Start a shell session",
			reflect.TypeFor[shell.ShellCreateArgs](), reflect.TypeFor[Envelope[shell.CreateResult]]()},
		{"shell-session-update", http.MethodPost, "/v1/shell/sessions/update", "shell", "Change a session's no_change_timeout",
			reflect.TypeFor[shell.ShellUpdateArgs](), reflect.TypeFor[Envelope[map[string]any]]()},
		{"shell-sessions", http.MethodGet, "/v1/shell/sessions", "shell", "Shell sessions with sandbox, owner, status and idle time (at /v1: every session the caller may see)",
			nil, reflect.TypeFor[Envelope[shell.SessionsResult]]()},
		{"shell-sessions-stats", http.MethodGet, "/v1/shell/sessions/stats", "shell", "Shell session statistics", nil, reflect.TypeFor[Envelope[shell.Stats]]()},
		{"shell-sessions-delete", http.MethodDelete, "/v1/shell/sessions", "shell", "End the caller's shell sessions in the sandbox", nil, reflect.TypeFor[Envelope[map[string]any]]()},
		{"shell-session-delete", http.MethodDelete, "/v1/shell/sessions/{session_id}", "shell", "End a shell session", nil, reflect.TypeFor[Envelope[map[string]any]]()},
		{"shell-terminal-url", http.MethodGet, "/v1/shell/terminal-url", "shell", "Start an interactive session and return the WebSocket URL of its terminal", nil, reflect.TypeFor[Envelope[string]]()},
		{"shell-ws", http.MethodGet, "/v1/shell/ws", "shell", "WebSocket terminal (AIO protocol: input, resize, ping/pong; output, session_id, ready); ?session_id= reattaches, ?ticket= authenticates browsers",
			nil, nil},
		{"bash-exec", http.MethodPost, "/v1/bash/exec", "bash", "Run a command as its own process (separate stdout/stderr, byte offsets)",
			reflect.TypeFor[shell.BashExecArgs](), reflect.TypeFor[Envelope[shell.BashExecResult]]()},
		{"bash-output", http.MethodPost, "/v1/bash/output", "bash", "Read a command's output from byte offsets, optionally long-polling",
			reflect.TypeFor[shell.BashOutputArgs](), reflect.TypeFor[Envelope[shell.BashOutputResult]]()},
		{"bash-write", http.MethodPost, "/v1/bash/write", "bash", "Write to a running command's stdin",
			reflect.TypeFor[shell.BashWriteArgs](), reflect.TypeFor[Envelope[map[string]any]]()},
		{"bash-kill", http.MethodPost, "/v1/bash/kill", "bash", "Signal a session's current command (SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT)",
			reflect.TypeFor[shell.BashKillArgs](), reflect.TypeFor[Envelope[shell.BashCommandInfo]]()},
		{"bash-sessions", http.MethodGet, "/v1/bash/sessions", "bash", "Bash sessions", nil, reflect.TypeFor[Envelope[[]shell.BashInfo]]()},
		{"bash-session-create", http.MethodPost, "/v1/bash/sessions/create", "bash", "Create a bash session",
			reflect.TypeFor[shell.BashCreateArgs](), reflect.TypeFor[Envelope[shell.BashInfo]]()},
		{"bash-session-close", http.MethodPost, "/v1/bash/sessions/{session_id}/close", "bash", "Close a bash session and kill its commands", nil, reflect.TypeFor[Envelope[map[string]any]]()},
		{"sandbox-info", http.MethodGet, "/v1/sandbox", "sandbox", "The sandbox's environment: OS, user, runtimes, tools, listening ports (gathered inside it)",
			nil, reflect.TypeFor[sandboxInfoBody]()},
		{"sandbox-packages-python", http.MethodGet, "/v1/sandbox/packages/python", "sandbox", "Installed python packages (pip list)", nil, reflect.TypeFor[Envelope[any]]()},
		{"sandbox-packages-nodejs", http.MethodGet, "/v1/sandbox/packages/nodejs", "sandbox", "Installed global node packages (npm ls -g)", nil, reflect.TypeFor[Envelope[any]]()},
	}
	for _, prefixed := range []bool{false, true} {
		for _, r := range routes {
			op := &huma.Operation{OperationID: "aio-" + r.id, Method: r.method, Path: r.path, Tags: []string{r.tag}, Security: Security,
				Summary: r.summary, Description: "Acts on the caller's default sandbox; the same route under /sandboxes/{id} acts on sandbox id.",
				Responses: map[string]*huma.Response{"200": {Description: "ok"}},
			}
			if r.res != nil {
				op.Responses["200"].Content = map[string]*huma.MediaType{"application/json": {Schema: schema(r.res, r.id+"-response")}}
			}
			if prefixed {
				op.OperationID += "-in-sandbox"
				op.Path = "/sandboxes/{id}" + r.path
				op.Parameters = append(op.Parameters, &huma.Param{Name: "id", In: "path", Required: true, Schema: &huma.Schema{Type: "string"}})
			}
			if strings.Contains(r.path, "{session_id}") {
				op.Parameters = append(op.Parameters, &huma.Param{Name: "session_id", In: "path", Required: true, Schema: &huma.Schema{Type: "string"}})
			}
			if r.req != nil {
				op.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {Schema: schema(r.req, r.id+"-request")}}}
				op.Responses["422"] = &huma.Response{Description: "invalid request (AIO's shape)", Content: map[string]*huma.MediaType{"application/json": {Schema: invalid}}}
			}
			oa.AddOperation(op)
		}
	}
}
