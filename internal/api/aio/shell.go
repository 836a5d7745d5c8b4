package aio

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/shell"
)

// ShellRoutes mounts AIO Sandbox 1.9.4's shell, terminal, bash pipe and
// sandbox-info routes from the AIO route table, at /v1/... (the caller's
// default sandbox) and at /sandboxes/{id}/v1/... (a given one), so an AIO
// SDK works unchanged with either base URL.
func ShellRoutes(s *api.Server, d *dispatch.Dispatcher) { mountAIO(s, d, groupShell) }

// shellExec is POST /v1/shell/exec: the result as JSON, or with
// Accept: text/event-stream the output as it comes (SSE) and the result.
func shellExec(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	args, err := decodeRow[shell.ShellExecArgs](rt, r)
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	args.ActOn(chi.URLParam(r, "id"))
	ctx := r.Context()
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		ctx = dispatch.WithStreaming(ctx)
	}
	out, err := shell.ToolShellExec.Call(ctx, e.dispatcher(), callerOf(r), args)
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	if run := out.Running(); run != nil {
		streamShell(w, r, run)
		return
	}
	api.WriteData(w, http.StatusOK, out)
}

// streamShell sends a shell command's output as SSE "output" events while
// it runs and its result as a "result" event. A client that goes away
// leaves the command running in its session (AIO's behaviour).
func streamShell(w http.ResponseWriter, r *http.Request, run *shell.Running) {
	fl, ok := w.(http.Flusher)
	if !ok {
		api.WriteError(w, r, fault.New(fault.Unsupported, "streaming is not supported on this connection"))
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

// terminal is WS /v1/shell/ws: a live terminal on a new session, or on
// ?session_id=… (reattach). Browsers authenticate with ?ticket=… (the auth
// middleware redeems it); other clients with a header. The dispatcher
// takes one of the key's terminal slots before the upgrade, so a refusal
// is a plain HTTP answer (429).
func terminal(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		e.fail(w, r, rt, "", fault.New(fault.Invalid, "this route needs a WebSocket upgrade"))
		return
	}
	q := r.URL.Query()
	args := shell.TerminalArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, SessionID: q.Get("session_id")}
	for name, dst := range map[string]*int{"rows": &args.Rows, "cols": &args.Cols} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				e.fail(w, r, rt, "", fault.InvalidField(inQuery+"."+name, name+" must be a whole number"))
				return
			}
			*dst = n
		}
	}
	t, err := shell.ToolTerminal.Call(r.Context(), e.dispatcher(), callerOf(r), args)
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		t.Close()
		return
	}
	t.Serve(r.Context(), conn)
}

// terminalURL answers GET /v1/shell/terminal-url: the WebSocket URL that
// attaches a live terminal to the new session (connect with a header, or
// add ?ticket=… from POST /v1/tickets).
func terminalURL(r *http.Request, res shell.CreateResult) string {
	scheme := "ws"
	if r.TLS != nil {
		scheme = "wss"
	}
	path := "/v1/shell/ws"
	if id := chi.URLParam(r, "id"); id != "" {
		path = "/sandboxes/" + url.PathEscape(id) + path
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: path, RawQuery: "session_id=" + url.QueryEscape(res.SessionID)}
	return u.String()
}

// sandboxInfoBody is AIO's SandboxResponse: the envelope with the
// environment beside it (AIO puts it at the top level, data is null).
type sandboxInfoBody struct {
	Success bool    `json:"success"`
	Message string  `json:"message"`
	Data    *string `json:"data"`
	Hint    *string `json:"hint"`
	shell.SandboxInfo
}

// sandboxInfo is GET /v1/sandbox: the sandbox's environment, gathered
// inside it and cached.
func sandboxInfo(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	info, err := shell.ToolSandboxDetail.Call(r.Context(), e.dispatcher(), callerOf(r), shell.InfoArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}})
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, sandboxInfoBody{Success: true, Message: "ok", SandboxInfo: info})
}
