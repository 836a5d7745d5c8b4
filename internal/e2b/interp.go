package e2b

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/coderun"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
)

// The code interpreter (E2B's port 49999): runCode streams a cell's
// output as JSON lines; contexts are sandhold's stateful code sessions
// (internal/coderun). Every call is a code.* tool: code.execute (rated by
// the command guard as exec.run would rate python3 -c or node -e of the
// same code), code.session.create, code.sessions, code.session.delete.

// Interpreter settings, with their reasons.
const (
	// maxCodeBody caps a runCode request (the cell and its options).
	maxCodeBody = 10 << 20
	// cellTimeout is the server's limit on one cell: code.execute's
	// largest. The SDK's own timeoutMs (60 s by default) ends the request
	// sooner; the server then kills the cell (its context's state is lost).
	cellTimeout = float64(coderun.MaxTimeout / time.Second)
	// defaultCwd is where a context starts.
	defaultCwd = home
)

// languages maps E2B's language names onto coderun's.
var languages = map[string]string{
	"": coderun.Python, "python": coderun.Python, "py": coderun.Python,
	"javascript": coderun.JavaScript, "js": coderun.JavaScript,
	"bash": coderun.Bash, "sh": coderun.Bash,
}

func language(name string) (string, error) {
	if l, ok := languages[strings.ToLower(name)]; ok {
		return l, nil
	}
	return "", fault.InvalidField("language", "language "+name+" is not available: sandhold runs python, javascript and bash (TypeScript, R and Java are not installed)")
}

// contextJSON is E2B's Context.
type contextJSON struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// defaultContext is the session of a language's default context.
func defaultContext(lang string) string { return "e2b-default-" + lang }

// newContextID is a fresh context id that names its language.
func newContextID(lang string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return lang + "-" + hex.EncodeToString(b)
}

// defaultLanguage is the language of a default context's id, or "".
func defaultLanguage(id string) string {
	l, _ := strings.CutPrefix(id, "e2b-default-")
	if _, ok := languages[l]; ok && l != id {
		return l
	}
	return ""
}

// runCodeBody is the body of POST /execute.
type runCodeBody struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// execute runs a cell and streams its output as E2B's JSON lines: stdout
// and stderr as they come, then the results, the error and the execution
// count.
func (s *Service) execute(w http.ResponseWriter, r *http.Request) {
	e := envdOf(r.Context())
	var b runCodeBody
	if err := decodeJSON(r, maxCodeBody, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	lang, session, err := s.cellContext(r, b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := &lineWriter{w: w}
	timeout := cellTimeout
	args := coderun.ExecuteArgs{On: dispatch.On{Sandbox: e.sandbox}, Language: lang, Code: b.Code, Stateful: true, SessionID: session, Timeout: &timeout,
		Output: out.output, Env: b.EnvVars}
	res, err := coderun.ToolExecute.Call(r.Context(), s.d.Dispatch, e.caller, args)
	out.flushOutput()
	if err != nil {
		if !out.started() {
			s.writeError(w, r, err)
			return
		}
		_, msg := s.statusOf(r.Context(), err)
		out.line(map[string]any{"type": "error", "name": "SandboxError", "value": msg, "traceback": ""})
		return
	}
	for _, o := range res.Outputs {
		switch o.OutputType {
		case "execute_result", "display_data":
			out.line(resultLine(o))
		case "error":
			out.line(map[string]any{"type": "error", "name": o.EName, "value": deref(o.EValue), "traceback": strings.Join(o.Traceback, "\n")})
		case "stream":
			// Streamed above as it came; a note the server added (a
			// session that lost its state) is sent here.
			if res.StateLost && o.Text != nil {
				out.line(map[string]any{"type": o.Name, "text": *o.Text})
			}
		}
	}
	out.line(map[string]any{"type": "number_of_executions", "execution_count": res.ExecutionCount})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// mimeKeys are E2B's result fields by MIME type.
var mimeKeys = map[string]string{
	"text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
	"image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
	"application/json": "json", "application/javascript": "javascript",
}

// resultLine is E2B's result message of an execute_result (the main
// result) or display_data output.
func resultLine(o coderun.Output) map[string]any {
	m := map[string]any{"type": "result", "is_main_result": o.OutputType == "execute_result"}
	for mime, v := range o.Data {
		key, ok := mimeKeys[mime]
		if !ok {
			key = mime
		}
		if key == "json" {
			if _, isString := v.(string); !isString {
				if b, err := json.Marshal(v); err == nil {
					v = string(b)
				}
			}
		}
		m[key] = v
	}
	return m
}

// cellContext is the language and session a cell runs in: its context,
// or the default context of its language.
func (s *Service) cellContext(r *http.Request, b runCodeBody) (lang, session string, err error) {
	if b.ContextID != "" && b.Language != "" {
		return "", "", fault.New(fault.Invalid, "give a context or a language, not both")
	}
	if b.ContextID == "" {
		lang, err := language(b.Language)
		return lang, defaultContext(lang), err
	}
	if err := coderun.CheckSessionID(b.ContextID); err != nil {
		return "", "", err
	}
	if l := defaultLanguage(b.ContextID); l != "" {
		return l, b.ContextID, nil
	}
	// A context must exist (code.execute would start a session under an
	// unknown id; E2B answers 404): code.sessions says, and names its
	// language.
	ctxs, err := s.contexts(r)
	if err != nil {
		return "", "", err
	}
	for _, c := range ctxs {
		if c.ID == b.ContextID {
			return c.Language, c.ID, nil
		}
	}
	return "", "", fault.New(fault.NotFound, "context "+b.ContextID+" not found")
}

// contexts are the caller's code sessions in the sandbox.
func (s *Service) contexts(r *http.Request) ([]contextJSON, error) {
	e := envdOf(r.Context())
	ss, err := coderun.ToolSessions.Call(r.Context(), s.d.Dispatch, e.caller, coderun.SandboxArgs{On: dispatch.On{Sandbox: e.sandbox}})
	if err != nil {
		return nil, err
	}
	out := make([]contextJSON, 0, len(ss))
	for _, x := range ss {
		out = append(out, contextJSON{ID: x.ID, Language: x.Language, Cwd: defaultCwd})
	}
	return out, nil
}

func (s *Service) listContexts(w http.ResponseWriter, r *http.Request) {
	ctxs, err := s.contexts(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ctxs)
}

func (s *Service) createContext(w http.ResponseWriter, r *http.Request) {
	e := envdOf(r.Context())
	var b struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := decodeJSON(r, maxControlBody, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	lang, err := language(b.Language)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cwd := b.Cwd
	if cwd == "" {
		cwd = defaultCwd
	}
	id := newContextID(lang)
	if _, err := coderun.ToolSessionCreate.Call(r.Context(), s.d.Dispatch, e.caller,
		coderun.SandboxArgs{On: dispatch.On{Sandbox: e.sandbox}, Language: lang, SessionID: id, Cwd: absPath(cwd)}); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, contextJSON{ID: id, Language: lang, Cwd: absPath(cwd)})
}

func (s *Service) removeContext(w http.ResponseWriter, r *http.Request) {
	e := envdOf(r.Context())
	id := r.PathValue("id")
	if _, err := coderun.ToolSessionDelete.Call(r.Context(), s.d.Dispatch, e.caller,
		coderun.SandboxArgs{On: dispatch.On{Sandbox: e.sandbox}, SessionID: id}); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// restartContext ends a context's interpreter and starts a fresh one under
// the same id (its state is gone): code.session.delete, then
// code.session.create.
func (s *Service) restartContext(w http.ResponseWriter, r *http.Request) {
	e := envdOf(r.Context())
	id := r.PathValue("id")
	ctxs, err := s.contexts(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lang := ""
	for _, c := range ctxs {
		if c.ID == id {
			lang = c.Language
		}
	}
	if lang == "" {
		s.writeError(w, r, fault.New(fault.NotFound, "context "+id+" not found"))
		return
	}
	if _, err := coderun.ToolSessionDelete.Call(r.Context(), s.d.Dispatch, e.caller,
		coderun.SandboxArgs{On: dispatch.On{Sandbox: e.sandbox}, SessionID: id}); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := coderun.ToolSessionCreate.Call(r.Context(), s.d.Dispatch, e.caller,
		coderun.SandboxArgs{On: dispatch.On{Sandbox: e.sandbox}, Language: lang, SessionID: id, Cwd: defaultCwd}); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decodeJSON reads a JSON body of at most limit bytes into v (an empty
// body leaves v as is).
func decodeJSON(r *http.Request, limit int64, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return fault.Wrap(fault.Invalid, err, "cannot read the request body")
	}
	if int64(len(b)) > limit {
		return fault.Errorf(fault.TooLarge, "request body over %d bytes", limit)
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fault.Wrap(fault.Invalid, err, "the body is not the JSON this call takes")
	}
	return nil
}

// lineWriter writes JSON lines, each flushed; the first one sends the
// headers.
type lineWriter struct {
	w http.ResponseWriter

	// mu guards began and orders the lines.
	mu    sync.Mutex
	began bool

	// pending is output of a stream not yet ended by a newline (output
	// and flushOutput run on the cell's goroutine only).
	pending map[string][]byte
}

// maxPendingOutput is the most of one line held back waiting for its
// newline; a longer line goes out in pieces.
const maxPendingOutput = 64 << 10

// output sends a cell's stdout or stderr line by line, as the code
// interpreter's messages are (one message per line printed), whatever
// pieces the interpreter wrote them in.
func (l *lineWriter) output(stream string, p []byte) {
	if l.pending == nil {
		l.pending = map[string][]byte{}
	}
	buf := append(l.pending[stream], p...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		l.line(map[string]any{"type": stream, "text": string(buf[:i+1])})
		buf = buf[i+1:]
	}
	if len(buf) > maxPendingOutput {
		l.line(map[string]any{"type": stream, "text": string(buf)})
		buf = nil
	}
	l.pending[stream] = slices.Clone(buf)
}

// flushOutput sends what is left of each stream (the cell ended).
func (l *lineWriter) flushOutput() {
	for _, stream := range []string{"stdout", "stderr"} {
		if len(l.pending[stream]) > 0 {
			l.line(map[string]any{"type": stream, "text": string(l.pending[stream])})
		}
	}
	l.pending = nil
}

func (l *lineWriter) started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.began
}

func (l *lineWriter) line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.began {
		l.began = true
		l.w.Header().Set("Content-Type", "application/x-ndjson")
		l.w.Header().Set("X-Content-Type-Options", "nosniff")
		l.w.WriteHeader(http.StatusOK)
	}
	_, _ = l.w.Write(append(b, '\n'))
	_ = http.NewResponseController(l.w).Flush()
}
