package workspace

import (
	"context"
	"path"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names of the file capabilities (also their audit actions).
var (
	ToolRead        = dispatch.Ref[ReadArgs, ReadResult]("file.read")
	ToolWrite       = dispatch.Ref[WriteArgs, WriteResult]("file.write")
	ToolReplace     = dispatch.Ref[ReplaceArgs, ReplaceResult]("file.replace")
	ToolSearch      = dispatch.Ref[SearchArgs, SearchResult]("file.search")
	ToolFind        = dispatch.Ref[FindArgs, FindResult]("file.find")
	ToolGrep        = dispatch.Ref[GrepArgs, GrepResult]("file.grep")
	ToolGlob        = dispatch.Ref[GlobArgs, GlobResult]("file.glob")
	ToolList        = dispatch.Ref[ListArgs, ListResult]("file.list")
	ToolEditor      = dispatch.Ref[EditorArgs, EditorResult]("file.str_replace_editor")
	ToolWatchCreate = dispatch.Ref[WatchCreateArgs, WatchInfo]("file.watch_create")
	ToolWatchList   = dispatch.Ref[WatchRef, []WatchInfo]("file.watch_list")
	ToolWatchPoll   = dispatch.Ref[WatchRef, PollResult]("file.watch_poll")
	ToolWatchEvents = dispatch.Ref[WatchRef, *Watch]("file.watch_events")
	ToolWatchWait   = dispatch.Ref[WatchWaitArgs, WaitResult]("file.watch_wait")
	ToolWatchDelete = dispatch.Ref[WatchRef, StopResult]("file.watch_delete")
)

// Tools are the file capabilities, for the dispatcher. Reads are Safe,
// writes Medium; sudo: true raises a call to Dangerous. Arguments are read
// the AIO way (Lenient): the AIO routes and MCP pass the same shapes.
func Tools(s *Service) []dispatch.Tool {
	spec := func(desc string, risk guard.Risk) dispatch.Spec {
		return dispatch.Spec{Description: desc, Risk: risk, Category: ratelimit.File, Lenient: true}
	}
	// observe is the Spec of a read that only names paths: its Assess
	// adds them for the policy and never raises its tier.
	observe := func(desc string) dispatch.Spec {
		sp := spec(desc, guard.Safe)
		sp.RiskCeiling = guard.Safe
		return sp
	}
	tgt := func(sandbox, p string, detail map[string]any) dispatch.Target {
		return dispatch.Target{Target: p, Sandbox: sandbox, Detail: detail}
	}
	return []dispatch.Tool{
		dispatch.Define(ToolRead, spec("Read a text file (optionally a line range) in a sandbox", guard.Safe), s.Read,
			dispatch.Hooks[ReadArgs, ReadResult]{
				Assess:    func(a ReadArgs) dispatch.Assessment { return touches(sudoRisk(a.Sudo), a.File) },
				Describe:  func(a ReadArgs) dispatch.Target { return tgt(a.Sandbox, a.File, nil) },
				Summarize: func(_ ReadArgs, r ReadResult) map[string]any { return map[string]any{"bytes_read": len(r.Content)} },
			}),
		dispatch.Define(ToolWrite, spec("Write or append to a file atomically (utf-8 or base64)", guard.Medium), s.Write,
			dispatch.Hooks[WriteArgs, WriteResult]{
				Assess: func(a WriteArgs) dispatch.Assessment { return touches(sudoRisk(a.Sudo), a.File) },
				Describe: func(a WriteArgs) dispatch.Target {
					return tgt(a.Sandbox, a.File, map[string]any{"encoding": strOr(a.Encoding, "utf-8"), "append": boolOr(a.Append, false)})
				},
				Summarize: func(_ WriteArgs, r WriteResult) map[string]any {
					n := 0
					if r.BytesWritten != nil {
						n = *r.BytesWritten
					}
					return map[string]any{"bytes_written": n}
				},
			}),
		dispatch.Define(ToolReplace, spec("Replace every occurrence of a string in a file", guard.Medium), s.Replace,
			dispatch.Hooks[ReplaceArgs, ReplaceResult]{
				Assess:   func(a ReplaceArgs) dispatch.Assessment { return touches(sudoRisk(a.Sudo), a.File) },
				Describe: func(a ReplaceArgs) dispatch.Target { return tgt(a.Sandbox, a.File, nil) },
				Summarize: func(_ ReplaceArgs, r ReplaceResult) map[string]any {
					return map[string]any{"replaced_count": r.ReplacedCount}
				},
			}),
		dispatch.Define(ToolSearch, spec("Lines of one file matching a regular expression", guard.Safe), s.Search,
			dispatch.Hooks[SearchArgs, SearchResult]{
				Assess:    func(a SearchArgs) dispatch.Assessment { return touches(sudoRisk(a.Sudo), a.File) },
				Describe:  func(a SearchArgs) dispatch.Target { return tgt(a.Sandbox, a.File, nil) },
				Summarize: func(_ SearchArgs, r SearchResult) map[string]any { return map[string]any{"matches": len(r.Matches)} },
			}),
		dispatch.Define(ToolFind, observe("Find files below a directory by name pattern"), s.Find,
			dispatch.Hooks[FindArgs, FindResult]{
				Assess:   func(a FindArgs) dispatch.Assessment { return walks(true, a.Path) },
				Describe: func(a FindArgs) dispatch.Target { return tgt(a.Sandbox, a.Path, nil) },
				Summarize: func(_ FindArgs, r FindResult) map[string]any {
					return map[string]any{"count": len(r.Files), "truncated": r.Truncated}
				},
			}),
		dispatch.Define(ToolGrep, observe("Search file contents below a directory (regex or fixed string)"), s.Grep,
			dispatch.Hooks[GrepArgs, GrepResult]{
				Assess:   func(a GrepArgs) dispatch.Assessment { return walks(true, a.Path) },
				Describe: func(a GrepArgs) dispatch.Target { return tgt(a.Sandbox, a.Path, nil) },
				Summarize: func(_ GrepArgs, r GrepResult) map[string]any {
					searched := 0
					if r.FilesSearched != nil {
						searched = *r.FilesSearched
					}
					return map[string]any{"match_count": r.MatchCount, "files_searched": searched, "truncated": r.Truncated}
				},
			}),
		dispatch.Define(ToolGlob, observe("Match a glob pattern (**, *, ?, [...]) below a directory"), s.Glob,
			dispatch.Hooks[GlobArgs, GlobResult]{
				Assess:   func(a GlobArgs) dispatch.Assessment { return walks(true, a.Path) },
				Describe: func(a GlobArgs) dispatch.Target { return tgt(a.Sandbox, a.Path, nil) },
				Summarize: func(_ GlobArgs, r GlobResult) map[string]any {
					return map[string]any{"count": len(r.Files), "total_count": r.TotalCount, "truncated": r.Truncated}
				},
			}),
		dispatch.Define(ToolList, observe("List a directory, optionally recursively"), s.List,
			dispatch.Hooks[ListArgs, ListResult]{
				Assess:   func(a ListArgs) dispatch.Assessment { return walks(boolOr(a.Recursive, false), a.Path) },
				Describe: func(a ListArgs) dispatch.Target { return tgt(a.Sandbox, a.Path, nil) },
				Summarize: func(_ ListArgs, r ListResult) map[string]any {
					return map[string]any{"count": r.TotalCount, "truncated": r.Truncated}
				},
			}),
		dispatch.Define(ToolEditor, spec("View, create and edit files (Anthropic's str_replace_editor)", guard.Medium), s.Editor,
			dispatch.Hooks[EditorArgs, EditorResult]{
				// view only reads; every other command writes.
				Assess: func(a EditorArgs) dispatch.Assessment {
					if a.Command == "view" {
						return touches(dispatch.Assessment{Risk: guard.Safe}, a.Path)
					}
					return touches(dispatch.Assessment{Risk: guard.Medium}, a.Path)
				},
				Describe: func(a EditorArgs) dispatch.Target {
					return tgt(a.Sandbox, a.Path, map[string]any{"command": a.Command})
				},
				Summarize: func(_ EditorArgs, r EditorResult) map[string]any {
					out := map[string]any{"prev_exist": r.PrevExist}
					if r.NewContent != nil {
						out["bytes_written"] = len(*r.NewContent)
					}
					return out
				},
			}),

		// Watches only observe: Safe, so they keep working while HALTed.
		dispatch.Define(ToolWatchCreate, observe("Watch a file or directory for changes"), s.WatchCreate,
			dispatch.Hooks[WatchCreateArgs, WatchInfo]{
				Assess:    func(a WatchCreateArgs) dispatch.Assessment { return walks(boolOr(a.Recursive, false), a.Path) },
				Describe:  func(a WatchCreateArgs) dispatch.Target { return tgt(a.Sandbox, a.Path, nil) },
				Summarize: func(_ WatchCreateArgs, r WatchInfo) map[string]any { return map[string]any{"watcher_id": r.WatcherID} },
			}),
		dispatch.Define(ToolWatchList, spec("List a sandbox's watches", guard.Safe),
			func(ctx context.Context, c auth.Caller, a WatchRef) ([]WatchInfo, error) {
				return s.WatchList(ctx, c, a.Sandbox)
			},
			dispatch.Hooks[WatchRef, []WatchInfo]{
				Describe: func(a WatchRef) dispatch.Target { return tgt(a.Sandbox, "", nil) },
			}),
		dispatch.Define(ToolWatchPoll, spec("Events of a watch after a cursor (long poll)", guard.Safe), s.WatchPoll,
			dispatch.Hooks[WatchRef, PollResult]{
				Describe:  func(a WatchRef) dispatch.Target { return tgt(a.Sandbox, a.WatcherID, nil) },
				Summarize: func(_ WatchRef, r PollResult) map[string]any { return map[string]any{"events": len(r.Events)} },
			}),
		dispatch.Define(ToolWatchEvents, spec("Subscribe to a watch's events (the HTTP route streams them as SSE)", guard.Safe),
			func(ctx context.Context, c auth.Caller, a WatchRef) (*Watch, error) {
				return s.WatchGet(ctx, c, a.Sandbox, a.WatcherID)
			},
			dispatch.Hooks[WatchRef, *Watch]{
				Describe: func(a WatchRef) dispatch.Target { return tgt(a.Sandbox, a.WatcherID, nil) },
			}),
		dispatch.Define(ToolWatchWait, observe("Wait until a path is created, written, removed or chmodded"), s.WatchWait,
			dispatch.Hooks[WatchWaitArgs, WaitResult]{
				Assess: func(a WatchWaitArgs) dispatch.Assessment {
					return touches(dispatch.Assessment{Risk: guard.Safe}, a.Path)
				},
				Describe: func(a WatchWaitArgs) dispatch.Target { return tgt(a.Sandbox, a.Path, nil) },
				Summarize: func(_ WatchWaitArgs, r WaitResult) map[string]any {
					return map[string]any{"matched": r.Matched, "timed_out": r.TimedOut}
				},
			}),
		dispatch.Define(ToolWatchDelete, spec("Stop a watch", guard.Safe), s.WatchDelete,
			dispatch.Hooks[WatchRef, StopResult]{
				Describe: func(a WatchRef) dispatch.Target { return tgt(a.Sandbox, a.WatcherID, nil) },
			}),
	}
}

// touches adds the files a call names to its assessment, for the policy's
// path lists (file.read /etc/passwd under paths.deny ["/etc/**"]). A
// relative path is also given as the file under /workspace it names.
func touches(a dispatch.Assessment, paths ...string) dispatch.Assessment {
	for _, p := range paths {
		if p == "" {
			continue
		}
		a.Paths = append(a.Paths, p)
		if !strings.HasPrefix(p, "/") {
			a.Paths = append(a.Paths, path.Join("/workspace", p))
		}
	}
	return a
}

// walks is the assessment of a Safe call that reads below dir: the
// whole subtree when recursive (a path rule denies a walk that reaches
// what it names), else dir itself.
func walks(recursive bool, dir string) dispatch.Assessment {
	a := touches(dispatch.Assessment{Risk: guard.Safe}, dir)
	if recursive {
		a.Trees = a.Paths
	}
	return a
}

// sudoRisk raises a call that acts as root inside the sandbox to
// Dangerous.
func sudoRisk(sudo *bool) dispatch.Assessment {
	if boolOr(sudo, false) {
		return dispatch.Assessment{Risk: guard.Dangerous, Reasons: []string{"acts as root inside the sandbox"}}
	}
	return dispatch.Assessment{}
}
