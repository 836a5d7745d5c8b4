package browserops

import (
	"context"
	"fmt"

	cdproto "github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/target"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// TabArgs addresses a tab by index.
type TabArgs struct {
	dispatch.On
	Index int `json:"index" required:"true" minimum:"0"`
}

// NewTabArgs is AIO's CreatePageRequest.
type NewTabArgs struct {
	dispatch.On
	URL *string `json:"url,omitempty"`
}

// Validate checks the URL.
func (a NewTabArgs) Validate() error {
	if a.URL == nil || *a.URL == "" {
		return nil
	}
	return checkURL("body.url", *a.URL)
}

// tabTools list, open, switch and close tabs.
func tabTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolTabList, "The browser's tabs", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) ([]TabInfo, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) ([]TabInfo, error) { return o.listTabs(ctx) })
		}, nil)
	define(ts, ToolTabNew, "Open a new tab (optionally at a URL) and make it active", guard.Medium,
		func(ctx context.Context, c auth.Caller, a NewTabArgs) ([]TabInfo, error) { return s.NewTab(ctx, c, a) },
		func(a NewTabArgs) (string, map[string]any) {
			if a.URL != nil {
				return urlTarget(*a.URL), nil
			}
			return "", nil
		},
		dispatch.Hooks[NewTabArgs, []TabInfo]{Assess: func(a NewTabArgs) dispatch.Assessment {
			if a.URL != nil && isJavaScriptURL(*a.URL) {
				return dispatch.Assessment{Risk: guard.Dangerous, Reasons: []string{"a javascript: URL runs script in the page"}}
			}
			return dispatch.Assessment{Risk: guard.Medium}
		}})
	define(ts, ToolTabSwitch, "Make a tab the active one", guard.Medium,
		func(ctx context.Context, c auth.Caller, a TabArgs) ([]TabInfo, error) { return s.SwitchTab(ctx, c, a) },
		func(a TabArgs) (string, map[string]any) { return fmt.Sprintf("tab %d", a.Index), nil })
	define(ts, ToolTabClose, "Close a tab", guard.Medium,
		func(ctx context.Context, c auth.Caller, a TabArgs) ([]TabInfo, error) { return s.CloseTab(ctx, c, a) },
		func(a TabArgs) (string, map[string]any) { return fmt.Sprintf("tab %d", a.Index), nil })
}

// NewTab opens a tab and makes it active.
func (s *Service) NewTab(ctx context.Context, c auth.Caller, a NewTabArgs) ([]TabInfo, error) {
	return run(ctx, s, c, a.Sandbox, func(o *op) ([]TabInfo, error) {
		if len(o.b.tabs) >= maxTabs {
			return nil, fault.New(fault.Conflict, fmt.Sprintf("the browser already has %d tabs; close one first", maxTabs))
		}
		created, err := cdproto.Call(ctx, o.b.client.Browser(), target.CreateTarget, target.CreateTargetParams{URL: "about:blank"})
		if err != nil {
			return nil, err
		}
		t, err := o.attach(ctx, created.TargetID)
		if err != nil {
			return nil, err
		}
		o.b.tabs = append(o.b.tabs, t)
		o.b.active = len(o.b.tabs) - 1
		if a.URL != nil && *a.URL != "" {
			if _, err := navigate(ctx, t.session, *a.URL, "load", defaultWait); err != nil {
				return nil, err
			}
		}
		return o.listTabs(ctx)
	})
}

func (o *op) tabAt(i int) (*tab, error) {
	if i < 0 || i >= len(o.b.tabs) {
		return nil, fault.New(fault.NotFound, fmt.Sprintf("no tab has index %d", i))
	}
	return o.b.tabs[i], nil
}

// SwitchTab makes a tab active.
func (s *Service) SwitchTab(ctx context.Context, c auth.Caller, a TabArgs) ([]TabInfo, error) {
	return run(ctx, s, c, a.Sandbox, func(o *op) ([]TabInfo, error) {
		t, err := o.tabAt(a.Index)
		if err != nil {
			return nil, err
		}
		if _, err := cdproto.Call(ctx, o.b.client.Browser(), target.ActivateTarget, target.ActivateTargetParams{TargetID: t.id}); err != nil {
			return nil, err
		}
		o.b.active = a.Index
		return o.listTabs(ctx)
	})
}

// CloseTab closes a tab; the last one is replaced by a blank tab.
func (s *Service) CloseTab(ctx context.Context, c auth.Caller, a TabArgs) ([]TabInfo, error) {
	return run(ctx, s, c, a.Sandbox, func(o *op) ([]TabInfo, error) {
		t, err := o.tabAt(a.Index)
		if err != nil {
			return nil, err
		}
		if _, err := cdproto.Call(ctx, o.b.client.Browser(), target.CloseTarget, target.CloseTargetParams{TargetID: t.id}); err != nil {
			return nil, err
		}
		if o.b.closed == nil {
			o.b.closed = map[target.ID]bool{}
		}
		o.b.closed[t.id] = true
		o.b.tabs = append(o.b.tabs[:a.Index:a.Index], o.b.tabs[a.Index+1:]...)
		if o.b.active >= a.Index && o.b.active > 0 {
			o.b.active--
		}
		if err := o.refreshTabs(ctx); err != nil {
			return nil, err
		}
		return o.listTabs(ctx)
	})
}
