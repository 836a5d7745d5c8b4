package browserops

import (
	"context"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

const (
	// defaultPoll and minPoll bound how often a wait checks the page.
	defaultPoll = 100 * time.Millisecond
	minPoll     = 20 * time.Millisecond
	// idleQuiet is how long no request may be in flight for network_idle
	// (Playwright's 500 ms).
	idleQuiet = 500 * time.Millisecond
)

// Wait is AIO's unified wait.
func (s *Service) Wait(ctx context.Context, c auth.Caller, a WaitArgs) (map[string]any, error) {
	timeout := seconds(a.Timeout, defaultWait)
	if a.Type == "timeout" {
		// A plain pause needs no browser.
		if _, err := s.cfg.Resolve(ctx, c, a.Sandbox); err != nil {
			return nil, err
		}
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, fault.Wrap(fault.Timeout, ctx.Err(), "the wait was cancelled")
		case <-t.C:
		}
		return map[string]any{"type": a.Type, "waited_ms": timeout.Milliseconds()}, nil
	}
	dir := ""
	if a.Type == "download" && a.SavePath != nil && *a.SavePath != "" {
		d, err := downloadDir(*a.SavePath)
		if err != nil {
			return nil, err
		}
		dir = d
	}
	poll := defaultPoll
	if a.Polling != nil {
		poll = max(time.Duration(*a.Polling*float64(time.Millisecond)), minPoll)
	}
	if a.Type == "download" {
		// A download comes from another call made meanwhile (a click on
		// a link), which needs the browser's slot: the wait does not hold
		// it. The download log is kept by the connection's reader.
		start := time.Now()
		var check checkFunc
		_, err := run(ctx, s, c, a.Sandbox, func(o *op) (struct{}, error) {
			if dir != "" {
				o.b.logMu.Lock()
				o.b.downloadDir = dir
				o.b.logMu.Unlock()
				if err := o.allowDownloads(ctx); err != nil {
					return struct{}{}, err
				}
			}
			check = o.waitDownload()
			return struct{}{}, nil
		})
		if err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return pollUntil(wctx, a.Type, start, poll, check)
	}
	return run(ctx, s, c, a.Sandbox, func(o *op) (map[string]any, error) {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		check, err := o.waitCheck(a)
		if err != nil {
			return nil, err
		}
		return pollUntil(wctx, a.Type, start, poll, check)
	})
}

// pollUntil runs check every poll until it is done or ctx ends.
func pollUntil(ctx context.Context, typ string, start time.Time, poll time.Duration, check checkFunc) (map[string]any, error) {
	for {
		done, detail, err := check(ctx)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		if done {
			out := map[string]any{"type": typ, "waited_ms": time.Since(start).Milliseconds()}
			for k, v := range detail {
				out[k] = v
			}
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, fault.Wrap(fault.Timeout, ctx.Err(), "the condition was not met within the timeout ("+typ+")")
		case <-time.After(poll):
		}
	}
}

type checkFunc func(ctx context.Context) (bool, map[string]any, error)

func (o *op) waitCheck(a WaitArgs) (checkFunc, error) {
	s := o.page()
	switch a.Type {
	case "selector":
		state := "visible"
		if a.State != nil {
			state = *a.State
		}
		return func(ctx context.Context) (bool, map[string]any, error) {
			var ok bool
			err := callJS(ctx, s, `const el = document.querySelector(a.selector);
switch (a.state) {
case 'attached': return !!el;
case 'detached': return !el;
case 'hidden': return !el || !H.visible(el);
default: return !!el && H.visible(el);
}`, map[string]string{"selector": *a.Selector, "state": state}, &ok)
			return ok, nil, err
		}, nil
	case "load":
		return func(ctx context.Context) (bool, map[string]any, error) {
			var st string
			err := callJS(ctx, s, `return document.readyState;`, nil, &st)
			return st == "complete", nil, err
		}, nil
	case "url":
		pat := a.URLPattern
		if pat == nil {
			pat = a.URL
		}
		re := globRegexp(*pat)
		return func(ctx context.Context) (bool, map[string]any, error) {
			p, err := currentPage(ctx, s)
			if err != nil {
				return false, nil, err
			}
			return re.MatchString(p.URL), map[string]any{"url": p.URL}, nil
		}, nil
	case "network_idle":
		var quietSince time.Time
		return func(context.Context) (bool, map[string]any, error) {
			if o.b.inFlight() > 0 {
				quietSince = time.Time{}
				return false, nil, nil
			}
			if quietSince.IsZero() {
				quietSince = time.Now()
			}
			return time.Since(quietSince) >= idleQuiet, nil, nil
		}, nil
	case "function":
		expr := *a.Expression
		return func(ctx context.Context) (bool, map[string]any, error) {
			var ok bool
			err := callJS(ctx, s, `const v = await (0, eval)(a.expr); return typeof v === 'function' ? !!(await v()) : !!v;`,
				map[string]string{"expr": expr}, &ok)
			return ok, nil, err
		}, nil
	case "download":
		return o.waitDownload(), nil
	case "request", "response":
		pat := a.URLPattern
		if pat == nil {
			pat = a.URL
		}
		re := globRegexp(*pat)
		// Only requests that start after the wait began count.
		since := nowMS()
		wantResponse := a.Type == "response"
		return func(context.Context) (bool, map[string]any, error) {
			for _, r := range o.b.requestLog("", 0) {
				if r.StartedAt+1 < since || !re.MatchString(r.URL) {
					continue
				}
				if !wantResponse || r.Status != 0 {
					return true, map[string]any{"url": r.URL, "method": r.Method, "status": r.Status}, nil
				}
			}
			return false, nil, nil
		}, nil
	}
	return nil, fault.InvalidField("body.type", "unknown wait type")
}

// globRegexp reads Playwright-style URL globs: * and ** match any run of
// characters, ? one; a pattern without wildcards matches as a substring
// (so an exact URL works). The pattern is quoted first, so it can never
// be a regular expression of the caller's.
func globRegexp(p string) *regexp.Regexp {
	if !strings.ContainsAny(p, "*?") {
		return regexp.MustCompile(regexp.QuoteMeta(p))
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range p {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(strings.ReplaceAll(b.String(), ".*.*", ".*"))
}

// workspacePath puts a relative path under /workspace (the sandbox's
// view); the workspace service resolves it inside the sandbox.
func workspacePath(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join("/workspace", p)
}

// WaitArgs is AIO's WaitRequest.
type WaitArgs struct {
	dispatch.On
	Type       string   `json:"type" required:"true" enum:"selector,load,url,network_idle,download,function,response,request,timeout"`
	Selector   *string  `json:"selector,omitempty"`
	State      *string  `json:"state,omitempty" enum:"attached,detached,visible,hidden" doc:"selector waits: visible by default"`
	URL        *string  `json:"url,omitempty" doc:"url waits: the URL, or a glob with *"`
	SavePath   *string  `json:"save_path,omitempty" doc:"download waits: the directory downloads are saved in from this call on (below /workspace or /tmp; default /workspace/downloads); the file keeps the name the server suggests"`
	Timeout    float64  `json:"timeout,omitempty" minimum:"0" doc:"seconds; 30 by default, at most 120; for type timeout, how long to wait"`
	Expression *string  `json:"expression,omitempty" doc:"function waits: JavaScript that becomes truthy (runs script: dangerous tier)"`
	Polling    *float64 `json:"polling,omitempty" doc:"milliseconds between checks"`
	URLPattern *string  `json:"url_pattern,omitempty" doc:"request/response waits: a glob with * matched against the URL"`
}

// Validate checks that the type has what it needs.
func (a WaitArgs) Validate() error {
	need := func(p *string, field string) error {
		if p == nil || *p == "" {
			return fault.InvalidField("body."+field, field+" is required for type "+a.Type)
		}
		return nil
	}
	switch a.Type {
	case "selector":
		if err := need(a.Selector, "selector"); err != nil {
			return err
		}
		if a.State != nil {
			switch *a.State {
			case "attached", "detached", "visible", "hidden":
			default:
				return fault.InvalidField("body.state", "state must be attached, detached, visible or hidden")
			}
		}
	case "url":
		if a.URL == nil && a.URLPattern == nil {
			return fault.InvalidField("body.url", "url is required for type url")
		}
	case "function":
		return need(a.Expression, "expression")
	case "request", "response":
		if a.URL == nil && a.URLPattern == nil {
			return fault.InvalidField("body.url_pattern", "url_pattern is required for type "+a.Type)
		}
	case "download":
		if a.SavePath != nil && *a.SavePath != "" {
			if _, err := downloadDir(*a.SavePath); err != nil {
				return err
			}
		}
	case "load", "network_idle", "timeout":
	default:
		return fault.InvalidField("body.type", "type must be selector, load, url, network_idle, download, function, response, request or timeout")
	}
	if a.Timeout < 0 {
		return fault.InvalidField("body.timeout", "timeout must not be negative")
	}
	return nil
}

// waitTools wait for a condition of the page.
func waitTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolWait, "Wait for a selector, the load, a URL, network idle, a script condition, a request or response, or a time", guard.Medium,
		func(ctx context.Context, c auth.Caller, a WaitArgs) (map[string]any, error) { return s.Wait(ctx, c, a) },
		func(a WaitArgs) (string, map[string]any) { return a.Type, nil },
		dispatch.Hooks[WaitArgs, map[string]any]{Assess: func(a WaitArgs) dispatch.Assessment {
			if a.Type == "function" {
				return dispatch.Assessment{Risk: guard.Dangerous, Reasons: []string{"a function wait runs script in the page"}}
			}
			return dispatch.Assessment{Risk: guard.Medium}
		}})
}
