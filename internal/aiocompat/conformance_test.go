package aiocompat_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/sandhold/sandhold/internal/aiocompat/aiotest"
)

// aioTags are the AIO tags issue 5 and the file API implement; every
// operation under them that the router serves must be called below.
var aioTags = map[string]bool{"sandbox": true, "shell": true, "bash": true, "file": true, "code": true, "jupyter": true, "mcp": true, "auth": true,
	"skills": true, "util": true, "nodejs": true}

// step is one call of the conformance run. Path is AIO's path template;
// {name} is filled from the captured state.
type step struct {
	method, path string
	// params fill AIO's path parameters.
	params    map[string]string
	query     string
	body      any // JSON body (nil: none); a func(state) any is called
	multipart bool
	// form builds a multipart body of its own (body, content type).
	form func() ([]byte, string)
	// raw: the answer is not JSON (a download); only the status counts.
	raw bool
	// bare: the answer is JSON but not an envelope (AIO's GET /auth is a
	// map of strings); only its schema counts.
	bare bool
	want int // expected status; 0 is 200
	// fail: a tool-level failure, which AIO answers 200 with success:false
	// (errType: the FileOperationError's error_type it must carry).
	fail    bool
	errType string
	// capture copies these keys of the answer's data into the state.
	capture []string
}

type state map[string]string

// steps exercise every AIO operation sandhold implements, in an order
// where each call has what it needs (sessions before their use).
func steps() []step {
	const f = "/workspace/conformance.txt"
	return []step{
		{method: "POST", path: "/tickets"},
		{method: "GET", path: "/auth", bare: true},
		{method: "GET", path: "/v1/sandbox"},
		{method: "GET", path: "/v1/sandbox/packages/python"},
		{method: "GET", path: "/v1/sandbox/packages/nodejs"},

		{method: "POST", path: "/v1/shell/sessions/create", body: map[string]any{"id": "conf-shell"}},
		{method: "POST", path: "/v1/shell/exec", body: map[string]any{"id": "conf-shell", "command": "cd /tmp && echo hi"}},
		{method: "POST", path: "/v1/shell/exec", body: map[string]any{"id": "conf-shell", "command": "sleep 20", "async_mode": true}},
		{method: "POST", path: "/v1/shell/view", body: map[string]any{"id": "conf-shell"}},
		{method: "POST", path: "/v1/shell/wait", body: map[string]any{"id": "conf-shell", "seconds": 1}},
		{method: "POST", path: "/v1/shell/write", body: map[string]any{"id": "conf-shell", "input": "", "press_enter": false}},
		{method: "POST", path: "/v1/shell/kill", body: map[string]any{"id": "conf-shell"}},
		{method: "POST", path: "/v1/shell/sessions/update", body: map[string]any{"id": "conf-shell", "no_change_timeout": 60}},
		// An unknown session is a tool-level failure whose data is null:
		// AIO's Python SDK refused {code, request_id} there (issue 33).
		{method: "POST", path: "/v1/shell/view", body: map[string]any{"id": "no-such-shell"}, fail: true},
		{method: "POST", path: "/v1/shell/wait", body: map[string]any{"id": "no-such-shell", "seconds": 1}, fail: true},
		{method: "POST", path: "/v1/shell/write", body: map[string]any{"id": "no-such-shell", "input": "x"}, fail: true},
		{method: "POST", path: "/v1/shell/kill", body: map[string]any{"id": "no-such-shell"}, fail: true},
		{method: "GET", path: "/v1/shell/terminal-url"},
		{method: "GET", path: "/v1/shell/sessions/stats"},
		{method: "GET", path: "/v1/shell/sessions"},
		{method: "DELETE", path: "/v1/shell/sessions/{session_id}", params: map[string]string{"session_id": "conf-shell"}},
		{method: "DELETE", path: "/v1/shell/sessions"},

		{method: "POST", path: "/v1/bash/sessions/create", body: map[string]any{"session_id": "conf-bash"}, capture: []string{"session_id"}},
		{method: "POST", path: "/v1/bash/exec", body: map[string]any{"session_id": "conf-bash", "command": "echo out; echo err >&2"}},
		{method: "POST", path: "/v1/bash/exec", body: map[string]any{"session_id": "conf-bash", "command": "cat", "async_mode": true}, capture: []string{"command_id"}},
		{method: "POST", path: "/v1/bash/write", body: func(st state) any {
			return map[string]any{"session_id": "conf-bash", "command_id": st["command_id"], "input": "line\n"}
		}},
		{method: "POST", path: "/v1/bash/output", body: func(st state) any {
			return map[string]any{"session_id": "conf-bash", "command_id": st["command_id"]}
		}},
		{method: "POST", path: "/v1/bash/kill", body: map[string]any{"session_id": "conf-bash"}},
		{method: "POST", path: "/v1/bash/output", body: map[string]any{"session_id": "no-such-bash", "command_id": "x"}, fail: true},
		{method: "GET", path: "/v1/bash/sessions"},
		{method: "POST", path: "/v1/bash/sessions/{session_id}/close", params: map[string]string{"session_id": "conf-bash"}},

		{method: "POST", path: "/v1/file/write", body: map[string]any{"file": f, "content": "hello\nworld\n"}},
		{method: "POST", path: "/v1/file/read", body: map[string]any{"file": f}},
		{method: "POST", path: "/v1/file/replace", body: map[string]any{"file": f, "old_str": "world", "new_str": "there"}},
		{method: "POST", path: "/v1/file/search", body: map[string]any{"file": f, "regex": "hel+"}},
		{method: "POST", path: "/v1/file/find", body: map[string]any{"path": "/workspace", "glob": "*.txt"}},
		{method: "POST", path: "/v1/file/grep", body: map[string]any{"path": "/workspace", "pattern": "hello"}},
		{method: "POST", path: "/v1/file/glob", body: map[string]any{"path": "/workspace", "pattern": "*.txt"}},
		{method: "POST", path: "/v1/file/list", body: map[string]any{"path": "/workspace"}},
		{method: "POST", path: "/v1/file/str_replace_editor", body: map[string]any{"command": "view", "path": f}},
		// Tool-level failures: HTTP 200, success false, a FileOperationError in data.
		{method: "POST", path: "/v1/file/read", body: map[string]any{"file": "/workspace/no-such-file"}, fail: true, errType: "not_found"},
		{method: "POST", path: "/v1/file/read", body: map[string]any{"file": "/workspace/.env"}, fail: true, errType: "permission_denied"},
		{method: "POST", path: "/v1/file/search", body: map[string]any{"file": f, "regex": "("}, fail: true},
		{method: "POST", path: "/v1/file/upload", multipart: true},
		{method: "GET", path: "/v1/file/download", query: "path=" + url.QueryEscape(f), raw: true},

		{method: "GET", path: "/v1/code/info"},
		{method: "POST", path: "/v1/code/execute", body: map[string]any{"language": "python", "code": "print('hi')\n6 * 7"}},
		{method: "POST", path: "/v1/code/execute", body: map[string]any{"language": "python", "code": "1/0"}},
		{method: "POST", path: "/v1/code/execute", body: map[string]any{"language": "javascript", "code": "let q = 1; q", "stateful": true}},
		{method: "POST", path: "/v1/jupyter/sessions/create", body: map[string]any{"session_id": "conf-nb"}},
		{method: "POST", path: "/v1/jupyter/execute", body: map[string]any{"code": "import sys\nprint('x')\nsys.version_info[0]", "session_id": "conf-nb"}},
		{method: "POST", path: "/v1/jupyter/execute", body: map[string]any{"code": "raise KeyError('k')", "session_id": "conf-nb"}},
		{method: "GET", path: "/v1/jupyter/info"},
		{method: "GET", path: "/v1/jupyter/sessions"},
		{method: "DELETE", path: "/v1/jupyter/sessions/{session_id}", params: map[string]string{"session_id": "conf-nb"}},
		{method: "DELETE", path: "/v1/jupyter/sessions"},
		// A new (or deleted) id starts a session with that id (issue 14).
		{method: "POST", path: "/v1/jupyter/execute", body: map[string]any{"code": "1", "session_id": "conf-nb"}},
		{method: "DELETE", path: "/v1/jupyter/sessions/{session_id}", params: map[string]string{"session_id": "conf-nb"}},

		{method: "GET", path: "/v1/nodejs/info"},
		{method: "POST", path: "/v1/nodejs/execute", body: map[string]any{"code": "console.log('hi'); 6 * 7"}},
		{method: "POST", path: "/v1/nodejs/execute", body: map[string]any{"code": "let n = 41", "stateful": true, "session_id": "conf-node"}},
		{method: "POST", path: "/v1/nodejs/execute", body: map[string]any{"code": "n + 1", "stateful": true, "session_id": "conf-node"}},
		{method: "POST", path: "/v1/nodejs/sessions", body: map[string]any{"session_id": "conf-node2", "cwd": "/tmp", "max_idle_time": 600}},
		{method: "GET", path: "/v1/nodejs/sessions"},
		{method: "GET", path: "/v1/nodejs/sessions/{session_id}", params: map[string]string{"session_id": "conf-node2"}},
		{method: "PATCH", path: "/v1/nodejs/sessions/{session_id}", params: map[string]string{"session_id": "conf-node2"}, body: map[string]any{"max_idle_time": 120}},
		{method: "DELETE", path: "/v1/nodejs/sessions/{session_id}", params: map[string]string{"session_id": "conf-node2"}},
		{method: "DELETE", path: "/v1/nodejs/sessions/{session_id}", params: map[string]string{"session_id": "conf-node"}},
		{method: "GET", path: "/v1/nodejs/sessions/{session_id}", params: map[string]string{"session_id": "conf-node"}, fail: true},

		{method: "GET", path: "/v1/mcp/servers"},
		{method: "GET", path: "/v1/mcp/{server_name}/tools", params: map[string]string{"server_name": "sandhold"}},
		{method: "GET", path: "/v1/mcp/{server_name}/tools", params: map[string]string{"server_name": "nope"}, fail: true},
		{method: "POST", path: "/v1/mcp/{server_name}/tools/{tool_name}", params: map[string]string{"server_name": "sandhold", "tool_name": "file_list"},
			body: map[string]any{"path": "/workspace"}},
		{method: "POST", path: "/v1/mcp/{server_name}/tools/{tool_name}", params: map[string]string{"server_name": "sandhold", "tool_name": "file.read"},
			body: map[string]any{"file": "/workspace/conformance.txt"}},
		{method: "POST", path: "/v1/mcp/{server_name}/tools/{tool_name}", params: map[string]string{"server_name": "sandhold", "tool_name": "no_such_tool"},
			body: map[string]any{}, fail: true},
		// util, skills, sandbox hooks and observe (internal/convert,
		// skills, hooks, observe).
		{method: "POST", path: "/v1/file/write", body: map[string]any{"file": "/workspace/conf.html", "content": "<h1>Conf</h1><p>x</p>"}},
		{method: "POST", path: "/v1/util/convert_to_markdown", body: map[string]any{"uri": "/workspace/conf.html"}},
		{method: "POST", path: "/v1/util/convert_to_markdown", body: map[string]any{"uri": "/workspace/no-such.pdf"}, fail: true},
		{method: "POST", path: "/v1/skills/register", form: skillForm},
		{method: "GET", path: "/v1/skills/metadatas", query: "names=conf-skill"},
		{method: "GET", path: "/v1/skills/{name}/content", params: map[string]string{"name": "conf-skill"}},
		{method: "DELETE", path: "/v1/skills/{name}", params: map[string]string{"name": "conf-skill"}},
		{method: "GET", path: "/v1/skills/{name}/content", params: map[string]string{"name": "conf-skill"}, fail: true},
		{method: "DELETE", path: "/v1/skills"},
		{method: "POST", path: "/v1/sandbox/hooks", body: map[string]any{"name": "conf-hook", "command": "true", "timeout": 5}},
		{method: "GET", path: "/v1/sandbox/hooks"},
		{method: "DELETE", path: "/v1/sandbox/hooks/{name}", params: map[string]string{"name": "conf-hook"}},
		{method: "GET", path: "/v1/sandbox/observe/status"},
		{method: "POST", path: "/v1/sandbox/observe/start", body: map[string]any{"interval_seconds": 1, "include_processes": true}},
		{method: "GET", path: "/v1/sandbox/observe/live", query: "top_rows=3"},
		{method: "POST", path: "/v1/sandbox/observe/export", body: map[string]any{"reason": "conformance"}, capture: []string{"report_id"}},
		{method: "GET", path: "/v1/sandbox/observe/reports"},
		{method: "GET", path: "/v1/sandbox/observe/reports/{report_id}", raw: true},
		{method: "POST", path: "/v1/sandbox/observe/stop", body: map[string]any{}},
		{method: "DELETE", path: "/v1/sandbox/observe/reports/{report_id}"},
	}
}

// skillForm is AIO's register_skills form: a zip with one skill.
func skillForm() ([]byte, string) {
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("conf-skill/SKILL.md")
	_, _ = w.Write([]byte("---\nname: conf-skill\ndescription: conformance\n---\nDo the thing.\n"))
	_ = zw.Close()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "skills.zip")
	_, _ = fw.Write(zb.Bytes())
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// aioOps lists AIO's operations under aioTags: "METHOD path" → whether
// it documents a JSON request body.
func aioOps(t *testing.T) map[string]bool {
	t.Helper()
	p, err := aiotest.Find()
	if err != nil {
		t.Skipf("AIO reference OpenAPI document not available (%v)", err)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Tags        []string `json:"tags"`
			RequestBody struct {
				Content map[string]any `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for path, item := range doc.Paths {
		for method, op := range item {
			if len(op.Tags) > 0 && aioTags[op.Tags[0]] {
				_, jsonBody := op.RequestBody.Content["application/json"]
				ops[strings.ToUpper(method)+" "+path] = jsonBody
			}
		}
	}
	return ops
}

// TestAIOConformance calls every implemented AIO route of the real server,
// at /v1/... (the default sandbox) and at /sandboxes/{id}/v1/..., and
// validates each answer against AIO's OpenAPI schemas. Routes AIO has but
// sandhold does not serve are skipped with a logged reason; a route
// sandhold serves that no step calls fails the test.
func TestAIOConformance(t *testing.T) {
	v := aiotest.Load(t)
	ops := aioOps(t)
	s := startServer(t)

	// A second sandbox for the /sandboxes/{id} prefix.
	st, _, body := s.call("POST", "/v1/sandboxes", "application/json", []byte(`{"name":"conformance"}`))
	var created struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &created); err != nil || st != 201 || created.Data.ID == "" {
		t.Fatalf("create sandbox: %d %s", st, body)
	}

	covered := map[string]bool{}
	for _, prefix := range []struct{ url, pattern string }{{"", ""}, {"/sandboxes/" + created.Data.ID, "/sandboxes/{id}"}} {
		t.Run("prefix="+prefix.pattern, func(t *testing.T) {
			stt := state{}
			for i, sp := range steps() {
				key := sp.method + " " + sp.path
				covered[key] = true
				if _, ok := ops[key]; !ok {
					t.Errorf("step %d: AIO has no operation %s", i, key)
					continue
				}
				if !s.routes[sp.method+" "+prefix.pattern+sp.path] {
					t.Logf("skip %s: not implemented by sandhold", key)
					continue
				}
				runStep(t, s, v, prefix.url, sp, stt)
			}
			invalidBodies(t, s, v, ops, prefix)
			emptyBodies(t, s, v, ops, prefix)
		})
	}
	var missing []string
	for key := range ops {
		if s.routes[key] && !covered[key] {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	for _, key := range missing {
		t.Errorf("%s is served but the conformance test does not call it: add a step", key)
	}
}

func runStep(t *testing.T, s *server, v *aiotest.Validator, prefix string, sp step, st state) {
	t.Helper()
	path := sp.path
	for k, val := range sp.params {
		path = strings.ReplaceAll(path, "{"+k+"}", url.PathEscape(val))
	}
	for k, val := range st { // {name} from the captured state
		path = strings.ReplaceAll(path, "{"+k+"}", url.PathEscape(val))
	}
	target := prefix + path
	if sp.query != "" {
		target += "?" + sp.query
	}
	body, ctype := stepBody(sp, st)
	status, gotType, out := s.call(sp.method, target, ctype, body)
	want := sp.want
	if want == 0 {
		want = 200
	}
	if status != want {
		t.Errorf("%s %s: status %d, want %d: %s", sp.method, target, status, want, trim(out))
		return
	}
	if sp.raw {
		if strings.HasPrefix(gotType, "application/json") {
			t.Errorf("%s %s: a download answered JSON: %s", sp.method, target, trim(out))
		}
		return
	}
	if err := v.Validate(sp.method, sp.path, out); err != nil {
		t.Errorf("%s %s (status %d): %v\nbody: %s", sp.method, target, status, err, trim(out))
		return
	}
	if sp.bare {
		return
	}
	var env struct {
		Success bool            `json:"success"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(out, &env); err != nil {
		t.Errorf("%s %s: not a JSON envelope: %s", sp.method, target, trim(out))
		return
	}
	if env.Success == sp.fail {
		t.Errorf("%s %s: success=%v, want %v: %s", sp.method, target, env.Success, !sp.fail, trim(out))
		return
	}
	var data map[string]any
	_ = json.Unmarshal(env.Data, &data) // not every answer's data is an object
	if sp.errType != "" && data["error_type"] != sp.errType {
		t.Errorf("%s %s: data.error_type %v, want %s: %s", sp.method, target, data["error_type"], sp.errType, trim(out))
	}
	for _, k := range sp.capture {
		if val, ok := data[k].(string); ok {
			st[k] = val
		}
	}
}

// invalidBodies sends a JSON array (not an object) to every served AIO
// operation that takes a JSON body: AIO answers 422 with
// {"detail": [{loc, msg, type}]}, and so must sandhold.
func invalidBodies(t *testing.T, s *server, v *aiotest.Validator, ops map[string]bool, prefix struct{ url, pattern string }) {
	t.Helper()
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		method, path, _ := strings.Cut(key, " ")
		if !ops[key] || !s.routes[method+" "+prefix.pattern+path] || strings.Contains(path, "{") {
			continue
		}
		status, _, out := s.call(method, prefix.url+path, "application/json", []byte(`[]`))
		if status != 422 {
			t.Errorf("%s %s with an array body: status %d, want 422: %s", method, path, status, trim(out))
			continue
		}
		if err := validate422(v, method, path, out); err != nil {
			t.Errorf("%s %s: %v\nbody: %s", method, path, err, trim(out))
		}
	}
}

// validate422 checks a 422 body against the operation's documented 422
// schema (HTTPValidationError) and, since that schema requires nothing,
// that detail is a non-empty list of {loc, msg, type}.
func validate422(v *aiotest.Validator, method, path string, body []byte) error {
	op, err := v.Operation(method, path)
	if err != nil {
		return err
	}
	resp := op.Responses.Status(422)
	if resp == nil || resp.Value == nil {
		return fmt.Errorf("AIO documents no 422 for %s %s", method, path)
	}
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return fmt.Errorf("422 body is not JSON: %w", err)
	}
	if err := resp.Value.Content.Get("application/json").Schema.Value.VisitJSON(value, openapi3.MultiErrors(), openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("422 body does not match AIO's schema: %w", err)
	}
	var shape struct {
		Detail []map[string]any `json:"detail"`
	}
	if err := json.Unmarshal(body, &shape); err != nil || len(shape.Detail) == 0 {
		return fmt.Errorf("422 body has no detail list")
	}
	for _, d := range shape.Detail {
		if err := v.ValidateValue("ValidationError", d); err != nil {
			return fmt.Errorf("detail entry: %w", err)
		}
	}
	return nil
}

func trim(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// emptyBodies calls every served AIO operation whose JSON request schema
// has no required field with no body at all (no Content-Type either), as
// AIO's SDK does for shell.create_session() and jupyter.create_session():
// an empty body means all defaults, so the answer is never 422 or 415 and
// matches AIO's answer schema.
func emptyBodies(t *testing.T, s *server, v *aiotest.Validator, ops map[string]bool, prefix struct{ url, pattern string }) {
	t.Helper()
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	n := 0
	for _, key := range keys {
		method, path, _ := strings.Cut(key, " ")
		if !ops[key] || !s.routes[method+" "+prefix.pattern+path] || strings.Contains(path, "{") {
			continue
		}
		op, err := v.Operation(method, path)
		if err != nil || op.RequestBody == nil || op.RequestBody.Value == nil {
			continue
		}
		mt := op.RequestBody.Value.Content.Get("application/json")
		if mt == nil || mt.Schema == nil || mt.Schema.Value == nil || len(mt.Schema.Value.Required) > 0 {
			continue
		}
		n++
		status, _, out := s.call(method, prefix.url+path, "", nil)
		if status == 422 || status == 415 || status >= 500 {
			t.Errorf("%s %s with no body: status %d, want all defaults: %s", method, path, status, trim(out))
			continue
		}
		if err := v.Validate(method, path, out); err != nil {
			t.Errorf("%s %s with no body (status %d): %v\nbody: %s", method, path, status, err, trim(out))
		}
	}
	if n == 0 {
		t.Errorf("no served AIO operation has an all-optional body: the empty-body check tested nothing")
	}
	t.Logf("%d operations with all-optional bodies called with no body", n)
}

// stepBody is a step's request body and its content type; a body built
// from the state takes st's captured values.
func stepBody(sp step, st state) ([]byte, string) {
	switch {
	case sp.form != nil:
		return sp.form()
	case sp.multipart:
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("path", "/workspace/conformance-upload.txt")
		fw, _ := mw.CreateFormFile("file", "conformance-upload.txt")
		_, _ = fw.Write([]byte("uploaded\n"))
		_ = mw.Close()
		return buf.Bytes(), mw.FormDataContentType()
	}
	var v any
	switch b := sp.body.(type) {
	case nil:
		return nil, ""
	case func(state) any:
		v = b(st)
	default:
		v = b
	}
	raw, _ := json.Marshal(v)
	return raw, "application/json"
}
