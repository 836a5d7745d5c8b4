package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names of the file capabilities (also their audit actions).
const (
	ToolRead        = "file.read"
	ToolWrite       = "file.write"
	ToolReplace     = "file.replace"
	ToolSearch      = "file.search"
	ToolFind        = "file.find"
	ToolGrep        = "file.grep"
	ToolGlob        = "file.glob"
	ToolList        = "file.list"
	ToolEditor      = "file.str_replace_editor"
	ToolWatchCreate = "file.watch_create"
	ToolWatchList   = "file.watch_list"
	ToolWatchPoll   = "file.watch_poll"
	ToolWatchEvents = "file.watch_events"
	ToolWatchWait   = "file.watch_wait"
	ToolWatchDelete = "file.watch_delete"
)

// Decode decodes a tool's JSON arguments into T the way AIO (pydantic)
// does: unknown fields are ignored, null means the default, and a
// malformed document is an invalid request.
func Decode[T any](raw json.RawMessage) (T, error) {
	var v T
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fault.InvalidField("body", "the request body does not match the operation's schema: "+decodeMsg(err))
	}
	return v, nil
}

func decodeMsg(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return "field " + te.Field + " must be " + te.Type.String()
	}
	return "malformed JSON"
}

func decodeTool[T any](raw json.RawMessage) (any, error) { return Decode[T](raw) }

// schemaOf is a small JSON schema of an args type for /v1/tools and MCP:
// its JSON field names, with "file"/"path" style required fields.
func schemaOf[T any](required ...string) json.RawMessage {
	t := reflect.TypeFor[T]()
	props := map[string]any{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		props[name] = map[string]any{"type": jsonType(f.Type)}
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		// "required": null is not valid JSON Schema; strict clients
		// (the TypeScript MCP SDK) reject the whole tool list for it.
		schema["required"] = required
	}
	b, _ := json.Marshal(schema)
	return b
}

func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Slice:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "string"
}

// RegisterTools adds the file capabilities to d. Reads are Safe, writes
// Medium; sudo: true raises a call to Dangerous.
func RegisterTools(d *dispatch.Dispatcher, s *Service) {
	reg := func(t dispatch.Tool) {
		t.Category = ratelimit.File
		d.MustRegister(t)
	}
	sudoRisk := func(sudo *bool) dispatch.Assessment {
		if boolOr(sudo, false) {
			return dispatch.Assessment{Risk: guard.Dangerous, Reasons: []string{"acts as root inside the sandbox"}}
		}
		return dispatch.Assessment{}
	}
	tgt := func(sandbox, p string, detail map[string]any) dispatch.Target {
		return dispatch.Target{Target: p, Sandbox: sandbox, Detail: detail}
	}

	reg(dispatch.Tool{
		Name: ToolRead, Description: "Read a text file (optionally a line range) in a sandbox", Risk: guard.Safe,
		InputSchema: schemaOf[ReadArgs]("file"), Decode: decodeTool[ReadArgs],
		Assess:   func(a any) dispatch.Assessment { return sudoRisk(a.(ReadArgs).Sudo) },
		Describe: func(a any) dispatch.Target { x := a.(ReadArgs); return tgt(x.Sandbox, x.File, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.Read(ctx, c, a.(ReadArgs))
		},
		Summarize: func(_, r any) map[string]any { return map[string]any{"bytes_read": len(r.(ReadResult).Content)} },
	})
	reg(dispatch.Tool{
		Name: ToolWrite, Description: "Write or append to a file atomically (utf-8 or base64)", Risk: guard.Medium,
		InputSchema: schemaOf[WriteArgs]("file", "content"), Decode: decodeTool[WriteArgs],
		Assess: func(a any) dispatch.Assessment { return sudoRisk(a.(WriteArgs).Sudo) },
		Describe: func(a any) dispatch.Target {
			x := a.(WriteArgs)
			return tgt(x.Sandbox, x.File, map[string]any{"encoding": strOr(x.Encoding, "utf-8"), "append": boolOr(x.Append, false)})
		},
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.Write(ctx, c, a.(WriteArgs))
		},
		Summarize: func(_, r any) map[string]any {
			n := 0
			if b := r.(WriteResult).BytesWritten; b != nil {
				n = *b
			}
			return map[string]any{"bytes_written": n}
		},
	})
	reg(dispatch.Tool{
		Name: ToolReplace, Description: "Replace every occurrence of a string in a file", Risk: guard.Medium,
		InputSchema: schemaOf[ReplaceArgs]("file", "old_str", "new_str"), Decode: decodeTool[ReplaceArgs],
		Assess:   func(a any) dispatch.Assessment { return sudoRisk(a.(ReplaceArgs).Sudo) },
		Describe: func(a any) dispatch.Target { x := a.(ReplaceArgs); return tgt(x.Sandbox, x.File, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.Replace(ctx, c, a.(ReplaceArgs))
		},
		Summarize: func(_, r any) map[string]any {
			return map[string]any{"replaced_count": r.(ReplaceResult).ReplacedCount}
		},
	})
	reg(dispatch.Tool{
		Name: ToolSearch, Description: "Lines of one file matching a regular expression", Risk: guard.Safe,
		InputSchema: schemaOf[SearchArgs]("file", "regex"), Decode: decodeTool[SearchArgs],
		Assess:   func(a any) dispatch.Assessment { return sudoRisk(a.(SearchArgs).Sudo) },
		Describe: func(a any) dispatch.Target { x := a.(SearchArgs); return tgt(x.Sandbox, x.File, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.Search(ctx, c, a.(SearchArgs))
		},
		Summarize: func(_, r any) map[string]any { return map[string]any{"matches": len(r.(SearchResult).Matches)} },
	})
	reg(dispatch.Tool{
		Name: ToolFind, Description: "Find files below a directory by name pattern", Risk: guard.Safe,
		InputSchema: schemaOf[FindArgs]("path", "glob"), Decode: decodeTool[FindArgs],
		Describe: func(a any) dispatch.Target { x := a.(FindArgs); return tgt(x.Sandbox, x.Path, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.Find(ctx, c, a.(FindArgs))
		},
		Summarize: func(_, r any) map[string]any {
			x := r.(FindResult)
			return map[string]any{"count": len(x.Files), "truncated": x.Truncated}
		},
	})
	reg(dispatch.Tool{
		Name: ToolGrep, Description: "Search file contents below a directory (regex or fixed string)", Risk: guard.Safe,
		InputSchema: schemaOf[GrepArgs]("path", "pattern"), Decode: decodeTool[GrepArgs],
		Describe: func(a any) dispatch.Target { x := a.(GrepArgs); return tgt(x.Sandbox, x.Path, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.Grep(ctx, c, a.(GrepArgs))
		},
		Summarize: func(_, r any) map[string]any {
			x := r.(GrepResult)
			return map[string]any{"match_count": x.MatchCount, "files_searched": *x.FilesSearched, "truncated": x.Truncated}
		},
	})
	reg(dispatch.Tool{
		Name: ToolGlob, Description: "Match a glob pattern (**, *, ?, [...]) below a directory", Risk: guard.Safe,
		InputSchema: schemaOf[GlobArgs]("path", "pattern"), Decode: decodeTool[GlobArgs],
		Describe: func(a any) dispatch.Target { x := a.(GlobArgs); return tgt(x.Sandbox, x.Path, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.Glob(ctx, c, a.(GlobArgs))
		},
		Summarize: func(_, r any) map[string]any {
			x := r.(GlobResult)
			return map[string]any{"count": len(x.Files), "total_count": x.TotalCount, "truncated": x.Truncated}
		},
	})
	reg(dispatch.Tool{
		Name: ToolList, Description: "List a directory, optionally recursively", Risk: guard.Safe,
		InputSchema: schemaOf[ListArgs]("path"), Decode: decodeTool[ListArgs],
		Describe: func(a any) dispatch.Target { x := a.(ListArgs); return tgt(x.Sandbox, x.Path, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.List(ctx, c, a.(ListArgs))
		},
		Summarize: func(_, r any) map[string]any {
			x := r.(ListResult)
			return map[string]any{"count": x.TotalCount, "truncated": x.Truncated}
		},
	})
	reg(dispatch.Tool{
		Name: ToolEditor, Description: "View, create and edit files (Anthropic's str_replace_editor)", Risk: guard.Medium,
		InputSchema: schemaOf[EditorArgs]("command", "path"), Decode: decodeTool[EditorArgs],
		// view only reads; every other command writes.
		Assess: func(a any) dispatch.Assessment {
			if a.(EditorArgs).Command == "view" {
				return dispatch.Assessment{Risk: guard.Safe}
			}
			return dispatch.Assessment{Risk: guard.Medium}
		},
		Describe: func(a any) dispatch.Target {
			x := a.(EditorArgs)
			return tgt(x.Sandbox, x.Path, map[string]any{"command": x.Command})
		},
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.Editor(ctx, c, a.(EditorArgs))
		},
		Summarize: func(_, r any) map[string]any {
			x := r.(EditorResult)
			out := map[string]any{"prev_exist": x.PrevExist}
			if x.NewContent != nil {
				out["bytes_written"] = len(*x.NewContent)
			}
			return out
		},
	})

	// Watches only observe: Safe, so they keep working while HALTed.
	reg(dispatch.Tool{
		Name: ToolWatchCreate, Description: "Watch a file or directory for changes", Risk: guard.Safe,
		InputSchema: schemaOf[WatchCreateArgs]("path"), Decode: decodeTool[WatchCreateArgs],
		Describe: func(a any) dispatch.Target { x := a.(WatchCreateArgs); return tgt(x.Sandbox, x.Path, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.WatchCreate(ctx, c, a.(WatchCreateArgs))
		},
		Summarize: func(_, r any) map[string]any { return map[string]any{"watcher_id": r.(WatchInfo).WatcherID} },
	})
	reg(dispatch.Tool{
		Name: ToolWatchList, Description: "List a sandbox's watches", Risk: guard.Safe,
		InputSchema: schemaOf[WatchRef](), Decode: decodeTool[WatchRef],
		Describe: func(a any) dispatch.Target { return tgt(a.(WatchRef).Sandbox, "", nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.WatchList(ctx, c, a.(WatchRef).Sandbox)
		},
	})
	reg(dispatch.Tool{
		Name: ToolWatchPoll, Description: "Events of a watch after a cursor (long poll)", Risk: guard.Safe,
		InputSchema: schemaOf[WatchRef]("watcher_id"), Decode: decodeTool[WatchRef],
		Describe: func(a any) dispatch.Target { x := a.(WatchRef); return tgt(x.Sandbox, x.WatcherID, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.WatchPoll(ctx, c, a.(WatchRef))
		},
		Summarize: func(_, r any) map[string]any { return map[string]any{"events": len(r.(PollResult).Events)} },
	})
	reg(dispatch.Tool{
		Name: ToolWatchEvents, Description: "Subscribe to a watch's events (the HTTP route streams them as SSE)", Risk: guard.Safe,
		InputSchema: schemaOf[WatchRef]("watcher_id"), Decode: decodeTool[WatchRef],
		Describe: func(a any) dispatch.Target { x := a.(WatchRef); return tgt(x.Sandbox, x.WatcherID, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			x := a.(WatchRef)
			return s.WatchGet(ctx, c, x.Sandbox, x.WatcherID)
		},
		Summarize: func(_, _ any) map[string]any { return nil },
	})
	reg(dispatch.Tool{
		Name: ToolWatchWait, Description: "Wait until a path is created, written, removed or chmodded", Risk: guard.Safe,
		InputSchema: schemaOf[WatchWaitArgs]("path"), Decode: decodeTool[WatchWaitArgs],
		Describe: func(a any) dispatch.Target { x := a.(WatchWaitArgs); return tgt(x.Sandbox, x.Path, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.WatchWait(ctx, c, a.(WatchWaitArgs))
		},
		Summarize: func(_, r any) map[string]any {
			x := r.(WaitResult)
			return map[string]any{"matched": x.Matched, "timed_out": x.TimedOut}
		},
	})
	reg(dispatch.Tool{
		Name: ToolWatchDelete, Description: "Stop a watch", Risk: guard.Safe,
		InputSchema: schemaOf[WatchRef]("watcher_id"), Decode: decodeTool[WatchRef],
		Describe: func(a any) dispatch.Target { x := a.(WatchRef); return tgt(x.Sandbox, x.WatcherID, nil) },
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.WatchDelete(ctx, c, a.(WatchRef))
		},
	})
}
