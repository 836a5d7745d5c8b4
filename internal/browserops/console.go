package browserops

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// ConsoleArgs is page/console's query.
type ConsoleArgs struct {
	dispatch.On
	Clear bool `json:"clear,omitempty" doc:"empty the log after reading it"`
}

// ExportArgs writes a log to a workspace file.
type ExportArgs struct {
	dispatch.On
	SavePath string `json:"save_path" required:"true" doc:"a workspace path (relative ones are under /workspace)"`
	Clear    bool   `json:"clear,omitempty"`
}

// Validate wants a path.
func (a ExportArgs) Validate() error { return needPath("body.save_path", a.SavePath) }

func needPath(field, p string) error {
	if strings.TrimSpace(p) == "" {
		return fault.InvalidField(field, "a path is required")
	}
	if strings.ContainsRune(p, 0) {
		return fault.InvalidField(field, "the path holds a NUL byte")
	}
	return nil
}

// consoleTools read the pages' console log and export it to the workspace.
func consoleTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolConsole, "The console messages and uncaught exceptions of the browser's pages (the last 1000)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a ConsoleArgs) ([]ConsoleEntry, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) ([]ConsoleEntry, error) { return o.b.consoleLog(a.Clear), nil })
		}, nil)
	define(ts, ToolConsoleExport, "Write the console log to a workspace file (JSON)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ExportArgs) (map[string]any, error) {
			return s.ExportConsole(ctx, c, a)
		},
		func(a ExportArgs) (string, map[string]any) { return clipMsg(a.SavePath), nil })
}

// ExportConsole writes the console log to the workspace.
func (s *Service) ExportConsole(ctx context.Context, c auth.Caller, a ExportArgs) (map[string]any, error) {
	id, err := s.filesFor(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	b := s.state(id)
	entries := b.consoleLog(a.Clear)
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return nil, err
	}
	// Relative paths are under /workspace, as for export_har.
	p := workspacePath(a.SavePath)
	if err := s.cfg.Files.WriteFile(ctx, c, id, p, data); err != nil {
		return nil, err
	}
	return map[string]any{"path": p, "count": len(entries)}, nil
}
