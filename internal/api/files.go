package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/workspace"
)

// FileRoutes mounts AIO's file API (tags file and file-watch) twice: at
// /v1/file/... on the caller's default sandbox and at
// /sandboxes/{id}/v1/file/... on a given one. Handlers decode, dispatch
// and encode; a failure's data is AIO's FileOperationError with a real
// HTTP status.
func (s *Server) FileRoutes(d *dispatch.Dispatcher) {
	h := &fileHandlers{s: s, d: d}
	for _, prefix := range []string{"", "/sandboxes/{id}"} {
		r := s.router
		post := func(p string, hf http.HandlerFunc) { r.Post(prefix+"/v1/file/"+p, hf) }
		post("read", fileCall(h, workspace.ToolRead, "read",
			func(a *workspace.ReadArgs, id string) string { a.Sandbox = id; return a.File }, "file"))
		post("write", fileCall(h, workspace.ToolWrite, "write",
			func(a *workspace.WriteArgs, id string) string { a.Sandbox = id; return a.File }, "file", "content"))
		post("replace", fileCall(h, workspace.ToolReplace, "replace",
			func(a *workspace.ReplaceArgs, id string) string { a.Sandbox = id; return a.File }, "file", "old_str", "new_str"))
		post("search", fileCall(h, workspace.ToolSearch, "search",
			func(a *workspace.SearchArgs, id string) string { a.Sandbox = id; return a.File }, "file", "regex"))
		post("find", fileCall(h, workspace.ToolFind, "find",
			func(a *workspace.FindArgs, id string) string { a.Sandbox = id; return a.Path }, "path", "glob"))
		post("grep", fileCall(h, workspace.ToolGrep, "grep",
			func(a *workspace.GrepArgs, id string) string { a.Sandbox = id; return a.Path }, "path", "pattern"))
		post("glob", fileCall(h, workspace.ToolGlob, "glob",
			func(a *workspace.GlobArgs, id string) string { a.Sandbox = id; return a.Path }, "path", "pattern"))
		post("list", fileCall(h, workspace.ToolList, "list",
			func(a *workspace.ListArgs, id string) string { a.Sandbox = id; return a.Path }, "path"))
		post("str_replace_editor", fileCall(h, workspace.ToolEditor, "str_replace_editor",
			func(a *workspace.EditorArgs, id string) string { a.Sandbox = id; return a.Path }, "command", "path"))

		r.Post(prefix+"/v1/file/watch", fileCall(h, workspace.ToolWatchCreate, "watch",
			func(a *workspace.WatchCreateArgs, id string) string { a.Sandbox = id; return a.Path }, "path"))
		r.Post(prefix+"/v1/file/watch/wait", fileCall(h, workspace.ToolWatchWait, "watch_wait",
			func(a *workspace.WatchWaitArgs, id string) string { a.Sandbox = id; return a.Path }, "path"))
		r.Post(prefix+"/v1/file/watch/{watcher_id}/poll", fileCall(h, workspace.ToolWatchPoll, "watch_poll",
			func(a *workspace.WatchRef, id string) string { a.Sandbox = id; return a.WatcherID }))
		r.Get(prefix+"/v1/file/watch", h.noBody(workspace.ToolWatchList, "watch_list"))
		r.Delete(prefix+"/v1/file/watch/{watcher_id}", h.noBody(workspace.ToolWatchDelete, "watch_stop"))
		r.Get(prefix+"/v1/file/watch/{watcher_id}/events", h.events)
	}
	h.document()
}

type fileHandlers struct {
	s *Server
	d *dispatch.Dispatcher
}

// fileCall is the handler of one JSON file route: validate the body as
// AIO does (422 with FastAPI's detail list for a body that is not an
// object, lacks a required field or has a field of the wrong type), decode
// it into A, name the sandbox from the URL (set returns the path for
// errors), dispatch, encode.
func fileCall[A any](h *fileHandlers, tool, op string, set func(a *A, sandbox string) string, required ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			h.fail(w, r, op, "", fault.Wrap(fault.TooLarge, err, "request body over the limit"))
			return
		}
		if errs := validateFileBody[A](raw, required); len(errs) > 0 {
			writeCodeValidation(w, errs)
			return
		}
		a, err := workspace.Decode[A](raw)
		if err != nil {
			h.fail(w, r, op, "", err)
			return
		}
		p := set(&a, chi.URLParam(r, "id"))
		if wr, ok := any(&a).(*workspace.WatchRef); ok {
			wr.WatcherID = chi.URLParam(r, "watcher_id")
			p = wr.WatcherID
		}
		res, err := h.call(r.Context(), tool, a)
		if err != nil {
			h.fail(w, r, op, p, err)
			return
		}
		WriteData(w, http.StatusOK, res)
	}
}

// validateFileBody checks a body the way AIO's pydantic models do:
// an object, its required fields present and not null, every field of its
// type (unknown fields are ignored).
func validateFileBody[A any](raw []byte, required []string) []aioValidationError {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return []aioValidationError{{Loc: []any{"body"}, Msg: "Input should be a valid dictionary or object to extract fields from", Type: "model_attributes_type"}}
	}
	var errs []aioValidationError
	for _, f := range required {
		if v, ok := obj[f]; !ok || string(v) == "null" {
			errs = append(errs, aioValidationError{Loc: []any{"body", f}, Msg: "Field required", Type: "missing"})
		}
	}
	var a A
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(raw, &a); errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "body"
		}
		typ := pydanticType(te.Type)
		errs = append(errs, aioValidationError{Loc: []any{"body", field}, Msg: "Input should be a valid " + strings.TrimSuffix(typ, "_type"), Type: typ})
	}
	return errs
}

// pydanticType names a Go type the way pydantic's error types do.
func pydanticType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool_type"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "int_type"
	case reflect.Slice, reflect.Array:
		return "list_type"
	case reflect.Map, reflect.Struct:
		return "dict_type"
	}
	return "string_type"
}

// noBody serves the watch routes that take no body (list, stop).
func (h *fileHandlers) noBody(tool, op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := workspace.WatchRef{Sandbox: chi.URLParam(r, "id"), WatcherID: chi.URLParam(r, "watcher_id")}
		res, err := h.call(r.Context(), tool, a)
		if err != nil {
			h.fail(w, r, op, a.WatcherID, err)
			return
		}
		if list, ok := res.([]workspace.WatchInfo); ok {
			res = map[string]any{"watches": list}
		}
		WriteData(w, http.StatusOK, res)
	}
}

func (h *fileHandlers) call(ctx context.Context, tool string, args any) (any, error) {
	c, err := MustCaller(ctx)
	if err != nil {
		return nil, err
	}
	return h.d.Dispatch(ctx, c, tool, args)
}

// FileErrorEnvelope is a failed file call: AIO's envelope with a
// FileOperationError as data.
type FileErrorEnvelope struct {
	Success bool                 `json:"success" example:"false"`
	Message string               `json:"message"`
	Data    *workspace.FileError `json:"data"`
	Hint    *string              `json:"hint"`
}

// fail writes a file call's error: the status and headers of the error
// kind (Retry-After, X-RateLimit-*), AIO's FileOperationError as data.
func (h *fileHandlers) fail(w http.ResponseWriter, r *http.Request, op, p string, err error) {
	var ar *dispatch.ApprovalRequired
	if errors.As(err, &ar) {
		WriteError(w, r, err)
		return
	}
	b := errorBody(r.Context(), err)
	for k, vs := range b.headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	fe := *workspace.FileErrorOf(op, p, err)
	if fault.KindOf(err) == fault.Internal || fault.KindOf(err) == "" {
		fe.Message = "internal error (request id " + RequestID(r.Context()) + ")"
	}
	writeJSON(w, b.status, FileErrorEnvelope{Success: false, Message: b.Message, Data: &fe, Hint: b.Hint})
}

// events streams a watch's events as server-sent events, with AIO's
// names: "watch_started" first (data: the watch), one "file_change" per
// change (data: the event) with the id "{watcher_id}:{seq}" (Last-Event-ID,
// in that form or as a bare seq, resumes after it; so does ?cursor=N), a
// comment every 15 s, and "watch_stopped" when the watch ends.
func (h *fileHandlers) events(w http.ResponseWriter, r *http.Request) {
	ref := workspace.WatchRef{Sandbox: chi.URLParam(r, "id"), WatcherID: chi.URLParam(r, "watcher_id")}
	res, err := h.call(r.Context(), workspace.ToolWatchEvents, ref)
	if err != nil {
		h.fail(w, r, "watch_events", ref.WatcherID, err)
		return
	}
	watch := res.(*workspace.Watch)
	var cursor int64
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("cursor")} {
		if n, ok := parseEventID(watch.ID(), v); ok {
			cursor = n
		}
	}
	flusher, _ := w.(http.Flusher)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	info, _ := json.Marshal(watch.Info())
	// #nosec G705 -- a text/event-stream (never rendered as HTML) of a server-made id and JSON.
	if _, err := fmt.Fprintf(w, "id: %s:%d\nevent: watch_started\ndata: %s\n\n", watch.ID(), cursor, info); err != nil {
		return
	}
	if flusher != nil {
		flusher.Flush()
	}
	for {
		evs, last, _, ended := watch.Next(r.Context(), cursor, 100, 15*time.Second)
		if r.Context().Err() != nil {
			return
		}
		for _, e := range evs {
			b, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "id: %s:%d\nevent: file_change\ndata: %s\n\n", watch.ID(), e.Seq, b); err != nil {
				return
			}
		}
		if len(evs) == 0 && !ended {
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		if last > cursor {
			cursor = last
		}
		if ended {
			b, _ := json.Marshal(watch.Info())
			_, _ = fmt.Fprintf(w, "event: watch_stopped\ndata: %s\n\n", b)
			if flusher != nil {
				flusher.Flush()
			}
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// parseEventID reads an SSE resume point: "{watcher_id}:{seq}" of this
// watch, or a bare seq. Another watch's id or a negative seq is ignored.
func parseEventID(watcherID, v string) (int64, bool) {
	if wid, seq, ok := strings.Cut(v, ":"); ok {
		if wid != watcherID {
			return 0, false
		}
		v = seq
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// document adds the file routes to the OpenAPI document (they are plain
// handlers, so huma does not see them).
func (h *fileHandlers) document() {
	oa := h.s.api.OpenAPI()
	reg := oa.Components.Schemas
	errSchema := reg.Schema(reflect.TypeFor[FileErrorEnvelope](), true, "FileErrorEnvelope")
	valSchema := reg.Schema(reflect.TypeFor[AIOValidationError](), true, "AIOValidationError")
	type route struct {
		method, path, id, summary string
		in, out                   reflect.Type
		tag                       string
	}
	routes := []route{
		{http.MethodPost, "read", "file-read", "Read a text file (line range optional)", reflect.TypeFor[workspace.ReadArgs](), reflect.TypeFor[Envelope[workspace.ReadResult]](), "file"},
		{http.MethodPost, "write", "file-write", "Write a file atomically (utf-8 or base64; append; newlines)", reflect.TypeFor[workspace.WriteArgs](), reflect.TypeFor[Envelope[workspace.WriteResult]](), "file"},
		{http.MethodPost, "replace", "file-replace", "Replace every occurrence of a string", reflect.TypeFor[workspace.ReplaceArgs](), reflect.TypeFor[Envelope[workspace.ReplaceResult]](), "file"},
		{http.MethodPost, "search", "file-search", "Lines of a file matching a regex", reflect.TypeFor[workspace.SearchArgs](), reflect.TypeFor[Envelope[workspace.SearchResult]](), "file"},
		{http.MethodPost, "find", "file-find", "Find files by name pattern", reflect.TypeFor[workspace.FindArgs](), reflect.TypeFor[Envelope[workspace.FindResult]](), "file"},
		{http.MethodPost, "grep", "file-grep", "Search file contents (regex or fixed string)", reflect.TypeFor[workspace.GrepArgs](), reflect.TypeFor[Envelope[workspace.GrepResult]](), "file"},
		{http.MethodPost, "glob", "file-glob", "Glob match with metadata", reflect.TypeFor[workspace.GlobArgs](), reflect.TypeFor[Envelope[workspace.GlobResult]](), "file"},
		{http.MethodPost, "list", "file-list", "List a directory", reflect.TypeFor[workspace.ListArgs](), reflect.TypeFor[Envelope[workspace.ListResult]](), "file"},
		{http.MethodPost, "str_replace_editor", "file-str-replace-editor", "View, create and edit files (str_replace_editor)", reflect.TypeFor[workspace.EditorArgs](), reflect.TypeFor[Envelope[workspace.EditorResult]](), "file"},
		{http.MethodPost, "watch", "file-watch-create", "Watch a file or directory (polling)", reflect.TypeFor[workspace.WatchCreateArgs](), reflect.TypeFor[Envelope[workspace.WatchInfo]](), "file-watch"},
		{http.MethodGet, "watch", "file-watch-list", "List watches", nil, reflect.TypeFor[Envelope[map[string][]workspace.WatchInfo]](), "file-watch"},
		{http.MethodPost, "watch/{watcher_id}/poll", "file-watch-poll", "Events after a cursor (long poll)", reflect.TypeFor[workspace.WatchRef](), reflect.TypeFor[Envelope[workspace.PollResult]](), "file-watch"},
		{http.MethodPost, "watch/wait", "file-watch-wait", "Wait for a change to one path", reflect.TypeFor[workspace.WatchWaitArgs](), reflect.TypeFor[Envelope[workspace.WaitResult]](), "file-watch"},
		{http.MethodDelete, "watch/{watcher_id}", "file-watch-stop", "Stop a watch", nil, reflect.TypeFor[Envelope[workspace.StopResult]](), "file-watch"},
		{http.MethodGet, "watch/{watcher_id}/events", "file-watch-events", "Stream a watch's events (SSE)", nil, nil, "file-watch"},
	}
	for _, prefix := range []string{"", "/sandboxes/{id}"} {
		for _, rt := range routes {
			op := &huma.Operation{OperationID: rt.id, Method: rt.method, Path: prefix + "/v1/file/" + rt.path,
				Tags: []string{rt.tag}, Summary: rt.summary, Security: Security,
				Responses: map[string]*huma.Response{
					"default": {Description: "a FileOperationError with the status of its kind", Content: map[string]*huma.MediaType{"application/json": {Schema: errSchema}}},
				}}
			if prefix != "" {
				op.OperationID = "sandbox-" + rt.id
				op.Parameters = append(op.Parameters, &huma.Param{Name: "id", In: "path", Required: true, Schema: &huma.Schema{Type: "string"}})
			}
			if rt.path != "watch" && rt.path != "watch/wait" && len(rt.path) > 6 && rt.path[:6] == "watch/" {
				op.Parameters = append(op.Parameters, &huma.Param{Name: "watcher_id", In: "path", Required: true, Schema: &huma.Schema{Type: "string"}})
			}
			if rt.in != nil {
				op.Responses["422"] = &huma.Response{Description: "invalid body (AIO's shape)", Content: map[string]*huma.MediaType{
					"application/json": {Schema: valSchema}}}
				op.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
					"application/json": {Schema: reg.Schema(rt.in, true, "")}}}
			}
			if rt.out != nil {
				op.Responses["200"] = &huma.Response{Description: "ok", Content: map[string]*huma.MediaType{
					"application/json": {Schema: reg.Schema(rt.out, true, "")}}}
			} else {
				op.Responses["200"] = &huma.Response{Description: "server-sent events", Content: map[string]*huma.MediaType{
					"text/event-stream": {Schema: &huma.Schema{Type: "string"}}}}
			}
			oa.AddOperation(op)
		}
	}
}
