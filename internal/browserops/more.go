package browserops

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	cdproto "github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/storage"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/browser/cdp"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

func jsonUnmarshalV2(b []byte, v any) error { return jsonv2.Unmarshal(b, v) }

const (
	// maxRoutes caps the network routes of one browser.
	maxRoutes = 100
	// maxRouteBody caps a mocked response body.
	maxRouteBody = 1 << 20
	// maxStateFile caps a state file read back (cookies + localStorage).
	maxStateFile = 8 << 20
)

// ---- actions (AIO's /v1/browser/actions) ---------------------------------

// ActionArgs is one of AIO's actions, told apart by action_type.
type ActionArgs struct {
	On
	ActionType string   `json:"action_type" required:"true" enum:"MOVE_TO,MOVE_REL,CLICK,MOUSE_DOWN,MOUSE_UP,RIGHT_CLICK,DOUBLE_CLICK,DRAG_TO,DRAG_REL,SCROLL,TYPING,PRESS,KEY_DOWN,KEY_UP,HOTKEY,WAIT"`
	X          *float64 `json:"x,omitempty"`
	Y          *float64 `json:"y,omitempty"`
	XOffset    *float64 `json:"x_offset,omitempty"`
	YOffset    *float64 `json:"y_offset,omitempty"`
	Button     string   `json:"button,omitempty" enum:"left,right,middle"`
	NumClicks  *int     `json:"num_clicks,omitempty" minimum:"1" maximum:"3"`
	DX         int      `json:"dx,omitempty"`
	DY         int      `json:"dy,omitempty"`
	Text       *string  `json:"text,omitempty"`
	// UseClipboard is accepted for AIO compatibility: text is always
	// inserted directly (there is no clipboard in a headless browser).
	UseClipboard *bool    `json:"use_clipboard,omitempty"`
	Key          *string  `json:"key,omitempty"`
	Keys         []string `json:"keys,omitempty" maxItems:"8"`
	Duration     *float64 `json:"duration,omitempty" doc:"WAIT: seconds, at most 120"`
}

// Validate checks that the action has the fields its type requires.
func (a ActionArgs) Validate() error {
	need := func(ok bool, field string) error {
		if !ok {
			return fault.InvalidField("body."+field, field+" is required for "+a.ActionType)
		}
		return nil
	}
	if _, err := mouseButton(a.Button); err != nil {
		return err
	}
	if a.NumClicks != nil && (*a.NumClicks < 1 || *a.NumClicks > 3) {
		return fault.InvalidField("body.num_clicks", "num_clicks must be between 1 and 3")
	}
	switch a.ActionType {
	case "MOVE_TO", "DRAG_TO":
		if err := need(a.X != nil, "x"); err != nil {
			return err
		}
		return need(a.Y != nil, "y")
	case "MOVE_REL", "DRAG_REL":
		if err := need(a.XOffset != nil, "x_offset"); err != nil {
			return err
		}
		return need(a.YOffset != nil, "y_offset")
	case "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK":
		return need((a.X == nil) == (a.Y == nil), "y")
	case "MOUSE_DOWN", "MOUSE_UP", "SCROLL":
		return nil
	case "TYPING":
		if err := need(a.Text != nil, "text"); err != nil {
			return err
		}
		return capText("body.text", *a.Text)
	case "PRESS", "KEY_DOWN", "KEY_UP":
		if err := need(a.Key != nil, "key"); err != nil {
			return err
		}
		_, err := lookupKey(*a.Key)
		return err
	case "HOTKEY":
		return HotKeyArgs{Keys: a.Keys}.Validate()
	case "WAIT":
		if err := need(a.Duration != nil, "duration"); err != nil {
			return err
		}
		if *a.Duration < 0 || *a.Duration > maxWait.Seconds() {
			return fault.InvalidField("body.duration", "duration must be between 0 and 120 seconds")
		}
		return nil
	}
	return fault.InvalidField("body.action_type", "unknown action_type")
}

// ActionData is AIO's ActionData.
type ActionData struct {
	Status          string `json:"status"`
	ActionPerformed string `json:"action_performed"`
}

// doAction performs one action at the mouse position the browser keeps.
func (o *op) doAction(ctx context.Context, a ActionArgs) (string, error) {
	s, b := o.page(), o.b
	btn, _ := mouseButton(a.Button)
	at := func() (float64, float64) {
		if a.X != nil && a.Y != nil {
			return *a.X, *a.Y
		}
		return b.mouseX, b.mouseY
	}
	moveTo := func(x, y float64, buttons int64) error {
		if err := mouseMove(ctx, s, x, y, buttons); err != nil {
			return err
		}
		b.mouseX, b.mouseY = x, y
		return nil
	}
	switch a.ActionType {
	case "MOVE_TO":
		return fmt.Sprintf("moved to (%g, %g)", *a.X, *a.Y), moveTo(*a.X, *a.Y, 0)
	case "MOVE_REL":
		x, y := b.mouseX+*a.XOffset, b.mouseY+*a.YOffset
		return fmt.Sprintf("moved to (%g, %g)", x, y), moveTo(x, y, 0)
	case "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK":
		x, y := at()
		n := int64(1)
		if a.NumClicks != nil {
			n = int64(*a.NumClicks)
		}
		switch a.ActionType {
		case "RIGHT_CLICK":
			btn = "right"
		case "DOUBLE_CLICK":
			n = 2
		}
		if err := clickAt(ctx, s, x, y, btn, n); err != nil {
			return "", err
		}
		b.mouseX, b.mouseY = x, y
		return fmt.Sprintf("%s at (%g, %g)", strings.ToLower(a.ActionType), x, y), nil
	case "MOUSE_DOWN", "MOUSE_UP":
		down := a.ActionType == "MOUSE_DOWN"
		return strings.ToLower(a.ActionType), mouseButtonEvent(ctx, s, b.mouseX, b.mouseY, btn, down, 1)
	case "DRAG_TO", "DRAG_REL":
		x, y := 0.0, 0.0
		if a.ActionType == "DRAG_TO" {
			x, y = *a.X, *a.Y
		} else {
			x, y = b.mouseX+*a.XOffset, b.mouseY+*a.YOffset
		}
		if err := mouseButtonEvent(ctx, s, b.mouseX, b.mouseY, btn, true, 1); err != nil {
			return "", err
		}
		// A few steps so pages that track mousemove see a drag.
		const steps = 5
		x0, y0 := b.mouseX, b.mouseY
		for i := 1; i <= steps; i++ {
			f := float64(i) / steps
			if err := moveTo(x0+(x-x0)*f, y0+(y-y0)*f, buttonsMask(btn)); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("dragged to (%g, %g)", x, y), mouseButtonEvent(ctx, s, x, y, btn, false, 1)
	case "SCROLL":
		return fmt.Sprintf("scrolled (%d, %d)", a.DX, a.DY), wheel(ctx, s, b.mouseX, b.mouseY, float64(a.DX), float64(a.DY))
	case "TYPING":
		return fmt.Sprintf("typed %d characters", len([]rune(*a.Text))), insertText(ctx, s, *a.Text)
	case "PRESS":
		return "pressed " + *a.Key, pressCombo(ctx, s, []string{*a.Key})
	case "KEY_DOWN", "KEY_UP":
		return strings.ToLower(a.ActionType) + " " + *a.Key, keyEvent(ctx, s, *a.Key, a.ActionType == "KEY_DOWN")
	case "HOTKEY":
		return "pressed " + strings.Join(a.Keys, "+"), pressCombo(ctx, s, a.Keys)
	case "WAIT":
		t := time.NewTimer(time.Duration(*a.Duration * float64(time.Second)))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
		return fmt.Sprintf("waited %gs", *a.Duration), nil
	}
	return "", fault.InvalidField("body.action_type", "unknown action_type")
}

// ---- forms and files ---------------------------------------------------

// UploadArgs is AIO's UploadFileRequest.
type UploadArgs struct {
	On
	Selector string   `json:"selector" required:"true"`
	Files    []string `json:"files" required:"true" maxItems:"20" doc:"workspace paths (relative ones are under /workspace)"`
}

// Validate wants files.
func (a UploadArgs) Validate() error {
	if len(a.Files) == 0 || len(a.Files) > maxUploadFiles {
		return fault.InvalidField("body.files", fmt.Sprintf("files must hold 1 to %d paths", maxUploadFiles))
	}
	for _, f := range a.Files {
		if err := needPath("body.files", f); err != nil {
			return err
		}
	}
	return nil
}

// FillFormArgs is AIO's FormFillRequest.
type FillFormArgs struct {
	On
	Items []map[string]any `json:"items" required:"true" maxItems:"100" doc:"each {selector or index, value (text, true/false for a checkbox, an option for a select)}"`
}

// Validate checks each item.
func (a FillFormArgs) Validate() error {
	if len(a.Items) == 0 || len(a.Items) > maxFormItems {
		return fault.InvalidField("body.items", fmt.Sprintf("items must hold 1 to %d fields", maxFormItems))
	}
	for i, it := range a.Items {
		_, sel := it["selector"].(string)
		_, idx := it["index"].(float64)
		if !sel && !idx {
			return fault.InvalidField(fmt.Sprintf("body.items[%d]", i), "an item needs a selector or an index")
		}
		if _, ok := it["value"]; !ok {
			if _, ok := it["text"]; !ok {
				return fault.InvalidField(fmt.Sprintf("body.items[%d].value", i), "an item needs a value")
			}
		}
	}
	return nil
}

// PathArgs is AIO's StateSaveRequest and StateLoadRequest.
type PathArgs struct {
	On
	Path string `json:"path" required:"true" doc:"a workspace path (relative ones are under /workspace)"`
}

// Validate wants a path.
func (a PathArgs) Validate() error { return needPath("body.path", a.Path) }

// storageState is Playwright's storage state file.
type storageState struct {
	Cookies []*network.Cookie `json:"cookies"`
	Origins []originState     `json:"origins"`
}

type originState struct {
	Origin       string      `json:"origin"`
	LocalStorage []nameValue `json:"localStorage"`
}

type nameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ---- network ----------------------------------------------------------

// HeadersArgs is AIO's HeadersRequest.
type HeadersArgs struct {
	On
	Headers map[string]string `json:"headers" required:"true" doc:"sent with every request of every tab; an empty object removes them"`
}

// Validate refuses headers a browser must set itself.
func (a HeadersArgs) Validate() error { return checkHeaders(a.Headers) }

func checkHeaders(h map[string]string) error {
	if len(h) > maxHeaders {
		return fault.InvalidField("body.headers", fmt.Sprintf("at most %d headers", maxHeaders))
	}
	for k, v := range h {
		if k == "" || strings.ContainsAny(k, " :\r\n\x00") || strings.ContainsAny(v, "\r\n\x00") {
			return fault.InvalidField("body.headers", "header names and values must be single-line tokens")
		}
		switch strings.ToLower(k) {
		case "host", "content-length", "connection", "transfer-encoding":
			return fault.InvalidField("body.headers", "header "+k+" is set by the browser")
		}
	}
	return nil
}

// ScopedHeadersArgs is AIO's ScopedHeadersRequest.
type ScopedHeadersArgs struct {
	On
	Origin  string            `json:"origin" required:"true" doc:"scheme://host[:port] the headers are sent to"`
	Headers map[string]string `json:"headers" required:"true"`
}

// Validate checks the origin and headers.
func (a ScopedHeadersArgs) Validate() error {
	u, err := url.Parse(a.Origin)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fault.InvalidField("body.origin", "origin must be scheme://host[:port]")
	}
	return checkHeaders(a.Headers)
}

// RouteResponse is AIO's RouteResponseModel.
type RouteResponse struct {
	Status      int               `json:"status,omitempty" doc:"200 by default"`
	Headers     map[string]string `json:"headers,omitempty"`
	Body        string            `json:"body,omitempty"`
	ContentType string            `json:"content_type,omitempty" doc:"text/plain by default"`
}

// RouteArgs is AIO's NetworkRouteRequest.
type RouteArgs struct {
	On
	URLPattern string         `json:"url_pattern" required:"true" doc:"a glob (* matches anything) or a URL"`
	Response   *RouteResponse `json:"response,omitempty"`
	Abort      bool           `json:"abort,omitempty"`
}

// Validate wants a pattern and one of response or abort.
func (a RouteArgs) Validate() error {
	if a.URLPattern == "" {
		return fault.InvalidField("body.url_pattern", "url_pattern is empty")
	}
	if !a.Abort && a.Response == nil {
		return fault.InvalidField("body", "give a response or abort: true")
	}
	if a.Response != nil {
		if len(a.Response.Body) > maxRouteBody {
			return fault.InvalidField("body.response.body", "the body is larger than 1 MiB")
		}
		if a.Response.Status != 0 && (a.Response.Status < 100 || a.Response.Status > 599) {
			return fault.InvalidField("body.response.status", "status must be an HTTP status code")
		}
		if err := checkHeaders(a.Response.Headers); err != nil {
			return err
		}
	}
	return nil
}

// RouteRemoveArgs is AIO's NetworkRouteRemoveRequest.
type RouteRemoveArgs struct {
	On
	URLPattern string `json:"url_pattern" required:"true"`
}

// RequestsArgs is network/requests's query.
type RequestsArgs struct {
	On
	Filter string `json:"filter,omitempty" doc:"only URLs containing this"`
	Limit  int    `json:"limit,omitempty" minimum:"0" doc:"newest N; 100 by default"`
}

type route struct {
	pattern string
	match   func(string) bool
	abort   bool
	resp    *RouteResponse
}

// netRules is what request interception applies; it is read by the
// goroutines answering paused requests, so it has its own lock.
type netRules struct {
	mu     sync.Mutex
	routes []route
	scoped map[string]map[string]string // origin → headers
}

func (n *netRules) active() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.routes) > 0 || len(n.scoped) > 0
}

// applyRoutes turns request interception on for a tab when rules exist,
// off otherwise.
func (o *op) applyRoutes(ctx context.Context, s *cdp.Session) error {
	if !o.b.rules.active() {
		_, err := cdproto.Call(ctx, s, fetch.Disable, cdproto.Empty{})
		return err
	}
	_, err := cdproto.Call(ctx, s, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}})
	return err
}

// onPaused answers one intercepted request (run on its own goroutine: it
// calls the browser).
func (b *browserState) onPaused(client *cdp.Client, session string, params jsonv2.Value) {
	var e fetch.EventRequestPaused
	if jsonv2.Unmarshal(params, &e) != nil || e.Request == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := client.Session(session)
	b.rules.mu.Lock()
	var hit *route
	for i := range b.rules.routes {
		if b.rules.routes[i].match(e.Request.URL) {
			r := b.rules.routes[i]
			hit = &r
			break
		}
	}
	var extra map[string]string
	if u, err := url.Parse(e.Request.URL); err == nil {
		extra = b.rules.scoped[u.Scheme+"://"+u.Host]
	}
	b.rules.mu.Unlock()
	switch {
	case hit != nil && hit.abort:
		_, _ = cdproto.Call(ctx, s, fetch.FailRequest, fetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: network.ErrorReasonAborted})
	case hit != nil:
		r := hit.resp
		status := int64(cmpInt(r.Status, 200))
		hs := []*fetch.HeaderEntry{{Name: "Content-Type", Value: cmpOr(r.ContentType, "text/plain")}}
		for k, v := range r.Headers {
			if !strings.EqualFold(k, "content-type") {
				hs = append(hs, &fetch.HeaderEntry{Name: k, Value: v})
			}
		}
		_, _ = cdproto.Call(ctx, s, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: e.RequestID, ResponseCode: status,
			ResponseHeaders: hs, Body: []byte(r.Body)})
	case len(extra) > 0:
		var hs []*fetch.HeaderEntry
		for k, v := range e.Request.Headers {
			if sv, ok := v.(string); ok {
				if _, over := extra[k]; !over {
					hs = append(hs, &fetch.HeaderEntry{Name: k, Value: sv})
				}
			}
		}
		for k, v := range extra {
			hs = append(hs, &fetch.HeaderEntry{Name: k, Value: v})
		}
		_, _ = cdproto.Call(ctx, s, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID, Headers: hs})
	default:
		_, _ = cdproto.Call(ctx, s, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
	}
}

func cmpInt(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// ---- captcha ------------------------------------------------------------

// CaptchaWaitArgs is AIO's CaptchaWaitRequest.
type CaptchaWaitArgs struct {
	On
	Timeout      float64 `json:"timeout,omitempty" minimum:"0" doc:"seconds; 60 by default, at most 120"`
	PollInterval float64 `json:"poll_interval,omitempty" minimum:"0" doc:"seconds; 2 by default"`
}

// CaptchaWaitResult is AIO's CaptchaWaitResult.
type CaptchaWaitResult struct {
	Resolved bool `json:"resolved"`
}

// RestartArgs is AIO's RestartRequest.
type RestartArgs struct {
	On
	Mode         string   `json:"mode,omitempty" enum:"soft,hard" doc:"soft: reconnect to the browser; hard (default): restart the browser process"`
	URLBlocklist []string `json:"url_blocklist,omitempty" doc:"refused: Chromium reads URL lists only as managed policies from /etc, which a sandbox cannot have; the sandbox's egress allow-list (network.allow) decides what the browser reaches"`
	URLAllowlist []string `json:"url_allowlist,omitempty" doc:"refused: see url_blocklist"`
	// AllowFileSelectionDialogs false intercepts every tab's file
	// chooser (Page.setInterceptFileChooserDialog), so no page opens
	// one; true or null is the browser's default.
	AllowFileSelectionDialogs *bool `json:"allow_file_selection_dialogs,omitempty" doc:"false: no page can open a file picker (upload_file still sets files); true or null: the browser's default"`
	// Locale is Chromium's --lang and --accept-lang (hard restarts).
	Locale *string `json:"locale,omitempty" doc:"the browser's UI language and Accept-Language, e.g. de-DE (needs mode hard); empty or null: the default"`
}

// localeRE is a BCP 47-like tag: a language and up to three subtags.
var localeRE = regexp.MustCompile(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$`)

// Validate refuses what cannot be applied: URL lists (no way to give
// them to Chromium inside a sandbox), a malformed locale, a locale on a
// soft restart (the process keeps its language).
func (a RestartArgs) Validate() error {
	switch a.Mode {
	case "", "soft", "hard":
	default:
		return fault.InvalidField("body.mode", "mode must be soft or hard")
	}
	if len(a.URLBlocklist) > 0 {
		return fault.InvalidField("body.url_blocklist", "URL block lists are not supported: Chromium reads them only as managed policies from /etc, which a sandbox cannot provide; use the sandbox's egress allow-list (network.allow) or network/route to abort requests")
	}
	if len(a.URLAllowlist) > 0 {
		return fault.InvalidField("body.url_allowlist", "URL allow lists are not supported: Chromium reads them only as managed policies from /etc, which a sandbox cannot provide; the sandbox's egress allow-list (network.allow) decides what the browser reaches")
	}
	if a.Locale != nil && *a.Locale != "" {
		if !localeRE.MatchString(strings.ReplaceAll(*a.Locale, "_", "-")) {
			return fault.InvalidField("body.locale", "locale must be a language tag like en-US or de")
		}
		if a.Mode == "soft" {
			return fault.InvalidField("body.locale", "a locale takes a hard restart (mode hard): the running browser keeps its language")
		}
	}
	return nil
}

// RestartOptions are what a hard restart gives the browser process.
type RestartOptions struct {
	// Locale is --lang / --accept-lang ("" the default).
	Locale string
}

// ---- registration -------------------------------------------------------

func moreTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolActions, "Perform one of AIO's low-level actions (MOVE_TO, CLICK, DRAG_TO, SCROLL, TYPING, HOTKEY, WAIT …) on the active tab", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ActionArgs) (ActionData, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) (ActionData, error) {
				what, err := o.doAction(ctx, a)
				if err != nil {
					return ActionData{}, err
				}
				return ActionData{Status: "success", ActionPerformed: what}, nil
			})
		}, func(a ActionArgs) (string, map[string]any) { return a.ActionType, nil })
	define(ts, ToolUploadFile, "Set workspace files on a file input", guard.Medium,
		func(ctx context.Context, c auth.Caller, a UploadArgs) (Action, error) { return s.UploadFile(ctx, c, a) },
		func(a UploadArgs) (string, map[string]any) {
			return clipMsg(a.Selector), map[string]any{"files": a.Files}
		})
	define(ts, ToolFillForm, "Fill several form fields at once (text, checkboxes, selects)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a FillFormArgs) (Action, error) { return s.FillForm(ctx, c, a) },
		func(a FillFormArgs) (string, map[string]any) { return "", map[string]any{"items": len(a.Items)} })
	define(ts, ToolStateSave, "Save cookies and the active page's localStorage to a workspace file (Playwright's storage state)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a PathArgs) (map[string]any, error) {
			return s.SaveState(ctx, c, a)
		},
		func(a PathArgs) (string, map[string]any) { return clipMsg(a.Path), nil })
	define(ts, ToolStateLoad, "Load cookies and localStorage from a workspace file (Playwright's storage state)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a PathArgs) (map[string]any, error) {
			return s.LoadState(ctx, c, a)
		},
		func(a PathArgs) (string, map[string]any) { return clipMsg(a.Path), nil })
	define(ts, ToolHeaders, "Send extra headers with every request of every tab", guard.Medium,
		func(ctx context.Context, c auth.Caller, a HeadersArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "set_headers", func(ctx context.Context, o *op) error {
				o.b.headers = a.Headers
				for _, t := range o.b.tabs {
					if err := setHeaders(ctx, t.session, a.Headers); err != nil {
						return err
					}
				}
				return nil
			})
		}, func(a HeadersArgs) (string, map[string]any) {
			return "", map[string]any{"names": headerNames(a.Headers)}
		})
	define(ts, ToolScopedHeaders, "Send extra headers with the requests to one origin", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ScopedHeadersArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "set_scoped_headers", func(ctx context.Context, o *op) error {
				u, _ := url.Parse(a.Origin)
				o.b.rules.mu.Lock()
				if o.b.rules.scoped == nil {
					o.b.rules.scoped = map[string]map[string]string{}
				}
				if len(a.Headers) == 0 {
					delete(o.b.rules.scoped, u.Scheme+"://"+u.Host)
				} else {
					o.b.rules.scoped[u.Scheme+"://"+u.Host] = a.Headers
				}
				o.b.rules.mu.Unlock()
				return o.applyRoutesAll(ctx)
			})
		}, func(a ScopedHeadersArgs) (string, map[string]any) {
			return clipMsg(a.Origin), map[string]any{"names": headerNames(a.Headers)}
		})
	define(ts, ToolRouteAdd, "Mock or abort the requests whose URL matches a pattern", guard.Medium,
		func(ctx context.Context, c auth.Caller, a RouteArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "add_route", func(ctx context.Context, o *op) error {
				re := globRegexp(a.URLPattern)
				o.b.rules.mu.Lock()
				kept := o.b.rules.routes[:0]
				for _, r := range o.b.rules.routes {
					if r.pattern != a.URLPattern {
						kept = append(kept, r)
					}
				}
				if len(kept) >= maxRoutes {
					o.b.rules.mu.Unlock()
					return fault.New(fault.Conflict, fmt.Sprintf("the browser already has %d routes", maxRoutes))
				}
				o.b.rules.routes = append(kept, route{pattern: a.URLPattern, match: re.MatchString, abort: a.Abort, resp: a.Response})
				o.b.rules.mu.Unlock()
				return o.applyRoutesAll(ctx)
			})
		}, func(a RouteArgs) (string, map[string]any) {
			return urlTarget(a.URLPattern), map[string]any{"abort": a.Abort}
		})
	define(ts, ToolRouteRemove, "Remove a network route", guard.Medium,
		func(ctx context.Context, c auth.Caller, a RouteRemoveArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "remove_route", func(ctx context.Context, o *op) error {
				o.b.rules.mu.Lock()
				kept, found := o.b.rules.routes[:0], false
				for _, r := range o.b.rules.routes {
					if r.pattern == a.URLPattern {
						found = true
						continue
					}
					kept = append(kept, r)
				}
				o.b.rules.routes = kept
				o.b.rules.mu.Unlock()
				if !found {
					return fault.New(fault.NotFound, "no route has this url_pattern")
				}
				return o.applyRoutesAll(ctx)
			})
		}, func(a RouteRemoveArgs) (string, map[string]any) { return urlTarget(a.URLPattern), nil })
	define(ts, ToolRequests, "The network requests the browser's pages made (the last 1000)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a RequestsArgs) ([]RequestEntry, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) ([]RequestEntry, error) {
				out := o.b.requestLog(a.Filter, cmpInt(a.Limit, defaultRequestsLimit))
				if out == nil {
					out = []RequestEntry{}
				}
				return out, nil
			})
		}, nil)
	define(ts, ToolExportHAR, "Write the network log to a workspace file as HAR 1.2", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ExportArgs) (map[string]any, error) {
			return s.ExportHAR(ctx, c, a)
		},
		func(a ExportArgs) (string, map[string]any) { return clipMsg(a.SavePath), nil })
	define(ts, ToolCaptchaDetect, "Detect a CAPTCHA widget on the active page (detection only: sandhold solves none)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) (map[string]any, error) {
			return read[map[string]any](ctx, s, c, a.Sandbox, captchaJS, nil)
		}, nil)
	define(ts, ToolCaptchaWait, "Wait until no CAPTCHA is detected on the active page (a person solves it, e.g. over VNC)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a CaptchaWaitArgs) (CaptchaWaitResult, error) {
			return s.CaptchaWait(ctx, c, a)
		}, nil)
	define(ts, ToolRestart, "Restart the sandbox's browser (hard) or reconnect to it (soft)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a RestartArgs) (map[string]any, error) {
			return s.RestartBrowser(ctx, c, a)
		},
		func(a RestartArgs) (string, map[string]any) { return cmpOr(a.Mode, "hard"), nil })
	define(ts, ToolProxyPAC, "The PAC file matching the sandbox's egress (its allow-list proxy in proxy mode)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) (string, error) { return s.ProxyPAC(ctx, c, a) }, nil)
	define(ts, ToolRecord, "Record the active page (AIO's page/record: once, start, pause, resume, stop, status) to an MP4 made inside the sandbox (default /workspace/recordings)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a RecordArgs) (map[string]any, error) {
			return s.Record(ctx, c, a)
		}, func(a RecordArgs) (string, map[string]any) {
			d := map[string]any{}
			if a.SavePath != nil {
				d["save_path"] = clipMsg(*a.SavePath)
			}
			return cmpOr(a.Action, "once"), d
		})
}

// RecordArgs is AIO's RecordRequest.
type RecordArgs struct {
	On
	Action   string  `json:"action,omitempty" enum:"once,start,pause,resume,stop,status" doc:"once (default): record duration seconds and answer with the file"`
	SavePath *string `json:"save_path,omitempty" doc:"an .mp4 below /workspace or /tmp (default /workspace/recordings/page_{time}.mp4)"`
	Duration float64 `json:"duration,omitempty" doc:"seconds of a once recording (default 10, at most 600); start records until stop or 600 s"`
	FPS      int     `json:"fps,omitempty" doc:"frames per second (default 15, at most 30)"`
	Quality  *int    `json:"quality,omitempty" minimum:"0" maximum:"100" doc:"JPEG quality of the captured frames (default 80)"`
}

// Validate bounds the numbers (AIO's ranges, and sandhold's recording
// limits).
func (a RecordArgs) Validate() error {
	switch {
	case a.FPS < 0 || a.FPS > browser.MaxRecordFPS:
		return fault.InvalidField("body.fps", "fps must be within 1-30")
	case math.IsNaN(a.Duration) || a.Duration < 0 || a.Duration > browser.MaxRecordDuration.Seconds():
		return fault.InvalidField("body.duration", "duration must be within (0, 600] seconds")
	case a.Quality != nil && (*a.Quality < 0 || *a.Quality > 100):
		return fault.InvalidField("body.quality", "quality must be within 0-100")
	}
	return nil
}

// proxyPort is where the in-sandbox end of the egress proxy listens
// (internal/egress).
const proxyPort = "127.0.0.1:3128"

// ProxyPAC is the PAC file that matches the sandbox's egress: through
// the sandbox's allow-list proxy in proxy mode (the sandbox's own
// loopback direct), direct otherwise (in none mode nothing leaves the
// sandbox's network namespace either way).
func (s *Service) ProxyPAC(ctx context.Context, c auth.Caller, a PageArgs) (string, error) {
	if s.cfg.Network == nil {
		return "", fault.New(fault.Unsupported, "no proxy configuration is available here")
	}
	id, err := s.cfg.Resolve(ctx, c, a.Sandbox)
	if err != nil {
		return "", err
	}
	mode, err := s.cfg.Network(ctx, c, id)
	if err != nil {
		return "", err
	}
	if mode == "proxy" {
		return `function FindProxyForURL(url, host) {
  if (isPlainHostName(host) || host === "localhost" || host === "127.0.0.1" || host === "[::1]") return "DIRECT";
  return "PROXY ` + proxyPort + `";
}
`, nil
	}
	return "// egress mode " + mode + ": no proxy\nfunction FindProxyForURL(url, host) { return \"DIRECT\"; }\n", nil
}

func headerNames(h map[string]string) []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	return out
}

func (o *op) applyRoutesAll(ctx context.Context) error {
	for _, t := range o.b.tabs {
		if err := o.applyRoutes(ctx, t.session); err != nil {
			return err
		}
	}
	return nil
}

// UploadFile sets workspace files on a file input. Each file is read
// through the workspace first, so the workspace's policy (sensitive
// paths, the sandbox's own view) decides what may be uploaded; the
// browser, inside the sandbox, then opens the same path.
func (s *Service) UploadFile(ctx context.Context, c auth.Caller, a UploadArgs) (Action, error) {
	if s.cfg.Files == nil {
		return Action{}, fault.New(fault.Unsupported, "workspace files are not available to the browser here")
	}
	id, err := s.cfg.Resolve(ctx, c, a.Sandbox)
	if err != nil {
		return Action{}, err
	}
	paths := make([]string, 0, len(a.Files))
	for _, f := range a.Files {
		p := workspacePath(f)
		if _, err := s.cfg.Files.ReadFile(ctx, c, id, p); err != nil {
			return Action{}, err
		}
		paths = append(paths, p)
	}
	return act(ctx, s, c, id, "upload_file", func(ctx context.Context, o *op) error {
		objID, err := elementObject(ctx, o.page(), a.Selector)
		if err != nil {
			return err
		}
		defer func() {
			_, _ = cdproto.Call(ctx, o.page(), runtime.ReleaseObject, runtime.ReleaseObjectParams{ObjectID: objID})
		}()
		_, err = cdproto.Call(ctx, o.page(), dom.SetFileInputFiles, dom.SetFileInputFilesParams{Files: paths, ObjectID: objID})
		return err
	})
}

// elementObject finds a file input by selector and returns its object id.
func elementObject(ctx context.Context, s *cdp.Session, selector string) (runtime.RemoteObjectID, error) {
	arg, _ := json.Marshal(selector)
	res, err := cdproto.Call(ctx, s, runtime.Evaluate, runtime.EvaluateParams{Expression: `(() => {
const el = document.querySelector(` + string(arg) + `);
if (!el) throw new Error('no element matches the selector');
if (el.tagName !== 'INPUT' || el.type !== 'file') throw new Error('the element is not a file input');
return el; })()`})
	if err != nil {
		return "", err
	}
	if d := res.ExceptionDetails; d != nil {
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg = d.Exception.Description
		}
		return "", pageError(msg)
	}
	if res.Result == nil || res.Result.ObjectID == "" {
		return "", fault.New(fault.NotFound, "page: the selector did not yield an element")
	}
	return res.Result.ObjectID, nil
}

// FillForm fills each item in order.
func (s *Service) FillForm(ctx context.Context, c auth.Caller, a FillFormArgs) (Action, error) {
	return act(ctx, s, c, a.Sandbox, "fill_form", func(ctx context.Context, o *op) error {
		for i, it := range a.Items {
			v, ok := it["value"]
			if !ok {
				v = it["text"]
			}
			ref := elementRef{}
			if sel, ok := it["selector"].(string); ok {
				ref.Selector = &sel
			} else if f, ok := it["index"].(float64); ok {
				n := int(f)
				ref.Index = &n
			}
			var kind string
			if err := callJS(ctx, o.page(), `const el = H.find(a);
if (el.tagName === 'SELECT') return 'select';
if (el.type === 'checkbox' || el.type === 'radio') return 'check';
return 'text';`, ref, &kind); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
			var err error
			switch kind {
			case "select":
				err = callJS(ctx, o.page(), `const el = H.find(a.ref);
const i = Array.from(el.options).findIndex(o => o.value === String(a.v) || o.text.trim() === String(a.v));
if (i < 0) throw new Error('no such option');
el.selectedIndex = i;
el.dispatchEvent(new Event('input', {bubbles: true}));
el.dispatchEvent(new Event('change', {bubbles: true}));`, map[string]any{"ref": ref, "v": v}, nil)
			case "check":
				err = callJS(ctx, o.page(), `const el = H.find(a.ref);
const want = a.v === true || a.v === 'true' || a.v === 'on' || a.v === 1;
if (el.checked !== want) el.click();`, map[string]any{"ref": ref, "v": v}, nil)
			default:
				err = fill(ctx, o.page(), ref, fmt.Sprint(v))
			}
			if err != nil {
				return fault.Wrap(fault.KindOf(err), err, fmt.Sprintf("item %d: %s", i, fault.Public(err)))
			}
		}
		return nil
	})
}

// SaveState writes cookies and the active origin's localStorage.
func (s *Service) SaveState(ctx context.Context, c auth.Caller, a PathArgs) (map[string]any, error) {
	if s.cfg.Files == nil {
		return nil, fault.New(fault.Unsupported, "workspace files are not available to the browser here")
	}
	st, err := run(ctx, s, c, a.Sandbox, func(o *op) (storageState, error) {
		res, err := cdproto.Call(ctx, o.b.client.Browser(), storage.GetCookies, storage.GetCookiesParams{})
		if err != nil {
			return storageState{}, err
		}
		st := storageState{Cookies: res.Cookies, Origins: []originState{}}
		var os originState
		if err := callJS(ctx, o.page(), `if (!/^https?:/.test(location.protocol)) return {origin: '', localStorage: []};
const out = [];
for (let i = 0; i < localStorage.length; i++) { const k = localStorage.key(i); out.push({name: k, value: localStorage.getItem(k)}); }
return {origin: location.origin, localStorage: out};`, nil, &os); err == nil && os.Origin != "" {
			st.Origins = append(st.Origins, os)
		}
		if st.Cookies == nil {
			st.Cookies = []*network.Cookie{}
		}
		return st, nil
	})
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	id, err := s.cfg.Resolve(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Files.WriteFile(ctx, c, id, workspacePath(a.Path), data); err != nil {
		return nil, err
	}
	return map[string]any{"path": a.Path, "cookies": len(st.Cookies), "origins": len(st.Origins)}, nil
}

// LoadState sets the cookies of a state file, and the localStorage of
// the origin the active page is on (other origins' storage can only be
// set on their pages: they are counted as skipped).
func (s *Service) LoadState(ctx context.Context, c auth.Caller, a PathArgs) (map[string]any, error) {
	if s.cfg.Files == nil {
		return nil, fault.New(fault.Unsupported, "workspace files are not available to the browser here")
	}
	id, err := s.cfg.Resolve(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	data, err := s.cfg.Files.ReadFile(ctx, c, id, workspacePath(a.Path))
	if err != nil {
		return nil, err
	}
	if len(data) > maxStateFile {
		return nil, fault.New(fault.TooLarge, "the state file is larger than 8 MiB")
	}
	var raw struct {
		Cookies []json.RawMessage `json:"cookies"`
		Origins []originState     `json:"origins"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fault.InvalidField("body.path", "the file is not a storage state (JSON with cookies and origins)")
	}
	params := make([]*network.CookieParam, 0, len(raw.Cookies))
	for _, rc := range raw.Cookies {
		var p network.CookieParam
		if err := jsonv2.Unmarshal(rc, &p); err != nil {
			return nil, fault.InvalidField("body.path", "a cookie in the file does not match the cookie shape")
		}
		if p.Expires < 0 {
			p.Expires = 0 // session cookie
		}
		params = append(params, &p)
	}
	return run(ctx, s, c, id, func(o *op) (map[string]any, error) {
		if len(params) > 0 {
			if _, err := cdproto.Call(ctx, o.b.client.Browser(), storage.SetCookies, storage.SetCookiesParams{Cookies: params}); err != nil {
				return nil, err
			}
		}
		applied, skipped := 0, 0
		for _, or := range raw.Origins {
			var ok bool
			if err := callJS(ctx, o.page(), `if (location.origin !== a.origin) return false;
for (const e of a.localStorage || []) localStorage.setItem(e.name, e.value);
return true;`, or, &ok); err != nil || !ok {
				skipped++
				continue
			}
			applied++
		}
		return map[string]any{"path": a.Path, "cookies": len(params), "origins_applied": applied, "origins_skipped": skipped}, nil
	})
}

// ExportHAR writes the request log as HAR 1.2.
func (s *Service) ExportHAR(ctx context.Context, c auth.Caller, a ExportArgs) (map[string]any, error) {
	if s.cfg.Files == nil {
		return nil, fault.New(fault.Unsupported, "workspace files are not available to the browser here")
	}
	id, err := s.cfg.Resolve(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	b := s.state(id)
	reqs := b.requestLog("", 0)
	if a.Clear {
		b.logMu.Lock()
		b.requests, b.reqByID, b.inflight = nil, map[string]*RequestEntry{}, 0
		b.logMu.Unlock()
	}
	data, err := json.MarshalIndent(harOf(reqs), "", "  ")
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Files.WriteFile(ctx, c, id, workspacePath(a.SavePath), data); err != nil {
		return nil, err
	}
	return map[string]any{"path": a.SavePath, "entries": len(reqs)}, nil
}

func harOf(reqs []RequestEntry) map[string]any {
	hdrs := func(m map[string]string) []map[string]string {
		out := []map[string]string{}
		for k, v := range m {
			out = append(out, map[string]string{"name": k, "value": v})
		}
		return out
	}
	entries := make([]map[string]any, 0, len(reqs))
	for _, r := range reqs {
		started := time.UnixMilli(int64(r.StartedAt)).UTC().Format(time.RFC3339Nano)
		entries = append(entries, map[string]any{
			"startedDateTime": started, "time": r.DurationMS,
			"request": map[string]any{"method": r.Method, "url": r.URL, "httpVersion": "HTTP/1.1", "headers": hdrs(r.RequestHeaders),
				"queryString": []any{}, "cookies": []any{}, "headersSize": -1, "bodySize": -1},
			"response": map[string]any{"status": r.Status, "statusText": r.StatusText, "httpVersion": "HTTP/1.1",
				"headers": hdrs(r.ResponseHeaders), "cookies": []any{}, "redirectURL": "", "headersSize": -1,
				"bodySize": int64(r.EncodedBytes), "content": map[string]any{"size": int64(r.EncodedBytes), "mimeType": r.MIMEType},
				"_error": r.Failed},
			"cache": map[string]any{}, "timings": map[string]any{"send": 0, "wait": r.DurationMS, "receive": 0},
		})
	}
	return map[string]any{"log": map[string]any{"version": "1.2", "creator": map[string]string{"name": "sandhold", "version": "1"},
		"pages": []any{}, "entries": entries}}
}

// CaptchaWait polls detection until no CAPTCHA is seen or time runs out.
func (s *Service) CaptchaWait(ctx context.Context, c auth.Caller, a CaptchaWaitArgs) (CaptchaWaitResult, error) {
	timeout := seconds(a.Timeout, 60*time.Second)
	poll := max(time.Duration(a.PollInterval*float64(time.Second)), 200*time.Millisecond)
	if a.PollInterval == 0 {
		poll = 2 * time.Second
	}
	return run(ctx, s, c, a.Sandbox, func(o *op) (CaptchaWaitResult, error) {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for {
			var det struct {
				Detected bool `json:"detected"`
			}
			if err := callJS(wctx, o.page(), captchaJS, nil, &det); err == nil && !det.Detected {
				return CaptchaWaitResult{Resolved: true}, nil
			}
			select {
			case <-ctx.Done():
				return CaptchaWaitResult{}, ctx.Err()
			case <-wctx.Done():
				return CaptchaWaitResult{Resolved: false}, nil
			case <-time.After(poll):
			}
		}
	})
}

// RestartBrowser restarts the browser (hard, through the runtime) or
// drops and reopens the connection (soft); tabs and logs start afresh.
func (s *Service) RestartBrowser(ctx context.Context, c auth.Caller, a RestartArgs) (map[string]any, error) {
	id, err := s.cfg.Resolve(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	mode := cmpOr(a.Mode, "hard")
	if mode == "hard" && s.cfg.Restart == nil {
		return nil, fault.New(fault.Unsupported, "restarting the browser is not available on this server")
	}
	b := s.state(id)
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fault.Wrap(fault.Timeout, ctx.Err(), "the browser is busy with another operation")
	}
	b.closeClient()
	<-b.sem
	s.mu.Lock()
	if s.browsers[id] == b {
		delete(s.browsers, id)
	}
	s.mu.Unlock()
	s.mu.Lock()
	s.noDialogs[id] = a.AllowFileSelectionDialogs != nil && !*a.AllowFileSelectionDialogs
	s.mu.Unlock()
	opts := RestartOptions{}
	if a.Locale != nil {
		opts.Locale = strings.ReplaceAll(*a.Locale, "_", "-")
	}
	if mode == "hard" {
		if err := s.cfg.Restart(ctx, c, id, opts); err != nil {
			return nil, err
		}
	}
	return run(ctx, s, c, id, func(o *op) (map[string]any, error) {
		out := map[string]any{"mode": mode, "user_agent": o.b.client.Version().UserAgent,
			"allow_file_selection_dialogs": !o.s.dialogsIntercepted(id)}
		if mode == "hard" {
			out["locale"] = opts.Locale
		}
		return out, nil
	})
}
