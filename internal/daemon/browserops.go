package daemon

import (
	"context"
	"strings"

	"github.com/sandhold/sandhold/internal/api/aio"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browserops"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/workspace"
)

// browserRuntime is what the browser operations need from the browser
// runtime (internal/browser's Manager): a DevTools connection to a
// sandbox's browser, started on first use, and a restart.
type browserRuntime struct {
	open    browserops.Opener
	restart browserops.Restarter
	encode  browserops.Encode
}

// startBrowserOps wires AIO's browser operations (browser.* tools) over
// the runtime rt. Workspace files (uploads, state, exports) go through the
// file tools by a nested dispatch, so the file policy, quota, rate limit
// and audit apply to them as to any file call.
func (d *Daemon) startBrowserOps(rt browserRuntime) *browserops.Service {
	svc := browserops.New(browserops.Config{
		Open:    rt.open,
		Restart: rt.restart,
		Encode:  rt.encode,
		Resolve: func(ctx context.Context, c auth.Caller, id string) (string, error) {
			s, err := d.sandboxes.Resolve(ctx, c, id)
			if err != nil {
				return "", err
			}
			return s.ID(), nil
		},
		Network: func(ctx context.Context, c auth.Caller, id string) (string, error) {
			s, err := d.sandboxes.Resolve(ctx, c, id)
			if err != nil {
				return "", err
			}
			return s.Info().Network.Mode, nil
		},
		Files:     dispatchFiles{d: d.dispatch},
		PublicURL: publicURL(d.cfg.Listen),
		Log:       d.log,
	})
	d.closers = append(d.closers, func() error { svc.Close(); return nil })
	d.register(browserops.Tools(svc))
	aio.BrowserRoutes(d.api, d.dispatch)
	return svc
}

// publicURL is the server's own URL for links a call without a Host
// (MCP over stdio) hands out.
func publicURL(listen string) string {
	if strings.HasPrefix(listen, ":") {
		listen = "127.0.0.1" + listen
	}
	return "http://" + listen
}

// dispatchFiles reads and writes workspace files through the file tools.
type dispatchFiles struct{ d *dispatch.Dispatcher }

func (f dispatchFiles) ReadFile(ctx context.Context, c auth.Caller, sandboxID, path string) ([]byte, error) {
	r, err := workspace.ToolRead.Call(ctx, f.d, c, workspace.ReadArgs{On: dispatch.On{Sandbox: sandboxID}, File: path})
	if err != nil {
		return nil, err
	}
	return []byte(r.Content), nil
}

func (f dispatchFiles) WriteFile(ctx context.Context, c auth.Caller, sandboxID, path string, data []byte) error {
	_, err := workspace.ToolWrite.Call(ctx, f.d, c, workspace.WriteArgs{On: dispatch.On{Sandbox: sandboxID}, File: path, Content: string(data)})
	return err
}
