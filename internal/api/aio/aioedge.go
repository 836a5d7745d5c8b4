package aio

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/workspace"
)

// The AIO edge: one table of routes (aiotable.go), one function that
// mounts a row at /v1/... (the caller's default sandbox) and at
// /sandboxes/{id}/v1/... (a given one) and documents it in /openapi.json,
// one body decoder (AIO's pydantic rules), one 422 shape and one error
// writer. access.go reads the table for the role check before the body,
// and the router-walk and conformance tests read it through the router.

// aioRoute is one row of the AIO route table.
type aioRoute struct {
	Method string
	// Path is the /v1/... form; the row is served under /sandboxes/{id}
	// too.
	Path string
	// Tool is the tool the route calls (first): access.go admits the
	// tool's roles before the body is read.
	Tool    string
	Tag     string
	Summary string
	// Group is the entry point that mounts the row (FileRoutes,
	// ShellRoutes, CodeRoutes, TransferRoutes): each is called with the
	// dependencies its rows need.
	Group string
	// Req is the JSON body (nil: none); Answer the body of a 200 (nil:
	// not JSON, Doc says what).
	Req, Answer reflect.Type
	// Required are body fields AIO requires beyond Req's required:"true"
	// tags.
	Required []string
	// Streams: the tool streams (SSE, a byte stream, a streamed body);
	// the dispatcher sees dispatch.WithStreaming.
	Streams bool
	// SSE: the answer is text/event-stream.
	SSE bool
	// RealStatus: an AIO operation whose failures keep their real
	// status (the upload and download stream a file; aiostatus.go).
	RealStatus bool
	// Native rows are sandhold's own additions under the AIO prefixes
	// (archive, extract, artifacts, the terminal WebSocket): strict
	// bodies (sandhold's decoder) and real statuses.
	Native bool
	// Fail is what a tool-level failure carries in data, and how a field
	// rule the tool checks as it runs is answered.
	Fail failShape
	// FileOp names the operation in a file row's FileOperationError.
	FileOp string
	// BodyTypes are the media types of a body that is not JSON.
	BodyTypes []string
	// MaxBody caps a JSON body below SANDBOX_MAX_BODY (0: that cap).
	MaxBody int64
	// Doc completes the operation (parameters, binary answers).
	Doc func(*huma.Operation)
	// NamedTool: the request names the tool (MCP's tool call); the route
	// admits every role and the dispatcher checks the named tool's.
	NamedTool bool

	serve func(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request)
}

// failShape is what the data of a tool-level failure (HTTP 200, success
// false) holds; every other failure is sandhold's error envelope, data
// {code, request_id, field}, the same on every route (aioEdge.fail).
type failShape int

const (
	// failNull: null — AIO's schemas allow only the result or null there
	// (its SDKs refuse anything else). A field rule the tool checks as it
	// runs (the shell's env names, bash's signals) is AIO's 422.
	failNull failShape = iota
	// failFile: AIO's FileOperationError.
	failFile
	// failNullLate: null, and a field rule the tool checks as it runs is
	// a tool-level failure too (code, jupyter, nodejs, skills, ...).
	failNullLate
)

// aioEdge serves the rows.
type aioEdge struct {
	s *api.Server
	d *dispatch.Dispatcher
	// params are the query, path and header parameters each row
	// documents (name → place), written by mountAIO before serving.
	params map[*aioRoute]map[string]string
	// codeCfg is what GET /v1/jupyter/info reports (CodeRoutes).
	codeCfg CodeConfig
}

// aioRow finds the row of method and pattern (with or without the
// /sandboxes/{id} prefix; HEAD falls back to GET).
func aioRow(method, pattern string) *aioRoute {
	p := pattern
	if rest, ok := strings.CutPrefix(pattern, api.SandboxPrefix+"/"); ok {
		p = "/" + rest
	}
	for _, m := range []string{method, http.MethodGet} {
		for i := range aioTable {
			if aioTable[i].Method == m && aioTable[i].Path == p {
				return &aioTable[i]
			}
		}
		if method != http.MethodHead {
			break
		}
	}
	return nil
}

// mountAIO mounts and documents the table's rows of group, at both
// prefixes: the one route-mounting loop of the AIO edge. The server's
// middleware reads the table from then on (api.Table).
func mountAIO(s *api.Server, d *dispatch.Dispatcher, group string) *aioEdge {
	s.UseTable(table{})
	var rows []*aioRoute
	for i := range aioTable {
		if aioTable[i].Group == group {
			rows = append(rows, &aioTable[i])
		}
	}
	return mountRows(s, d, rows)
}

// mountRows mounts and documents rows at both prefixes.
func mountRows(s *api.Server, d *dispatch.Dispatcher, rows []*aioRoute) *aioEdge {
	e := &aioEdge{s: s, d: d, params: map[*aioRoute]map[string]string{}}
	for _, rt := range rows {
		h := func(w http.ResponseWriter, r *http.Request) {
			if _, err := api.MustCaller(r.Context()); err != nil {
				e.fail(w, r, rt, "", err)
				return
			}
			if err := e.sandboxOfURL(r); err != nil {
				e.fail(w, r, rt, "", err)
				return
			}
			if rt.Streams {
				// The row's tool streams: it sees the context marked.
				r = r.WithContext(dispatch.WithStreaming(r.Context()))
			}
			rt.serve(e, rt, w, r)
		}
		for _, prefix := range []string{"", api.SandboxPrefix} {
			s.Router().Method(rt.Method, prefix+rt.Path, http.HandlerFunc(h))
			if rt.BodyTypes != nil {
				// A streamed body: its tool caps it (upload cap, quota).
				below, _, _ := strings.Cut(rt.Path, "{")
				s.AllowLargeBodies(strings.ReplaceAll(prefix, "{id}", "*") + below)
			}
			op := documentAIO(s, rt, prefix)
			if prefix == "" {
				e.params[rt] = paramPlaces(op)
			}
		}
	}
	return e
}

// sandboxOfURL refuses a row at /sandboxes/{id}/v1/... whose sandbox the
// caller cannot see — missing or another key's, the same 404 for both —
// before anything else about the request is looked at: a bad argument or
// an unknown session in a sandbox that is not there is not the tool's
// failure (AIO's 200 with success:false) but a routing one. The tool
// checks it again as it runs; this is a read of the manager's map (in a
// cluster, a dead node's hibernated sandbox is taken over first, by the
// caller's own sandbox.adopt: sandbox.Manager.Addressed).
func (e *aioEdge) sandboxOfURL(r *http.Request) error {
	id := chi.URLParam(r, "id")
	if id == "" || e.s.Sandboxes() == nil {
		return nil
	}
	c, err := api.MustCaller(r.Context())
	if err != nil {
		return err
	}
	return e.s.Sandboxes().Addressed(r.Context(), e.dispatcher(), c, id)
}

// dispatcher is the edge's dispatcher: the one its entry point was given,
// else the server's (UseDispatcher sets it before serving).
func (e *aioEdge) dispatcher() *dispatch.Dispatcher {
	if e.d != nil {
		return e.d
	}
	return e.s.Dispatcher()
}

// callerOf is the request's caller: mountAIO serves a row only to a
// request that has one (the auth middleware put it there).
func callerOf(r *http.Request) auth.Caller {
	c, _ := auth.CallerFrom(r.Context())
	return c
}

// callTool calls tool with a for the request's caller: the one call of a
// row's tool. Its arguments are validated once, by the dispatcher (Define's
// Check: the argument type's Validate), after HALT and the role and before
// the rate limit — so an invalid call that HALT or the role refuses is
// answered 409 or 403, not 422. A refusal of the arguments is AIO's 422 on
// every AIO row: fail makes it one on the rows that answer any field rule
// that way (failNull); on the others (file, code and the rows after them:
// a field rule the tool checks as it runs is a tool-level failure there)
// argsRefused tells the dispatcher's refusal from the run's
// (dispatch.ArgsRefused: the dispatcher marks its own).
func callTool[A, R any](e *aioEdge, rt *aioRoute, r *http.Request, tool dispatch.Ref[A, R], a A) (R, error) {
	res, err := tool.Call(r.Context(), e.dispatcher(), callerOf(r), a)
	if err != nil && e.argsRefused(rt, err) {
		err = e.requestError(rt, err)
	}
	return res, err
}

// argsRefused says whether err, a call's failure on a row that answers a
// tool's run-time field refusal as a tool-level failure, is the
// dispatcher's refusal of the call's arguments (their Validate, run once,
// by the dispatcher).
func (e *aioEdge) argsRefused(rt *aioRoute, err error) bool {
	if rt.Fail == failNull || rt.Native || rt.RealStatus {
		return false // fail answers the 422 already, or the row keeps 400
	}
	return dispatch.ArgsRefused(err, rt.Tool)
}

// jsonRow is a row whose body (POST, PUT, PATCH) or nothing (GET,
// DELETE) is the tool's argument A and whose answer R is the envelope's
// data. The sandbox comes from the URL, never from the body.
func jsonRow[A, R any](group, method, path string, tool dispatch.Ref[A, R], tag, summary string, opts ...rowOpt) aioRoute {
	return jsonRowAs(group, method, path, tool, tag, summary,
		func(r *http.Request, a A) (A, error) { setSandbox(&a, r); return a, nil },
		same[A, R], opts...)
}

// jsonRowAs is a row whose body In (AIO's request shape) becomes the
// tool's arguments A by args, and whose tool answer R becomes the
// envelope's data Out by answer: a row whose types do not match its
// tool's does not compile. args returning a fault.Invalid is a 422.
func jsonRowAs[In, A, R, Out any](group, method, path string, tool dispatch.Ref[A, R], tag, summary string,
	args func(*http.Request, In) (A, error), answer func(*http.Request, In, R) (Out, error), opts ...rowOpt,
) aioRoute {
	rt := aioRoute{Group: group, Method: method, Path: path, Tool: tool.Name(), Tag: tag, Summary: summary,
		Answer: reflect.TypeFor[api.Envelope[Out]]()}
	// A body only where the method has one and In has fields (a POST
	// with nothing to say, like a session's close, reads none).
	takesBody := hasBody(method) && !isEmptyStruct(reflect.TypeFor[In]())
	// In's own Validate runs here only when In is AIO's request shape, not
	// the tool's arguments (those are the dispatcher's to validate).
	validatesIn := reflect.TypeFor[In]() != reflect.TypeFor[A]()
	if takesBody {
		rt.Req = reflect.TypeFor[In]()
	}
	rt.serve = func(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
		var in In
		if takesBody {
			var err error
			if in, err = decodeRow[In](rt, r); err == nil && validatesIn && !rt.Native {
				// AIO's request shape has rules of its own (code.go);
				// the tool's arguments are the dispatcher's to validate.
				err = shapeRules(in)
			}
			if err != nil {
				e.fail(w, r, rt, "", err)
				return
			}
		}
		a, err := args(r, in)
		if err != nil {
			e.fail(w, r, rt, targetOf(a), e.requestError(rt, err))
			return
		}
		typed, err := callTool(e, rt, r, tool, a)
		if err != nil {
			e.fail(w, r, rt, targetOf(a), err)
			return
		}
		out, err := answer(r, in, typed)
		if err != nil {
			e.fail(w, r, rt, targetOf(a), err)
			return
		}
		api.WriteData(w, http.StatusOK, out)
	}
	for _, o := range opts {
		o(&rt)
	}
	return rt
}

// answer calls tool with a for the request's caller and writes its R as
// the envelope's data, or the row's failure naming target: the end of a
// plain row whose answer is its tool's own.
func answer[A, R any](e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request, tool dispatch.Ref[A, R], a A, target string) {
	res, err := callTool(e, rt, r, tool, a)
	if err != nil {
		e.fail(w, r, rt, target, err)
		return
	}
	api.WriteData(w, http.StatusOK, res)
}

// plainRow is a row served by its own handler (streams, WebSockets,
// uploads, headers of a protocol): the handler calls the row's tool by its
// Ref and fails through the edge's helpers.
func plainRow(group, method, path string, tool toolName, tag, summary string, answer reflect.Type,
	serve func(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request), opts ...rowOpt,
) aioRoute {
	rt := aioRoute{Group: group, Method: method, Path: path, Tool: tool.Name(), Tag: tag, Summary: summary, Answer: answer, serve: serve}
	for _, o := range opts {
		o(&rt)
	}
	return rt
}

// toolName is what a plain row names its tool by: its dispatch.Ref (the
// handler calls it), or namedByRequest.
type toolName interface{ Name() string }

// namedByRequest is the tool of a row whose request names the tool (MCP's
// tool call, NamedTool).
type namedByRequest struct{}

func (namedByRequest) Name() string { return "" }

// rowOpt sets a row's specifics.
type rowOpt func(*aioRoute)

func required(fields ...string) rowOpt { return func(rt *aioRoute) { rt.Required = fields } }
func fileOp(op string) rowOpt          { return func(rt *aioRoute) { rt.Fail, rt.FileOp = failFile, op } }
func lateInvalidFails() rowOpt         { return func(rt *aioRoute) { rt.Fail = failNullLate } }
func native() rowOpt                   { return func(rt *aioRoute) { rt.Native = true } }
func streams() rowOpt                  { return func(rt *aioRoute) { rt.Streams = true } }
func sse() rowOpt                      { return func(rt *aioRoute) { rt.Streams, rt.SSE = true, true } }
func realStatus() rowOpt               { return func(rt *aioRoute) { rt.RealStatus = true } }
func takes(t ...string) rowOpt         { return func(rt *aioRoute) { rt.BodyTypes = t } }
func maxBody(n int64) rowOpt           { return func(rt *aioRoute) { rt.MaxBody = n } }
func reqType[T any]() rowOpt           { return func(rt *aioRoute) { rt.Req = reflect.TypeFor[T]() } }
func doc(f func(*huma.Operation)) rowOpt {
	return func(rt *aioRoute) { rt.Doc = f }
}

func isEmptyStruct(t reflect.Type) bool { return t.Kind() == reflect.Struct && t.NumField() == 0 }

func hasBody(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// setSandbox names the route's sandbox in args, whose sandbox is its
// embedded dispatch.On (dispatch.Targeted): a body cannot choose it.
// Arguments that act in no one sandbox (no On) are left as they are;
// TestRowsNameTheirSandboxByOn holds that every row's arguments with a
// sandbox field are Targeted.
func setSandbox(args any, r *http.Request) {
	if t, ok := args.(dispatch.Targeted); ok {
		t.ActOn(chi.URLParam(r, "id"))
	}
}

// targetOf is what a file error names: the argument's file, path or
// watcher id.
func targetOf(args any) string {
	v := reflect.ValueOf(args)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return ""
	}
	for _, name := range []string{"file", "path", "watcher_id"} {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name && f.Type.Kind() == reflect.String {
				if s := v.Field(i).String(); s != "" {
					return s
				}
			}
		}
	}
	return ""
}

// decodeRow reads the request body of rt into an In: AIO's rules
// (decodeAIO), or sandhold's strict decoder on its own rows.
func decodeRow[In any](rt *aioRoute, r *http.Request) (In, error) {
	var zero In
	body := io.Reader(r.Body)
	limit := rt.MaxBody
	if limit > 0 {
		body = io.LimitReader(r.Body, limit+1)
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return zero, fault.Wrap(fault.TooLarge, err, "request body over the limit")
	}
	if limit > 0 && int64(len(raw)) > limit {
		return zero, fault.Errorf(fault.TooLarge, "request body over %d bytes", limit)
	}
	if rt.Native {
		return dispatch.DecodeArgs[In](raw, false)
	}
	return decodeAIO[In](raw, rt.Required)
}

// aioDetail is one entry of AIO's (FastAPI's) 422 body.
type aioDetail struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// aioInvalid is a request AIO's server refuses with 422.
type aioInvalid struct{ Detail []aioDetail }

func (e *aioInvalid) Error() string {
	if len(e.Detail) == 0 {
		return "invalid request"
	}
	return e.Detail[0].Msg
}

// AIOValidationError is AIO's 422 body (FastAPI's HTTPValidationError)
// with the envelope's fields beside it, so AIO clients and sandhold's
// both read it: the one 422 shape of the AIO routes.
type AIOValidationError struct {
	Detail  []aioDetail   `json:"detail"`
	Success bool          `json:"success"`
	Message string        `json:"message"`
	Data    api.ErrorData `json:"data"`
	Hint    *string       `json:"hint"`
}

// pydanticType carries the error type of a field rule (greater_than_equal,
// enum, …) inside a fault, for the 422's detail.
type pydanticType string

func (p pydanticType) Error() string { return string(p) }

// The places a request's input comes from, named as huma names them in
// its errors ("query.limit") and as the first element of FastAPI's loc
// (["query", "limit"]). A refused field is reported as "<in>.<name>".
const (
	inBody   = "body"
	inQuery  = "query"
	inPath   = "path"
	inHeader = "header"
)

// fieldError is a fault.Invalid naming the input name found in in (inBody,
// inQuery, inPath, inHeader), with pydantic's error type.
func fieldError(in, name, typ, msg string) error {
	return &fault.Error{Kind: fault.Invalid, Msg: msg, Field: in + "." + name, Err: pydanticType(typ)}
}

// fieldLoc is FastAPI's loc of a refused field: a field that names its
// place ("query.top_rows", "path.index", "header.Upload-Offset",
// "body.timeout") keeps it; a bare one ("timeout", "limits.cpu": a tool's
// Validate names its argument) is in the body.
func fieldLoc(field string) []any {
	in, rest, ok := strings.Cut(field, ".")
	switch {
	case field == "" || field == inBody:
		return []any{inBody}
	case ok && rest != "" && (in == inBody || in == inQuery || in == inPath || in == inHeader):
	default:
		in, rest = inBody, field
	}
	loc := []any{in}
	for _, p := range strings.Split(rest, ".") {
		loc = append(loc, p)
	}
	return loc
}

// placeField names a refused argument by where it came from on a row
// that reads no body: a tool names its argument as in the body ("url",
// "body.url"), but GET /v1/proxy/diagnose took it from ?url=, so the
// client hears "query.url". Rows with a body keep the tool's name.
func (e *aioEdge) placeField(rt *aioRoute, err error) error {
	if k := fault.KindOf(err); k != fault.Invalid && k != fault.Unprocessable {
		return err
	}
	f := fault.FieldOf(err)
	if f == "" || rt.Req != nil || rt.BodyTypes != nil {
		return err
	}
	if loc := fieldLoc(f); loc[0] != inBody || len(loc) != 2 {
		return err // placed already, or not one parameter
	}
	name := strings.TrimPrefix(f, inBody+".")
	if in, ok := e.params[rt][name]; ok {
		return &fault.Error{Kind: fault.KindOf(err), Msg: fault.Public(err), Field: in + "." + name, Err: err}
	}
	return err
}

// requestError is the package's requestError for a row of this edge,
// with the refused field placed first.
func (e *aioEdge) requestError(rt *aioRoute, err error) error {
	return requestError(rt, e.placeField(rt, err))
}

// requestError turns a field rule's refusal (a fault.Invalid before the
// call) into AIO's 422 on AIO's rows; sandhold's own rows keep 400.
func requestError(rt *aioRoute, err error) error {
	if rt.Native || rt.RealStatus {
		return err
	}
	var inv *aioInvalid
	if errors.As(err, &inv) {
		return err
	}
	if k := fault.KindOf(err); k != fault.Invalid && k != fault.Unprocessable {
		return err
	}
	loc := fieldLoc(fault.FieldOf(err))
	typ := "value_error"
	var pt pydanticType
	if errors.As(err, &pt) {
		typ = string(pt)
	}
	return &aioInvalid{Detail: []aioDetail{{Loc: loc, Msg: fault.Public(err), Type: typ}}}
}

// decodeAIO reads raw the way AIO's pydantic models do —
// dispatch.DecodeAIO, the decoder of the tools' lenient mode, so a type
// reads the same here as over MCP and /v1/tools/call. It does not run In's
// Validate: a tool's arguments are validated by the dispatcher, AIO's own
// request shapes by their row (jsonRowAs). Errors are *aioInvalid (AIO's
// 422).
func decodeAIO[In any](raw []byte, req []string) (In, error) {
	v, err := dispatch.DecodeAIO[In](raw, req)
	if err != nil {
		var problems dispatch.ArgErrors
		if !errors.As(err, &problems) {
			return v, requestError(&aioRoute{}, err)
		}
		inv := &aioInvalid{Detail: make([]aioDetail, 0, len(problems))}
		for _, p := range problems {
			loc := []any{"body"}
			for _, l := range p.Loc {
				loc = append(loc, l)
			}
			inv.Detail = append(inv.Detail, aioDetail{Loc: loc, Msg: p.Msg, Type: p.Type})
		}
		return v, inv
	}
	return v, nil
}

// shapeRules applies the Validate of AIO's request shape In (code.go: a
// timeout's range, a kernel's name) as AIO's 422: the edge's own rules of
// a shape the dispatcher never sees. A tool's arguments are not checked
// here: the dispatcher validates them.
func shapeRules[In any](v In) error {
	return requestError(&aioRoute{}, validateIn(v))
}

func validateIn[In any](v In) error {
	if x, ok := any(v).(dispatch.Validator); ok {
		return x.Validate()
	}
	if x, ok := any(&v).(dispatch.Validator); ok {
		return x.Validate()
	}
	return nil
}

// fail is the one error writer of the AIO rows: AIO's 422 for a request
// its schema refuses; the native envelope for an approval to wait for;
// otherwise the status of the error's kind — 200 for a tool-level failure
// on AIO's operations (aiostatus.go) — with the row's failure data.
func (e *aioEdge) fail(w http.ResponseWriter, r *http.Request, rt *aioRoute, target string, err error) {
	if rt.BodyTypes != nil && r.ProtoMajor == 1 {
		// A streamed body the call was refused before reading stays
		// unread: the connection closes after the answer, rather than
		// the server draining the rest of an upload first (net/http
		// would read up to 256 KiB of it before answering).
		w.Header().Set("Connection", "close")
	}
	err = e.placeField(rt, err)
	if rt.Fail == failNull {
		// The shell, bash and sandbox tools check some fields only as
		// they run (an env name, a signal): their refusal is AIO's 422
		// too. File and code rows answer it as a tool-level failure.
		// (err is placed already, above.)
		err = requestError(rt, err)
	}
	var inv *aioInvalid
	if errors.As(err, &inv) && !rt.Native {
		writeInvalid(w, r, inv)
		return
	}
	var ar *dispatch.ApprovalRequired
	if errors.As(err, &ar) {
		api.WriteError(w, r, err)
		return
	}
	b := api.ErrorOf(r.Context(), err)
	if rt.Fail == failFile && b.ToolLevel() {
		fe := *workspace.FileErrorOf(rt.FileOp, target, err)
		if k := fault.KindOf(err); k == fault.Internal || k == "" {
			fe.Message = "internal error (request id " + api.RequestID(r.Context()) + ")"
		}
		b.WriteAs(w, FileErrorEnvelope{Success: false, Message: b.Message, Data: &fe, Hint: b.Hint})
		return
	}
	// A tool-level failure's data is null (ErrorBody.MarshalJSON); any
	// other failure — auth, role, policy, HALT, a rate limit, a missing
	// sandbox, the server's own trouble — is sandhold's error envelope
	// with its real status, one shape on every route.
	b.WriteAs(w, b)
}

// writeInvalid writes AIO's 422.
func writeInvalid(w http.ResponseWriter, r *http.Request, inv *aioInvalid) {
	field := ""
	if len(inv.Detail) > 0 {
		var parts []string
		for _, l := range inv.Detail[0].Loc {
			parts = append(parts, fmt.Sprint(l))
		}
		field = strings.Join(parts, ".")
	}
	api.WriteJSON(w, http.StatusUnprocessableEntity, AIOValidationError{
		Detail: inv.Detail, Message: inv.Error(),
		Data: api.ErrorData{Code: string(fault.Unprocessable), RequestID: api.RequestID(r.Context()), Field: field},
	})
}

// FileErrorEnvelope is a failed file call: AIO's envelope with a
// FileOperationError as data.
type FileErrorEnvelope struct {
	Success bool                 `json:"success" example:"false"`
	Message string               `json:"message"`
	Data    *workspace.FileError `json:"data"`
	Hint    *string              `json:"hint"`
}

// documentAIO adds rt at prefix to the OpenAPI document.
func documentAIO(s *api.Server, rt *aioRoute, prefix string) *huma.Operation {
	oa := s.API().OpenAPI()
	schema := func(t reflect.Type) *huma.Schema { return oa.Components.Schemas.Schema(t, true, "") }
	id := "aio-" + strings.ToLower(rt.Method) + strings.NewReplacer("/v1/", "-", "/", "-", "{", "", "}", "", "_", "-").Replace(rt.Path)
	op := &huma.Operation{OperationID: id, Method: rt.Method, Path: prefix + rt.Path, Tags: []string{rt.Tag},
		Summary: rt.Summary, Security: api.Security, Responses: map[string]*huma.Response{},
		Description: "Acts on the caller's default sandbox; the same route under /sandboxes/{id} acts on sandbox id."}
	if prefix != "" {
		op.OperationID = id + "-in-sandbox"
		op.Parameters = append(op.Parameters, &huma.Param{Name: "id", In: "path", Required: true,
			Description: "the sandbox; /v1/... without this prefix acts on the caller's default sandbox", Schema: &huma.Schema{Type: "string"}})
	}
	for _, seg := range strings.Split(rt.Path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			op.Parameters = append(op.Parameters, &huma.Param{Name: strings.TrimSuffix(name, "}"), In: "path", Required: true, Schema: &huma.Schema{Type: "string"}})
		}
	}
	if rt.Req != nil {
		op.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {Schema: schema(rt.Req)}}}
		if !rt.Native {
			op.Responses["422"] = &huma.Response{Description: "invalid request (AIO's shape)",
				Content: map[string]*huma.MediaType{"application/json": {Schema: schema(reflect.TypeFor[AIOValidationError]())}}}
		}
	}
	if rt.Answer != nil {
		ct := "application/json"
		if rt.SSE {
			ct = "text/event-stream"
		}
		op.Responses["200"] = &huma.Response{Description: "ok", Content: map[string]*huma.MediaType{ct: {Schema: schema(rt.Answer)}}}
	}
	switch {
	case rt.Native:
		op.Responses["default"] = &huma.Response{Description: "the error envelope, with the real status",
			Content: map[string]*huma.MediaType{"application/json": {Schema: schema(reflect.TypeFor[api.ErrorBody]())}}}
	case rt.Fail == failFile:
		op.Responses["default"] = &huma.Response{Description: "a FileOperationError, HTTP 200 for a tool-level failure; any other failure is the error envelope with its real status",
			Content: map[string]*huma.MediaType{"application/json": {Schema: schema(reflect.TypeFor[FileErrorEnvelope]())}}}
	default:
		op.Responses["default"] = &huma.Response{Description: "success false: data null, HTTP 200 for a tool-level failure; any other failure is the error envelope with its real status",
			Content: map[string]*huma.MediaType{"application/json": {Schema: schema(reflect.TypeFor[api.ErrorBody]())}}}
	}
	if rt.Doc != nil {
		rt.Doc(op)
	}
	if len(op.Responses) == 0 {
		op.Responses["200"] = &huma.Response{Description: "ok"}
	}
	oa.AddOperation(op)
	return op
}

// paramPlaces maps op's query, path and header parameters to their place.
func paramPlaces(op *huma.Operation) map[string]string {
	m := map[string]string{}
	for _, p := range op.Parameters {
		if p.In == inQuery || p.In == inPath || p.In == inHeader {
			m[p.Name] = p.In
		}
	}
	return m
}
