package browserops

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// NavigateArgs is AIO's NavigateRequest.
type NavigateArgs struct {
	dispatch.On
	URL       string  `json:"url" required:"true" doc:"http, https, file, data or about URL; javascript: URLs run script and are rated dangerous"`
	WaitUntil string  `json:"wait_until,omitempty" enum:"load,domcontentloaded,networkidle,commit" doc:"what to wait for; load by default"`
	Timeout   float64 `json:"timeout,omitempty" doc:"seconds; 30 by default, at most 120" minimum:"0"`
}

// Validate checks the URL and the wait.
func (a NavigateArgs) Validate() error {
	if err := checkURL("body.url", a.URL); err != nil {
		return err
	}
	switch a.WaitUntil {
	case "", "load", "domcontentloaded", "networkidle", "commit":
	default:
		return fault.InvalidField("body.wait_until", "wait_until must be load, domcontentloaded, networkidle or commit")
	}
	if a.Timeout < 0 {
		return fault.InvalidField("body.timeout", "timeout must not be negative")
	}
	return nil
}

// navigateTools open a URL and move through the active tab's history.
func navigateTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolNavigate, "Open a URL in the active tab and wait for it to load (the sandbox's egress rules apply)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a NavigateArgs) (PageInfo, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) (PageInfo, error) {
				return navigate(ctx, o.page(), a.URL, a.WaitUntil, seconds(a.Timeout, defaultWait))
			})
		}, func(a NavigateArgs) (string, map[string]any) {
			return urlTarget(a.URL), map[string]any{"wait_until": a.WaitUntil}
		},
		dispatch.Hooks[NavigateArgs, PageInfo]{Assess: func(a NavigateArgs) dispatch.Assessment {
			if isJavaScriptURL(a.URL) {
				return dispatch.Assessment{Risk: guard.Dangerous, Reasons: []string{"a javascript: URL runs script in the page"}}
			}
			return dispatch.Assessment{Risk: guard.Medium}
		}})
	pageOp := func(name dispatch.Ref[PageArgs, PageInfo], desc string, f func(ctx context.Context, o *op) (PageInfo, error)) {
		define(ts, name, desc, guard.Medium, func(ctx context.Context, c auth.Caller, a PageArgs) (PageInfo, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) (PageInfo, error) { return f(ctx, o) })
		}, nil)
	}
	pageOp(ToolBack, "Go back in the active tab's history", func(ctx context.Context, o *op) (PageInfo, error) { return history(ctx, o.page(), -1) })
	pageOp(ToolForward, "Go forward in the active tab's history", func(ctx context.Context, o *op) (PageInfo, error) { return history(ctx, o.page(), 1) })
	pageOp(ToolReload, "Reload the active tab", func(ctx context.Context, o *op) (PageInfo, error) { return reload(ctx, o.page()) })
}
