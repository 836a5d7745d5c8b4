package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/coderun"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/workspace"
)

// AIO alias names (AIO Sandbox's MCP tools).
const (
	AliasBash    = "sandbox_execute_bash"
	AliasCode    = "sandbox_execute_code"
	AliasFiles   = "sandbox_file_operations"
	AliasEditor  = "sandbox_str_replace_editor"
	AliasContext = "sandbox_get_context"
)

// sandboxHome is the sandbox's HOME and default working directory (see
// internal/sandbox: every execution starts there unless given a cwd).
const sandboxHome = "/workspace"

// aioBashTimeout is AIO's default timeout for sandbox_execute_bash, in
// seconds.
const aioBashTimeout = 30

// alias is one AIO tool translated onto dispatcher tools.
type alias struct {
	name        string
	description string
	schema      json.RawMessage
	// targets are the dispatcher tools it may call; it is listed while one
	// of them is registered and visible to the caller (none: always).
	targets []string
	// describe adds what is available now to the description.
	describe func(avail []string) string
	run      func(ctx context.Context, h *Hub, ks *keyServer, c auth.Caller, raw json.RawMessage) (any, error)
}

// aliases is the table of AIO tools. Parameter names and defaults are
// AIO's (see its MCP server: sandbox_execute_bash(cmd, cwd, timeout=30,
// new_session, preserve_symlinks), sandbox_file_operations(action, path,
// …), sandbox_str_replace_editor(command, path, …),
// sandbox_execute_code(code, language, timeout), sandbox_get_context()).
var aliases = []*alias{
	{
		name: AliasBash,
		description: "Execute a shell command (/bin/bash -c) in your default sandbox and return its status, output " +
			"(stdout then stderr), exit code and working directory. Each call is a fresh process started in cwd " +
			"(default " + sandboxHome + "); the command guard rates it and the policy decides.",
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"cmd":{"type":"string","description":"Shell command to execute"},` +
			`"cwd":{"type":"string","description":"Working directory (absolute path inside the sandbox)"},` +
			`"timeout":{"type":"integer","description":"Timeout in seconds (default 30)","default":30},` +
			`"new_session":{"type":"boolean","description":"Accepted for AIO compatibility; every call is a fresh process"},` +
			`"preserve_symlinks":{"type":"boolean","description":"Accepted for AIO compatibility; has no effect"}},` +
			`"required":["cmd"]}`),
		targets: []string{sandbox.ToolExec.Name()},
		run:     runBash,
	},
	{
		name:        AliasCode,
		description: "Execute code (python or javascript) in your default sandbox and return status, stdout, stderr and exit code.",
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"code":{"type":"string","description":"Code to execute"},` +
			`"language":{"type":"string","enum":["python","javascript"],"default":"python","description":"Programming language"},` +
			`"timeout":{"type":"integer","description":"Timeout in seconds"}},` +
			`"required":["code"]}`),
		targets: []string{coderun.ToolExecute.Name()},
		run:     runCode,
	},
	{
		name: AliasFiles,
		description: "Unified file operations in your default sandbox (paths resolve inside the sandbox; " +
			sandboxHome + " is the workspace).",
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"action":{"type":"string","enum":["read","write","replace","search","find","list","grep","glob"],"description":"Operation"},` +
			`"path":{"type":"string","description":"File or directory path"},` +
			`"content":{"type":"string","description":"Content for write; old text for replace; regex for search"},` +
			`"target":{"type":"string","description":"New text for replace"},` +
			`"pattern":{"type":"string","description":"Pattern for find, grep and glob"},` +
			`"encoding":{"type":"string","enum":["utf-8","base64","raw"],"default":"utf-8"},` +
			`"start_line":{"type":"integer"},"end_line":{"type":"integer"},` +
			`"append":{"type":"boolean"},"recursive":{"type":"boolean"},"show_hidden":{"type":"boolean"},` +
			`"file_types":{"type":"array","items":{"type":"string"}},"sudo":{"type":"boolean"},` +
			`"include":{"type":"array","items":{"type":"string"}},"exclude":{"type":"array","items":{"type":"string"}},` +
			`"case_insensitive":{"type":"boolean"},"fixed_strings":{"type":"boolean"},` +
			`"context_before":{"type":"integer"},"context_after":{"type":"integer"},"max_results":{"type":"integer"},` +
			`"include_metadata":{"type":"boolean","default":true},"files_only":{"type":"boolean","default":true}},` +
			`"required":["action","path"]}`),
		targets: fileTargets(),
		describe: func(avail []string) string {
			var acts []string
			for _, a := range fileActions {
				if slices.Contains(avail, a.tool) {
					acts = append(acts, a.action)
				}
			}
			return " Actions available: " + strings.Join(acts, ", ") + "."
		},
		run: runFiles,
	},
	{
		name: AliasEditor,
		description: "View, create and edit files in your default sandbox (Anthropic's str_replace_editor interface: " +
			"view, create, str_replace, insert, undo_edit).",
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"command":{"type":"string","enum":["view","create","str_replace","insert","undo_edit"]},` +
			`"path":{"type":"string"},"file_text":{"type":"string"},"old_str":{"type":"string"},"new_str":{"type":"string"},` +
			`"insert_line":{"type":"integer"},"view_range":{"type":"array","items":{"type":"integer"}},` +
			`"replace_mode":{"type":"string","enum":["ALL","FIRST","LAST"]}},` +
			`"required":["command","path"]}`),
		targets: []string{workspace.ToolEditor.Name()},
		run:     runEditor,
	},
	{
		name: AliasContext,
		description: "Describe your environment: the server, your default sandbox (if created), its home and workspace " +
			"directories, and the tools available to you.",
		schema: json.RawMessage(`{"type":"object","properties":{}}`),
		run:    runContext,
	},
}

// aliasNames are the reserved MCP names.
func aliasNames() []string {
	out := make([]string, len(aliases))
	for i, a := range aliases {
		out[i] = a.name
	}
	return out
}

// aliasEntry lists a for c when one of its targets is registered and
// visible to c.
func (h *Hub) aliasEntry(c auth.Caller, a *alias, reg registry) (entry, bool) {
	var avail []string
	for _, n := range a.targets {
		if t := reg.byName[n]; t != nil && h.visible(c, t) {
			avail = append(avail, n)
		}
	}
	if len(a.targets) > 0 && len(avail) == 0 {
		return entry{}, false
	}
	desc := a.description
	if a.describe != nil {
		desc += a.describe(avail)
	}
	tool := &sdk.Tool{Name: a.name, Description: desc, InputSchema: a.schema,
		Meta: sdk.Meta{"sandhold/alias_of": avail}}
	return entry{
		tool: tool,
		sig:  "alias\x00" + a.name + "\x00" + desc + "\x00" + strings.Join(avail, ","),
		handler: func(ks *keyServer) sdk.ToolHandler {
			return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				c, err := h.callerOf(ctx, ks)
				if err != nil {
					return errorResult(fault.Public(err)), nil
				}
				return toResult(a.run(sandbox.WithScope(ctx, ks.scope), h, ks, c, args(req))), nil
			}
		},
	}, true
}

// decodeArgs decodes alias arguments strictly (dispatch.DecodeArgs): an
// unknown parameter is an error the model can correct, not silently
// dropped.
func decodeArgs[T any](raw json.RawMessage, v *T) error {
	a, err := dispatch.DecodeArgs[T](raw, false)
	if err != nil {
		return err
	}
	*v = a
	return nil
}

// bashArgs are sandbox_execute_bash's parameters.
type bashArgs struct {
	Cmd              string `json:"cmd"`
	Cwd              string `json:"cwd"`
	Timeout          *int   `json:"timeout"`
	NewSession       bool   `json:"new_session"`
	PreserveSymlinks bool   `json:"preserve_symlinks"`
}

// runBash is sandbox_execute_bash → exec.run on the default sandbox.
func runBash(ctx context.Context, h *Hub, _ *keyServer, c auth.Caller, raw json.RawMessage) (any, error) {
	var a bashArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Cmd) == "" {
		return nil, fault.InvalidField("cmd", "cmd is required")
	}
	timeout := aioBashTimeout
	if a.Timeout != nil {
		timeout = *a.Timeout
	}
	if timeout <= 0 {
		return nil, fault.InvalidField("timeout", "timeout must be a positive number of seconds")
	}
	req := map[string]any{"command": a.Cmd, "timeout": timeout}
	if a.Cwd != "" {
		req["cwd"] = a.Cwd
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	out, err := sandbox.ToolExec.CallJSON(ctx, h.d, c, b)
	if err != nil {
		return nil, err
	}
	cwd := a.Cwd
	if cwd == "" {
		cwd = sandboxHome
	}
	res := map[string]any{"status": out.Status, "output": out.Stdout + out.Stderr, "exit_code": out.ExitCode, "cwd": cwd}
	if out.Truncated {
		res["truncated"] = true
	}
	if out.Reason != "" {
		res["reason"] = out.Reason
	}
	return res, nil
}

// param is one AIO parameter translated to the target tool: its value
// goes to the first of keys the target's schema declares.
type param struct {
	aio  string
	keys []string
	// def is AIO's default as JSON: a value equal to it (or null) is left
	// out when the target has no place for it; any other value is an error,
	// never dropped (dropping "append" would overwrite a file).
	def string
}

// fitArgs builds the target's arguments from the AIO arguments given.
// given maps AIO parameter names to their JSON values.
func fitArgs(t *dispatch.Tool, given map[string]json.RawMessage, params []param) (json.RawMessage, error) {
	props := schemaProps(t.InputSchema)
	out := make(map[string]json.RawMessage, len(params))
	for _, p := range params {
		v, ok := given[p.aio]
		if !ok || string(v) == "null" {
			continue
		}
		key := ""
		for _, k := range p.keys {
			if props == nil || props[k] {
				key = k
				break
			}
		}
		if key == "" {
			if p.def != "" && jsonEqual(v, json.RawMessage(p.def)) {
				continue
			}
			return nil, fault.InvalidField(p.aio, fmt.Sprintf("parameter %s is not supported by this server's %s", p.aio, t.Name))
		}
		out[key] = v
	}
	return json.Marshal(out)
}

// schemaProps lists a JSON schema's top-level properties (nil: the schema
// does not say, so any key goes).
func schemaProps(s json.RawMessage) map[string]bool {
	var sch struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(s) == 0 || json.Unmarshal(s, &sch) != nil || sch.Properties == nil {
		return nil
	}
	out := make(map[string]bool, len(sch.Properties))
	for k := range sch.Properties {
		out[k] = true
	}
	return out
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// given decodes AIO arguments into a name → value map, refusing names the
// alias does not have.
func given(raw json.RawMessage, allowed []string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fault.InvalidField("arguments", "arguments must be a JSON object")
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			return nil, fault.InvalidField(k, fmt.Sprintf("unknown parameter %q", k))
		}
	}
	return m, nil
}

func stringArg(m map[string]json.RawMessage, name string) string {
	var s string
	_ = json.Unmarshal(m[name], &s)
	return s
}

// codeParams translate sandbox_execute_code.
var codeParams = []param{
	{aio: "code", keys: []string{"code"}},
	{aio: "language", keys: []string{"language"}},
	{aio: "timeout", keys: []string{"timeout"}},
}

// runCode is sandbox_execute_code → the code tool.
func runCode(ctx context.Context, h *Hub, _ *keyServer, c auth.Caller, raw json.RawMessage) (any, error) {
	m, err := given(raw, []string{"code", "language", "timeout"})
	if err != nil {
		return nil, err
	}
	if stringArg(m, "code") == "" {
		return nil, fault.InvalidField("code", "code is required")
	}
	if _, ok := m["language"]; !ok {
		m["language"] = json.RawMessage(`"python"`) // AIO's default
	}
	t, ok := h.d.Tool(coderun.ToolExecute.Name())
	if !ok {
		return nil, fault.New(fault.NotFound, "code execution is not available on this server")
	}
	b, err := fitArgs(t, m, codeParams)
	if err != nil {
		return nil, err
	}
	return coderun.ToolExecute.CallJSON(ctx, h.d, c, b)
}

// fileAction is one sandbox_file_operations action: the file tool it
// calls (a dispatch.Ref's name) and how its parameters translate (AIO's
// HTTP file API names first: file, old_str, regex, glob …).
type fileAction struct {
	action string
	tool   string
	params []param
}

var (
	pFile = param{aio: "path", keys: []string{"file", "path"}}
	pPath = param{aio: "path", keys: []string{"path", "file"}}
	pSudo = param{aio: "sudo", keys: []string{"sudo"}, def: "false"}
)

func pBool(aio string, def string, keys ...string) param {
	if len(keys) == 0 {
		keys = []string{aio}
	}
	return param{aio: aio, keys: keys, def: def}
}

// fileActions is AIO's action table.
var fileActions = []fileAction{
	{action: "read", tool: workspace.ToolRead.Name(), params: []param{pFile,
		{aio: "start_line", keys: []string{"start_line"}}, {aio: "end_line", keys: []string{"end_line"}}, pSudo}},
	{action: "write", tool: workspace.ToolWrite.Name(), params: []param{pFile,
		{aio: "content", keys: []string{"content"}}, {aio: "encoding", keys: []string{"encoding"}, def: `"utf-8"`},
		pBool("append", "false"), pSudo}},
	{action: "replace", tool: workspace.ToolReplace.Name(), params: []param{pFile,
		{aio: "content", keys: []string{"old_str"}}, {aio: "target", keys: []string{"new_str"}}, pSudo}},
	{action: "search", tool: workspace.ToolSearch.Name(), params: []param{pFile,
		{aio: "content", keys: []string{"regex", "pattern"}}, pSudo}},
	{action: "find", tool: workspace.ToolFind.Name(), params: []param{pPath,
		{aio: "pattern", keys: []string{"glob", "pattern"}}}},
	{action: "list", tool: workspace.ToolList.Name(), params: []param{pPath,
		pBool("recursive", "false"), pBool("show_hidden", "false"), {aio: "file_types", keys: []string{"file_types"}}}},
	{action: "grep", tool: workspace.ToolGrep.Name(), params: []param{pPath,
		{aio: "pattern", keys: []string{"pattern"}}, {aio: "include", keys: []string{"include"}},
		{aio: "exclude", keys: []string{"exclude"}}, pBool("case_insensitive", "false"), pBool("fixed_strings", "false"),
		{aio: "context_before", keys: []string{"context_before"}, def: "0"},
		{aio: "context_after", keys: []string{"context_after"}, def: "0"},
		{aio: "max_results", keys: []string{"max_results"}}, pBool("recursive", "false")}},
	{action: "glob", tool: workspace.ToolGlob.Name(), params: []param{pPath,
		{aio: "pattern", keys: []string{"pattern", "glob"}}, {aio: "exclude", keys: []string{"exclude"}},
		pBool("show_hidden", "false", "include_hidden", "show_hidden"), pBool("files_only", "true"),
		pBool("include_metadata", "true"), {aio: "max_results", keys: []string{"max_results"}}}},
}

func fileTargets() []string {
	var out []string
	for _, a := range fileActions {
		out = append(out, a.tool)
	}
	return out
}

// fileParamNames are sandbox_file_operations' parameters.
var fileParamNames = []string{"action", "path", "content", "target", "pattern", "encoding", "start_line", "end_line",
	"append", "recursive", "show_hidden", "file_types", "sudo", "include", "exclude", "case_insensitive",
	"fixed_strings", "context_before", "context_after", "max_results", "include_metadata", "files_only"}

// runFiles is sandbox_file_operations → the file.* tool of its action.
func runFiles(ctx context.Context, h *Hub, _ *keyServer, c auth.Caller, raw json.RawMessage) (any, error) {
	m, err := given(raw, fileParamNames)
	if err != nil {
		return nil, err
	}
	action := stringArg(m, "action")
	i := slices.IndexFunc(fileActions, func(a fileAction) bool { return a.action == action })
	if i < 0 {
		return nil, fault.InvalidField("action", fmt.Sprintf("unsupported action %q (want read, write, replace, search, find, list, grep or glob)", action))
	}
	act := fileActions[i]
	if stringArg(m, "path") == "" {
		return nil, fault.InvalidField("path", "path is required")
	}
	// The parameters this action does not use must not be set to anything
	// but AIO's default: a misplaced parameter is a mistake to report.
	for k, v := range m {
		if k == "action" || slices.ContainsFunc(act.params, func(p param) bool { return p.aio == k }) {
			continue
		}
		if string(v) != "null" && !isDefault(k, v) {
			return nil, fault.InvalidField(k, fmt.Sprintf("parameter %s is not used by action %s", k, action))
		}
	}
	t, ok := h.d.Tool(act.tool)
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "file action %s is not available on this server", action)
	}
	b, err := fitArgs(t, m, act.params)
	if err != nil {
		return nil, err
	}
	return h.d.Call(ctx, c, t.Name, b)
}

// aioDefaults are sandbox_file_operations' non-zero defaults.
var aioDefaults = map[string]string{"encoding": `"utf-8"`, "include_metadata": "true", "files_only": "true"}

// isDefault reports whether v is AIO's default for parameter k (zero
// values, or the listed defaults).
func isDefault(k string, v json.RawMessage) bool {
	if d, ok := aioDefaults[k]; ok {
		return jsonEqual(v, json.RawMessage(d))
	}
	for _, z := range []string{"false", "0", `""`, "[]"} {
		if jsonEqual(v, json.RawMessage(z)) {
			return true
		}
	}
	return false
}

// editorParams translate sandbox_str_replace_editor (same names).
var editorParams = []param{
	{aio: "command", keys: []string{"command"}}, {aio: "path", keys: []string{"path", "file"}},
	{aio: "file_text", keys: []string{"file_text"}}, {aio: "old_str", keys: []string{"old_str"}},
	{aio: "new_str", keys: []string{"new_str"}}, {aio: "insert_line", keys: []string{"insert_line"}},
	{aio: "view_range", keys: []string{"view_range"}, def: "[]"}, {aio: "replace_mode", keys: []string{"replace_mode"}},
}

// runEditor is sandbox_str_replace_editor → the file editor tool.
func runEditor(ctx context.Context, h *Hub, _ *keyServer, c auth.Caller, raw json.RawMessage) (any, error) {
	names := make([]string, len(editorParams))
	for i, p := range editorParams {
		names[i] = p.aio
	}
	m, err := given(raw, names)
	if err != nil {
		return nil, err
	}
	if stringArg(m, "command") == "" || stringArg(m, "path") == "" {
		return nil, fault.InvalidField("command", "command and path are required")
	}
	t, ok := h.d.Tool(workspace.ToolEditor.Name())
	if !ok {
		return nil, fault.New(fault.NotFound, "the file editor is not available on this server")
	}
	b, err := fitArgs(t, m, editorParams)
	if err != nil {
		return nil, err
	}
	return workspace.ToolEditor.CallJSON(ctx, h.d, c, b)
}

// contextReport is sandbox_get_context's answer.
type contextReport struct {
	Server    string        `json:"server"`
	Version   string        `json:"version"`
	Role      string        `json:"role"`
	HomeDir   string        `json:"home_dir"`
	Workspace string        `json:"workspace"`
	Sandbox   *sandbox.Info `json:"sandbox"`
	Note      string        `json:"note,omitempty"`
	Tools     []string      `json:"tools"`
}

// runContext reports the caller's environment. The default sandbox is
// read through the dispatcher (sandbox.list), never created here.
func runContext(ctx context.Context, h *Hub, ks *keyServer, c auth.Caller, raw json.RawMessage) (any, error) {
	if _, err := given(raw, nil); err != nil {
		return nil, err
	}
	rep := contextReport{Server: "sandhold", Version: h.version, Role: string(c.Role), HomeDir: sandboxHome, Workspace: sandboxHome}
	if t, ok := h.d.Tool(sandbox.ToolList.Name()); ok && h.visible(c, t) {
		list, err := sandbox.ToolList.Call(ctx, h.d, c, sandbox.NoArgs{})
		if err != nil {
			return nil, err
		}
		for i, s := range list {
			// At /sandboxes/{id}/mcp the calls act on that sandbox.
			if (ks.scope == "" && s.Default && s.Owner == c.KeyID) || (ks.scope != "" && s.ID == ks.scope) {
				rep.Sandbox = &list[i]
				break
			}
		}
	}
	if rep.Sandbox == nil {
		rep.Note = "your default sandbox does not exist yet; the first command or file call creates it"
	}
	h.syncMu.Lock()
	for name := range ks.tools {
		rep.Tools = append(rep.Tools, name)
	}
	h.syncMu.Unlock()
	sort.Strings(rep.Tools)
	return rep, nil
}
