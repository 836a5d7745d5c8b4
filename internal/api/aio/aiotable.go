package aio

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/coderun"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/shell"
	"github.com/sandhold/sandhold/internal/transfer"
	"github.com/sandhold/sandhold/internal/workspace"
)

// The groups of the AIO route table: each is mounted by its entry point
// (FileRoutes, ShellRoutes, CodeRoutes, TransferRoutes) when the daemon
// has the capability behind it.
const (
	groupFile     = "file"
	groupShell    = "shell"
	groupCode     = "code"
	groupTransfer = "transfer"
)

// aioTable is THE table of AIO routes: one row per method and /v1 path,
// served at /v1/... and /sandboxes/{id}/v1/... (mountAIO), documented in
// /openapi.json from the row, role-checked before the body by the row's
// tool (access.go). Adding an AIO route = one row here + one tool
// (dispatch.Define). jsonRow: the body (or nothing) is the tool's
// argument and its answer the data; jsonRowAs: AIO's request shape In is
// turned into the tool's arguments and the answer R into AIO's Out;
// plainRow: a handler of its own (streams, WebSocket, upload protocol).
// A capability with many routes keeps its rows in a file of its own
// (aio<name>.go) and adds its slice here, one line.
var aioTable = slices.Concat(
	aioCoreRows,
	aioMCPRows,
	aioAuthRows,
	serviceRows,
	aioBrowserRows,
	aioDisplayRows,
	aioNodeRows,
	aioProxyRows,
)

// aioCoreRows are the file, shell, bash, sandbox, code, jupyter and
// transfer rows.
var aioCoreRows = []aioRoute{
	// file (AIO): failures carry a FileOperationError.
	jsonRow(groupFile, http.MethodPost, "/v1/file/read", workspace.ToolRead, "file",
		"Read a text file (line range optional)", fileOp("read"), required("file")),
	jsonRow(groupFile, http.MethodPost, "/v1/file/write", workspace.ToolWrite, "file",
		"Write a file atomically (utf-8 or base64; append; newlines)", fileOp("write"), required("file", "content")),
	jsonRow(groupFile, http.MethodPost, "/v1/file/replace", workspace.ToolReplace, "file",
		"Replace every occurrence of a string", fileOp("replace"), required("file", "old_str", "new_str")),
	jsonRow(groupFile, http.MethodPost, "/v1/file/search", workspace.ToolSearch, "file",
		"Lines of a file matching a regex", fileOp("search"), required("file", "regex")),
	jsonRow(groupFile, http.MethodPost, "/v1/file/find", workspace.ToolFind, "file",
		"Find files by name pattern", fileOp("find"), required("path", "glob")),
	jsonRow(groupFile, http.MethodPost, "/v1/file/grep", workspace.ToolGrep, "file",
		"Search file contents (regex or fixed string)", fileOp("grep"), required("path", "pattern")),
	jsonRow(groupFile, http.MethodPost, "/v1/file/glob", workspace.ToolGlob, "file",
		"Glob match with metadata", fileOp("glob"), required("path", "pattern")),
	jsonRow(groupFile, http.MethodPost, "/v1/file/list", workspace.ToolList, "file",
		"List a directory", fileOp("list"), required("path")),
	jsonRow(groupFile, http.MethodPost, "/v1/file/str_replace_editor", workspace.ToolEditor, "file",
		"View, create and edit files (str_replace_editor)", fileOp("str_replace_editor"), required("command", "path")),
	jsonRow(groupFile, http.MethodPost, "/v1/file/watch", workspace.ToolWatchCreate, "file-watch",
		"Watch a file or directory (polling)", fileOp("watch"), required("path")),
	jsonRowAs(groupFile, http.MethodGet, "/v1/file/watch", workspace.ToolWatchList, "file-watch",
		"List watches", watchRef, func(_ *http.Request, _ struct{}, l []workspace.WatchInfo) (watchList, error) {
			return watchList{Watches: l}, nil
		}, fileOp("watch_list")),
	jsonRowAs(groupFile, http.MethodPost, "/v1/file/watch/{watcher_id}/poll", workspace.ToolWatchPoll, "file-watch",
		"Events after a cursor (long poll)", func(r *http.Request, a workspace.WatchRef) (workspace.WatchRef, error) {
			a.ActOn(chi.URLParam(r, "id"))
			a.WatcherID = chi.URLParam(r, "watcher_id")
			return a, nil
		}, same[workspace.WatchRef, workspace.PollResult], fileOp("watch_poll")),
	jsonRow(groupFile, http.MethodPost, "/v1/file/watch/wait", workspace.ToolWatchWait, "file-watch",
		"Wait for a change to one path", fileOp("watch_wait"), required("path")),
	jsonRowAs(groupFile, http.MethodDelete, "/v1/file/watch/{watcher_id}", workspace.ToolWatchDelete, "file-watch",
		"Stop a watch", watchRef, same[struct{}, workspace.StopResult], fileOp("watch_stop")),
	plainRow(groupFile, http.MethodGet, "/v1/file/watch/{watcher_id}/events", workspace.ToolWatchEvents, "file-watch",
		"Stream a watch's events (SSE: watch_started, file_change with id {watcher_id}:{seq}, watch_stopped; Last-Event-ID resumes)",
		reflect.TypeFor[workspace.WatchEvent](), watchEvents, fileOp("watch_events"), sse()),

	// shell (AIO): a PTY session that keeps cwd and env.
	plainRow(groupShell, http.MethodPost, "/v1/shell/exec", shell.ToolShellExec, "shell",
		"Run a command in a PTY shell session that keeps cwd and env (SSE with Accept: text/event-stream)",
		reflect.TypeFor[api.Envelope[shell.Result]](), shellExec, reqType[shell.ShellExecArgs](), doc(func(op *huma.Operation) {
			op.Responses["200"].Content["text/event-stream"] = &huma.MediaType{Schema: &huma.Schema{Type: "string",
				Description: "with Accept: text/event-stream: output events, then a result event"}}
		})),
	jsonRow(groupShell, http.MethodPost, "/v1/shell/view", shell.ToolShellView, "shell",
		"A session's latest command and output"),
	jsonRow(groupShell, http.MethodPost, "/v1/shell/wait", shell.ToolShellWait, "shell",
		"Wait for a session's command to finish"),
	jsonRow(groupShell, http.MethodPost, "/v1/shell/write", shell.ToolShellWrite, "shell",
		"Write input to a session's terminal"),
	jsonRow(groupShell, http.MethodPost, "/v1/shell/kill", shell.ToolShellKill, "shell",
		"Stop a session's running command"),
	jsonRow(groupShell, http.MethodPost, "/v1/shell/sessions/create", shell.ToolShellCreate, "shell",
		"Start a shell session"),
	jsonRow(groupShell, http.MethodPost, "/v1/shell/sessions/update", shell.ToolShellUpdate, "shell",
		"Change a session's no_change_timeout"),
	jsonRowAs(groupShell, http.MethodGet, "/v1/shell/sessions", shell.ToolShellList, "shell",
		"Shell sessions with sandbox, owner, status and idle time (at /v1: every session the caller may see)",
		shellList, same[struct{}, shell.SessionsResult]),
	jsonRowAs(groupShell, http.MethodGet, "/v1/shell/sessions/stats", shell.ToolShellStats, "shell",
		"Shell session statistics", shellList, same[struct{}, shell.Stats]),
	jsonRowAs(groupShell, http.MethodDelete, "/v1/shell/sessions", shell.ToolShellDelAll, "shell",
		"End the caller's shell sessions in the sandbox", func(r *http.Request, _ struct{}) (shell.ListArgs, error) {
			return shell.ListArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}}, nil
		}, same[struct{}, shell.DeletedResult]),
	jsonRowAs(groupShell, http.MethodDelete, "/v1/shell/sessions/{session_id}", shell.ToolShellDelete, "shell",
		"End a shell session", func(r *http.Request, _ struct{}) (shell.ShellSessionArgs, error) {
			return shell.ShellSessionArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, ID: chi.URLParam(r, "session_id")}, nil
		}, same[struct{}, shell.Empty]),
	plainRow(groupShell, http.MethodGet, "/v1/shell/ws", shell.ToolTerminal, "shell",
		"WebSocket terminal (AIO protocol: input, resize, ping/pong; output, session_id, ready); ?session_id= reattaches, ?ticket= authenticates browsers",
		nil, terminal, native(), doc(func(op *huma.Operation) {
			op.Responses["101"] = &huma.Response{Description: "switching to the WebSocket protocol"}
		})),
	jsonRowAs(groupShell, http.MethodGet, "/v1/shell/terminal-url", shell.ToolShellCreate, "shell",
		"Start an interactive session and return the WebSocket URL of its terminal", func(r *http.Request, _ struct{}) (shell.ShellCreateArgs, error) {
			return shell.ShellCreateArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Terminal: true}, nil
		}, func(r *http.Request, _ struct{}, res shell.CreateResult) (string, error) {
			return terminalURL(r, res), nil
		}),

	// bash (AIO): one process per command, stdout and stderr by offsets.
	jsonRow(groupShell, http.MethodPost, "/v1/bash/exec", shell.ToolBashExec, "bash",
		"Run a command as its own process (separate stdout/stderr, byte offsets)"),
	jsonRow(groupShell, http.MethodPost, "/v1/bash/output", shell.ToolBashOutput, "bash",
		"Read a command's output from byte offsets, optionally long-polling"),
	jsonRow(groupShell, http.MethodPost, "/v1/bash/write", shell.ToolBashWrite, "bash",
		"Write to a running command's stdin"),
	jsonRow(groupShell, http.MethodPost, "/v1/bash/kill", shell.ToolBashKill, "bash",
		"Signal a session's current command (SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT)"),
	jsonRow(groupShell, http.MethodGet, "/v1/bash/sessions", shell.ToolBashList, "bash",
		"Bash sessions"),
	jsonRow(groupShell, http.MethodPost, "/v1/bash/sessions/create", shell.ToolBashCreate, "bash",
		"Create a bash session"),
	jsonRowAs(groupShell, http.MethodPost, "/v1/bash/sessions/{session_id}/close", shell.ToolBashClose, "bash",
		"Close a bash session and kill its commands", func(r *http.Request, _ struct{}) (shell.BashSessionArgs, error) {
			return shell.BashSessionArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, SessionID: chi.URLParam(r, "session_id")}, nil
		}, same[struct{}, shell.Empty]),

	// sandbox (AIO): the environment, gathered inside the sandbox.
	plainRow(groupShell, http.MethodGet, "/v1/sandbox", shell.ToolSandboxDetail, "sandbox",
		"The sandbox's environment: OS, user, runtimes, tools, listening ports (gathered inside it)",
		reflect.TypeFor[sandboxInfoBody](), sandboxInfo),
	jsonRowAs(groupShell, http.MethodGet, "/v1/sandbox/packages/python", shell.ToolPackages, "sandbox",
		"Installed python packages (pip list)", packages("python"), same[struct{}, json.RawMessage]),
	jsonRowAs(groupShell, http.MethodGet, "/v1/sandbox/packages/nodejs", shell.ToolPackages, "sandbox",
		"Installed global node packages (npm ls -g)", packages("nodejs"), same[struct{}, json.RawMessage]),

	// code and jupyter (AIO): failures carry data null.
	jsonRowAs(groupCode, http.MethodPost, "/v1/code/execute", coderun.ToolExecute, "code",
		"Run python, javascript or bash code, statelessly or in a session (AIO)", codeExecute, codeExecuteAnswer, lateInvalidFails()),
	jsonRowAs(groupCode, http.MethodGet, "/v1/code/info", coderun.ToolInfo, "code",
		"Supported runtimes and versions (AIO)", func(r *http.Request, _ struct{}) (coderun.SandboxArgs, error) {
			return coderun.SandboxArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}}, nil
		}, codeInfo, lateInvalidFails()),
	jsonRowAs(groupCode, http.MethodPost, "/v1/jupyter/execute", coderun.ToolExecute, "jupyter",
		"Run python in a session with Jupyter-shaped outputs (AIO)", jupyterExecute, jupyterExecuteAnswer, lateInvalidFails()),
	plainRow(groupCode, http.MethodGet, "/v1/jupyter/info", coderun.ToolSessions, "jupyter",
		"Python session service information (AIO)", reflect.TypeFor[api.Envelope[jupyterInfoData]](), jupyterInfo, lateInvalidFails()),
	jsonRowAs(groupCode, http.MethodGet, "/v1/jupyter/sessions", coderun.ToolSessions, "jupyter",
		"The caller's python sessions in the sandbox (AIO)", func(r *http.Request, _ struct{}) (coderun.SandboxArgs, error) { return pythonSessions(r), nil },
		jupyterSessions, lateInvalidFails()),
	jsonRowAs(groupCode, http.MethodDelete, "/v1/jupyter/sessions", coderun.ToolSessionDelete, "jupyter",
		"End the caller's python sessions in the sandbox (AIO)", func(r *http.Request, _ struct{}) (coderun.SandboxArgs, error) {
			a := pythonSessions(r)
			a.All = true
			return a, nil
		}, func(_ *http.Request, _ struct{}, n int) (map[string]int, error) {
			return map[string]int{"deleted": n}, nil
		}, lateInvalidFails()),
	jsonRowAs(groupCode, http.MethodDelete, "/v1/jupyter/sessions/{session_id}", coderun.ToolSessionDelete, "jupyter",
		"End one session (AIO)", jupyterDelete, func(r *http.Request, _ struct{}, _ int) (map[string]string, error) {
			return map[string]string{"session_id": chi.URLParam(r, "session_id")}, nil
		}, lateInvalidFails()),
	jsonRowAs(groupCode, http.MethodPost, "/v1/jupyter/sessions/create", coderun.ToolSessionCreate, "jupyter",
		"Start a python session (AIO)", jupyterCreate, jupyterCreateAnswer, lateInvalidFails()),

	// Streaming file routes: AIO's upload and download (real statuses:
	// they stream a file), and sandhold's own extract, archive and
	// resumable artifacts.
	plainRow(groupTransfer, http.MethodPost, "/v1/file/upload", transfer.ToolUpload, "files",
		"Upload a file, streamed (AIO); extract=true unpacks an archive", reflect.TypeFor[api.Envelope[transfer.UploadResult]](), upload,
		streams(), realStatus(), takes("multipart/form-data", "application/octet-stream"), doc(func(op *huma.Operation) {
			op.Description = "multipart/form-data with the fields path (first) and file, or a raw body with ?path=. The file streams into a temp file beside the target and is renamed into place; beyond the workspace quota: 413 and nothing left."
			op.Parameters = append(op.Parameters, api.QueryParams("path", "extract", "format")...)
			op.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"multipart/form-data": {Schema: &huma.Schema{Type: "object",
				Properties: map[string]*huma.Schema{"path": api.StringSchema, "file": api.BinarySchema}, Required: []string{"file"}}}}}
		})),
	plainRow(groupTransfer, http.MethodGet, "/v1/file/download", transfer.ToolDownload, "files",
		"Download a file, streamed, with Range (AIO)", nil, download, streams(), realStatus(), doc(downloadDoc)),
	plainRow(groupTransfer, http.MethodHead, "/v1/file/download", transfer.ToolDownload, "files",
		"A download's headers (size, ETag) without the file", nil, download, streams(), realStatus(), doc(downloadDoc)),
	jsonRow(groupTransfer, http.MethodPost, "/v1/file/extract", transfer.ToolExtract, "files",
		"Extract a zip, tar, tar.gz or tar.zst inside the sandbox, all or nothing", native(), streams(), maxBody(maxTransferJSON)),
	plainRow(groupTransfer, http.MethodGet, "/v1/file/archive", transfer.ToolArchive, "files",
		"Stream a directory out as tar.gz or zip", nil, archiveDir, native(), streams(), doc(func(op *huma.Operation) {
			op.Parameters = append(op.Parameters, api.QueryParams("path", "format")...)
			op.Responses["200"] = &huma.Response{Description: "the archive", Content: map[string]*huma.MediaType{
				"application/gzip": {Schema: api.BinarySchema}, "application/zip": {Schema: api.BinarySchema}}}
		})),
	plainRow(groupTransfer, http.MethodPost, "/v1/artifacts", transfer.ToolArtifactCreate, "files",
		"Start a resumable artifact upload (docs/artifacts.md)", reflect.TypeFor[api.Envelope[transfer.ArtifactUpload]](), artifactCreate,
		native(), streams(), maxBody(maxTransferJSON), reqType[transfer.ArtifactCreateArgs](), doc(func(op *huma.Operation) {
			op.Responses["201"] = op.Responses["200"]
			op.Responses["201"].Description = "the upload; Location names it"
			delete(op.Responses, "200")
		})),
	jsonRow(groupTransfer, http.MethodGet, "/v1/artifacts", transfer.ToolArtifactList, "files",
		"List artifacts with sizes and uploads with offsets", native(), streams()),
	plainRow(groupTransfer, http.MethodHead, "/v1/artifacts/{ref}", transfer.ToolArtifactRead, "files",
		"An upload's Upload-Offset and Upload-Length, or an artifact's size", nil, artifactHead, native(), streams(), doc(refDoc)),
	plainRow(groupTransfer, http.MethodGet, "/v1/artifacts/{ref}", transfer.ToolArtifactRead, "files",
		"An artifact's content (Range), or an upload's state", nil, artifactGet, native(), streams(), doc(func(op *huma.Operation) {
			refDoc(op)
			op.Responses["200"] = &huma.Response{Description: "content or state", Content: api.BinaryBody}
			op.Responses["206"] = &huma.Response{Description: "a range", Content: api.BinaryBody}
		})),
	plainRow(groupTransfer, http.MethodPatch, "/v1/artifacts/{ref}", transfer.ToolArtifactWrite, "files",
		"Append bytes at Upload-Offset", reflect.TypeFor[api.Envelope[transfer.ArtifactUpload]](), artifactPatch, native(), streams(),
		takes("application/offset+octet-stream", "application/octet-stream"), doc(func(op *huma.Operation) {
			refDoc(op)
			op.Parameters = append(op.Parameters, &huma.Param{Name: "Upload-Offset", In: "header", Required: true, Schema: &huma.Schema{Type: "integer"}})
			op.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/offset+octet-stream": {Schema: api.BinarySchema}}}
			op.Responses["204"] = &huma.Response{Description: "accepted; Upload-Offset is the new offset"}
			op.Responses["409"] = &huma.Response{Description: "wrong offset; Upload-Offset is the right one"}
			op.Responses["422"] = &huma.Response{Description: "SHA-256 mismatch; the upload was discarded"}
		})),
	jsonRowAs(groupTransfer, http.MethodDelete, "/v1/artifacts/{ref}", transfer.ToolArtifactDelete, "files",
		"Delete an artifact or an upload", artifactRef, same[struct{}, transfer.Deleted], native(), streams(), doc(refDoc)),
}

// same answers the tool's answer as it is.
func same[In, R any](_ *http.Request, _ In, res R) (R, error) { return res, nil }

// watchRef names the watch of the URL.
func watchRef(r *http.Request, _ struct{}) (workspace.WatchRef, error) {
	return workspace.WatchRef{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, WatcherID: chi.URLParam(r, "watcher_id")}, nil
}

// shellList: at /v1/... every session the caller may see (the monitoring
// view: an admin's or viewer's are all of them), at /sandboxes/{id}/v1/...
// that sandbox's.
func shellList(r *http.Request, _ struct{}) (shell.ListArgs, error) {
	id := chi.URLParam(r, "id")
	return shell.ListArgs{On: dispatch.On{Sandbox: id}, All: id == ""}, nil
}

func packages(lang string) func(*http.Request, struct{}) (shell.InfoArgs, error) {
	return func(r *http.Request, _ struct{}) (shell.InfoArgs, error) {
		return shell.InfoArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Language: lang}, nil
	}
}

func downloadDoc(op *huma.Operation) {
	op.Parameters = append(op.Parameters, api.QueryParams("path", "change_policy")...)
	op.Responses["200"] = &huma.Response{Description: "the file", Content: api.BinaryBody}
	op.Responses["206"] = &huma.Response{Description: "a range", Content: api.BinaryBody}
	op.Responses["409"] = &huma.Response{Description: "the file changed (change_policy=abort)"}
}

func refDoc(op *huma.Operation) {
	for _, p := range op.Parameters {
		if p.Name == "ref" {
			p.Description = "an upload id (up_…) or an artifact name"
		}
	}
}
