package browserops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	cdproto "github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/cdproto/target"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names. Where AIO's MCP server (its browser tools) has a name for
// an operation, the dispatcher name is chosen so that its MCP name
// (dots become underscores) is AIO's: browser.navigate → browser_navigate.
const (
	ToolInfo              = "browser.info"
	ToolScreenshot        = "browser.screenshot"
	ToolPageScreenshot    = "browser.page_screenshot"
	ToolNavigate          = "browser.navigate"
	ToolBack              = "browser.go_back"
	ToolForward           = "browser.go_forward"
	ToolReload            = "browser.reload"
	ToolClick             = "browser.click"
	ToolFill              = "browser.form_input_fill"
	ToolType              = "browser.type"
	ToolPressKey          = "browser.press_key"
	ToolHotKey            = "browser.hot_key"
	ToolHover             = "browser.hover"
	ToolSelect            = "browser.select"
	ToolCheck             = "browser.check"
	ToolUncheck           = "browser.uncheck"
	ToolScroll            = "browser.scroll"
	ToolScrollTo          = "browser.scroll_to"
	ToolScrollToElement   = "browser.scroll_to_element"
	ToolHTML              = "browser.get_html"
	ToolText              = "browser.get_text"
	ToolMarkdown          = "browser.get_markdown"
	ToolElements          = "browser.get_clickable_elements"
	ToolEvaluate          = "browser.evaluate"
	ToolFindText          = "browser.find_text"
	ToolWait              = "browser.wait"
	ToolTabList           = "browser.tab_list"
	ToolTabNew            = "browser.new_tab"
	ToolTabSwitch         = "browser.switch_tab"
	ToolTabClose          = "browser.close_tab"
	ToolCookiesGet        = "browser.cookies_get"
	ToolCookiesSet        = "browser.cookies_set"
	ToolCookiesClear      = "browser.cookies_clear"
	ToolConsole           = "browser.console"
	ToolConsoleExport     = "browser.console_export"
	ToolConfig            = "browser.config"
	ToolActions           = "browser.actions"
	ToolUploadFile        = "browser.upload_file"
	ToolFillForm          = "browser.fill_form"
	ToolStateSave         = "browser.state_save"
	ToolStateLoad         = "browser.state_load"
	ToolHeaders           = "browser.network_headers"
	ToolScopedHeaders     = "browser.network_scoped_headers"
	ToolRouteAdd          = "browser.network_route_add"
	ToolRouteRemove       = "browser.network_route_remove"
	ToolRequests          = "browser.network_requests"
	ToolExportHAR         = "browser.network_export_har"
	ToolCaptchaDetect     = "browser.captcha_detect"
	ToolCaptchaWait       = "browser.captcha_wait"
	ToolRestart           = "browser.restart"
	ToolProxyPAC          = "browser.proxy_pac"
	ToolRecord            = "browser.record"
	maxFindText           = 100
	maxTypeText           = 64 << 10
	maxTypeDuration       = 60 * time.Second
	maxFormItems          = 100
	maxUploadFiles        = 20
	maxCookies            = 200
	maxHotKeys            = 8
	defaultRequestsLimit  = 100
	defaultScrollAmount   = 300
	maxEvaluateAuditChars = 200
)

// On names the sandbox whose browser an operation drives.
type On struct {
	Sandbox string `json:"sandbox,omitempty" doc:"the sandbox id; empty: the caller's default sandbox"`
}

func (o On) sandboxID() string { return o.Sandbox }

type sandboxed interface{ sandboxID() string }

// Action is the answer of an operation that changes the page.
type Action struct {
	Action string `json:"action" doc:"what was done"`
	URL    string `json:"url,omitempty" doc:"the page's URL afterwards"`
	Title  string `json:"title,omitempty"`
}

// define registers one browser operation: rate-limited as a browser
// call, audited with its sandbox and target.
func define[A sandboxed, R any](ts *[]dispatch.Tool, name, desc string, risk guard.Risk,
	run func(context.Context, auth.Caller, A) (R, error), describe func(A) (string, map[string]any), hooks ...dispatch.Hooks[A, R]) {
	var h dispatch.Hooks[A, R]
	if len(hooks) > 0 {
		h = hooks[0]
	}
	spec := dispatch.Spec{Name: name, Description: desc, Risk: risk, Category: ratelimit.Browser}
	if h.Assess != nil {
		spec.RiskCeiling = guard.Dangerous
	}
	h.Describe = func(a A) dispatch.Target {
		t := dispatch.Target{Sandbox: a.sandboxID()}
		if describe != nil {
			t.Target, t.Detail = describe(a)
		}
		return t
	}
	*ts = append(*ts, dispatch.Define(spec, run, h))
}

// ---- arguments -----------------------------------------------------------

// InfoArgs asks for the browser's info.
type InfoArgs struct {
	On
	BaseURL string `json:"base_url,omitempty" doc:"the scheme and host the client reaches the server at (http://host:port); cdp_url and vnc_url are built on it. The AIO route fills it from the request."`
}

// Validate refuses a base URL that is more than a scheme and a host.
func (a InfoArgs) Validate() error {
	if a.BaseURL == "" {
		return nil
	}
	u, err := url.Parse(a.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fault.InvalidField("body.base_url", "base_url must be http(s)://host[:port]")
	}
	return nil
}

// Viewport is a width and a height.
type Viewport struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// BrowserInfo is AIO's BrowserInfoResult.
type BrowserInfo struct {
	UserAgent    string    `json:"user_agent"`
	CDPURL       string    `json:"cdp_url" doc:"the DevTools endpoint through sandhold (send the key header): Playwright's connectOverCDP takes it; Puppeteer's connect takes the webSocketDebuggerUrl of its /json/version as browserWSEndpoint (browserURL drops the path)"`
	VNCURL       string    `json:"vnc_url"`
	CDPUIURL     *string   `json:"cdp_ui_url"`
	Viewport     Viewport  `json:"viewport"`
	PageViewport *Viewport `json:"page_viewport"`
}

// ScreenshotArgs asks for a screenshot of the display (the active tab at
// the display's size) or of the page.
type ScreenshotArgs struct {
	On
	Format   string `json:"format,omitempty" enum:"png,jpg,jpeg" doc:"image format; png by default"`
	Quality  *int   `json:"quality,omitempty" minimum:"0" maximum:"100" doc:"jpeg quality"`
	FullPage bool   `json:"full_page,omitempty" doc:"page screenshots: the whole page, not only the viewport"`
}

// Validate checks the format and quality.
func (a ScreenshotArgs) Validate() error {
	switch strings.ToLower(a.Format) {
	case "", "png", "jpg", "jpeg":
	default:
		return fault.InvalidField("query.format", "format must be png, jpg or jpeg")
	}
	if a.Quality != nil && (*a.Quality < 0 || *a.Quality > 100) {
		return fault.InvalidField("query.quality", "quality must be between 0 and 100")
	}
	return nil
}

// NavigateArgs is AIO's NavigateRequest.
type NavigateArgs struct {
	On
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

// PageArgs names only the sandbox (back, forward, reload, text …).
type PageArgs struct {
	On
}

// HTMLArgs is page/html's query.
type HTMLArgs struct {
	On
	Outer bool `json:"outer,omitempty" doc:"the whole document (outerHTML of <html>) rather than the body's inner HTML"`
}

// ClickArgs is AIO's ClickRequest.
type ClickArgs struct {
	On
	Selector   *string  `json:"selector,omitempty" doc:"CSS selector"`
	Index      *int     `json:"index,omitempty" doc:"index into page/elements"`
	X          *float64 `json:"x,omitempty"`
	Y          *float64 `json:"y,omitempty"`
	Button     string   `json:"button,omitempty" enum:"left,right,middle"`
	ClickCount int      `json:"click_count,omitempty" minimum:"0" maximum:"3"`
}

// Validate checks the button and count.
func (a ClickArgs) Validate() error {
	if _, err := mouseButton(a.Button); err != nil {
		return err
	}
	if a.ClickCount < 0 || a.ClickCount > 3 {
		return fault.InvalidField("body.click_count", "click_count must be between 1 and 3")
	}
	return nil
}

// FillArgs is AIO's FillRequest.
type FillArgs struct {
	On
	Selector *string `json:"selector,omitempty"`
	Index    *int    `json:"index,omitempty"`
	Text     string  `json:"text" required:"true" maxLength:"65536"`
}

// Validate caps the text.
func (a FillArgs) Validate() error { return capText("body.text", a.Text) }

func capText(field, s string) error {
	if len(s) > maxTypeText {
		return fault.InvalidField(field, fmt.Sprintf("text is longer than %d bytes", maxTypeText))
	}
	return nil
}

// TypeArgs is AIO's TypeTextRequest.
type TypeArgs struct {
	On
	Text  string  `json:"text" required:"true" maxLength:"65536"`
	Delay float64 `json:"delay,omitempty" minimum:"0" doc:"milliseconds between characters"`
}

// Validate caps the text and the time typing takes.
func (a TypeArgs) Validate() error {
	if err := capText("body.text", a.Text); err != nil {
		return err
	}
	if a.Delay < 0 || time.Duration(a.Delay*float64(len([]rune(a.Text))))*time.Millisecond > maxTypeDuration {
		return fault.InvalidField("body.delay", "delay times the text's length must stay within 60 s")
	}
	return nil
}

// KeyArgs is AIO's KeyRequest.
type KeyArgs struct {
	On
	Key string `json:"key" required:"true" doc:"a key name (Enter, Tab, ArrowDown, F5 …), one character, or a combination like Control+a"`
}

// Validate checks the key names.
func (a KeyArgs) Validate() error {
	keys := splitCombo(a.Key)
	if len(keys) > maxHotKeys {
		return fault.InvalidField("body.key", "too many keys in one combination")
	}
	for _, k := range keys {
		if _, err := lookupKey(k); err != nil {
			return err
		}
	}
	return nil
}

// HotKeyArgs is AIO's HotKeyRequest.
type HotKeyArgs struct {
	On
	Keys []string `json:"keys" required:"true" maxItems:"8" doc:"pressed in order, released in reverse"`
}

// Validate checks the keys.
func (a HotKeyArgs) Validate() error {
	if len(a.Keys) == 0 || len(a.Keys) > maxHotKeys {
		return fault.InvalidField("body.keys", fmt.Sprintf("keys must hold 1 to %d keys", maxHotKeys))
	}
	for _, k := range a.Keys {
		if _, err := lookupKey(k); err != nil {
			return fault.InvalidField("body.keys", fault.Public(err))
		}
	}
	return nil
}

// HoverArgs is AIO's HoverRequest.
type HoverArgs struct {
	On
	Selector *string  `json:"selector,omitempty"`
	X        *float64 `json:"x,omitempty"`
	Y        *float64 `json:"y,omitempty"`
}

// SelectArgs is AIO's SelectOptionRequest.
type SelectArgs struct {
	On
	Selector string  `json:"selector" required:"true"`
	Value    *string `json:"value,omitempty"`
	Label    *string `json:"label,omitempty"`
	Index    *int    `json:"index,omitempty"`
}

// Validate wants one way to pick the option.
func (a SelectArgs) Validate() error {
	if a.Value == nil && a.Label == nil && a.Index == nil {
		return fault.InvalidField("body", "give value, label or index")
	}
	return nil
}

// SelectorArgs is AIO's CheckRequest and ScrollToElementRequest.
type SelectorArgs struct {
	On
	Selector string `json:"selector" required:"true"`
}

// ScrollArgs is AIO's ScrollRequest.
type ScrollArgs struct {
	On
	Direction string `json:"direction,omitempty" enum:"up,down,left,right" doc:"down by default"`
	Amount    *int   `json:"amount,omitempty" doc:"pixels; 300 by default"`
}

// Validate checks the direction.
func (a ScrollArgs) Validate() error {
	switch a.Direction {
	case "", "up", "down", "left", "right":
		return nil
	}
	return fault.InvalidField("body.direction", "direction must be up, down, left or right")
}

// ScrollToArgs is AIO's ScrollToRequest.
type ScrollToArgs struct {
	On
	X int `json:"x,omitempty"`
	Y int `json:"y,omitempty"`
}

// EvaluateArgs is AIO's EvaluateRequest.
type EvaluateArgs struct {
	On
	Expression string `json:"expression" required:"true" maxLength:"1048576" doc:"JavaScript evaluated in the page; a promise is awaited"`
}

// Validate caps the expression.
func (a EvaluateArgs) Validate() error {
	if strings.TrimSpace(a.Expression) == "" {
		return fault.InvalidField("body.expression", "expression is empty")
	}
	if len(a.Expression) > 1<<20 {
		return fault.InvalidField("body.expression", "expression is longer than 1 MiB")
	}
	return nil
}

// FindTextArgs is AIO's FindTextRequest.
type FindTextArgs struct {
	On
	Keyword string `json:"keyword" required:"true" minLength:"1"`
}

// Validate wants a keyword.
func (a FindTextArgs) Validate() error {
	if a.Keyword == "" {
		return fault.InvalidField("body.keyword", "keyword is empty")
	}
	return nil
}

// TextMatch is one find_text hit.
type TextMatch struct {
	Index   int            `json:"index"`
	Text    string         `json:"text"`
	Tag     string         `json:"tag"`
	Visible bool           `json:"visible"`
	Rect    map[string]int `json:"rect"`
}

// WaitArgs is AIO's WaitRequest.
type WaitArgs struct {
	On
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

// TabArgs addresses a tab by index.
type TabArgs struct {
	On
	Index int `json:"index" required:"true" minimum:"0"`
}

// NewTabArgs is AIO's CreatePageRequest.
type NewTabArgs struct {
	On
	URL *string `json:"url,omitempty"`
}

// Validate checks the URL.
func (a NewTabArgs) Validate() error {
	if a.URL == nil || *a.URL == "" {
		return nil
	}
	return checkURL("body.url", *a.URL)
}

// CookiesGetArgs is the cookies query.
type CookiesGetArgs struct {
	On
	URLs string `json:"urls,omitempty" doc:"comma-separated URLs; empty: all cookies"`
}

// CookiesSetArgs is AIO's CookieSetRequest.
type CookiesSetArgs struct {
	On
	Cookies []map[string]any `json:"cookies" required:"true" maxItems:"200" doc:"name, value and url or domain (+ path, expires, httpOnly, secure, sameSite)"`
}

// Validate caps the list and wants names.
func (a CookiesSetArgs) Validate() error {
	if len(a.Cookies) == 0 || len(a.Cookies) > maxCookies {
		return fault.InvalidField("body.cookies", fmt.Sprintf("cookies must hold 1 to %d cookies", maxCookies))
	}
	for i, c := range a.Cookies {
		if n, _ := c["name"].(string); n == "" {
			return fault.InvalidField(fmt.Sprintf("body.cookies[%d].name", i), "a cookie needs a name")
		}
		_, hasURL := c["url"].(string)
		_, hasDomain := c["domain"].(string)
		if !hasURL && !hasDomain {
			return fault.InvalidField(fmt.Sprintf("body.cookies[%d]", i), "a cookie needs a url or a domain")
		}
	}
	return nil
}

// ConsoleArgs is page/console's query.
type ConsoleArgs struct {
	On
	Clear bool `json:"clear,omitempty" doc:"empty the log after reading it"`
}

// ExportArgs writes a log to a workspace file.
type ExportArgs struct {
	On
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

// ConfigArgs is AIO's BrowserConfigRequest.
type ConfigArgs struct {
	On
	Resolution *Resolution `json:"resolution,omitempty" doc:"one of AIO's resolutions: 1920x1080, 640x480, 1360x768, 1280x720, 800x600, 1024x768, 1280x800, 1920x1200, 1280x960, 1400x1050, 1680x1050, 1280x1024, 1600x1200"`
}

// Validate allows AIO's resolutions only.
func (a ConfigArgs) Validate() error {
	if a.Resolution == nil {
		return nil
	}
	for _, r := range allowedResolutions {
		if r == *a.Resolution {
			return nil
		}
	}
	return fault.InvalidField("body.resolution", fmt.Sprintf("resolution %dx%d is not one of the allowed values", a.Resolution.Width, a.Resolution.Height))
}

// ConfigResult says what the display is now.
type ConfigResult struct {
	Resolution Resolution `json:"resolution"`
}

// ---- registration --------------------------------------------------------

// Tools are every browser operation, as dispatcher tools.
func Tools(s *Service) []dispatch.Tool {
	var ts []dispatch.Tool
	pageTools(&ts, s)
	moreTools(&ts, s)
	return ts
}

func urlTarget(u string) string {
	if len(u) > 500 {
		return u[:500] + "…"
	}
	return u
}

func selTarget(sel *string, idx *int) string {
	switch {
	case sel != nil:
		return clipMsg(*sel)
	case idx != nil:
		return fmt.Sprintf("index %d", *idx)
	}
	return ""
}

func pageTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolInfo, "The sandbox browser's user agent, display size and the cdp_url and vnc_url to reach it through sandhold", guard.Safe,
		func(ctx context.Context, c auth.Caller, a InfoArgs) (BrowserInfo, error) { return s.Info(ctx, c, a) }, nil)
	define(ts, ToolScreenshot, "Screenshot of the browser's display (the active tab at the display's size), PNG or JPEG", guard.Safe,
		func(ctx context.Context, c auth.Caller, a ScreenshotArgs) (Image, error) {
			a.FullPage = false
			return s.Screenshot(ctx, c, a)
		}, nil)
	define(ts, ToolPageScreenshot, "Screenshot of the active page (full_page: all of it)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a ScreenshotArgs) (Image, error) {
			return s.Screenshot(ctx, c, a)
		}, nil)
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
	pageOp := func(name, desc string, f func(ctx context.Context, o *op) (PageInfo, error)) {
		define(ts, name, desc, guard.Medium, func(ctx context.Context, c auth.Caller, a PageArgs) (PageInfo, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) (PageInfo, error) { return f(ctx, o) })
		}, nil)
	}
	pageOp(ToolBack, "Go back in the active tab's history", func(ctx context.Context, o *op) (PageInfo, error) { return history(ctx, o.page(), -1) })
	pageOp(ToolForward, "Go forward in the active tab's history", func(ctx context.Context, o *op) (PageInfo, error) { return history(ctx, o.page(), 1) })
	pageOp(ToolReload, "Reload the active tab", func(ctx context.Context, o *op) (PageInfo, error) { return reload(ctx, o.page()) })

	define(ts, ToolClick, "Click an element (CSS selector or index from get_clickable_elements) or a point", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ClickArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "click", func(ctx context.Context, o *op) error {
				x, y, err := point(ctx, o.page(), elementRef{a.Selector, a.Index}, a.X, a.Y)
				if err != nil {
					return err
				}
				b, _ := mouseButton(a.Button)
				return clickAt(ctx, o.page(), x, y, b, int64(max(a.ClickCount, 1)))
			})
		}, func(a ClickArgs) (string, map[string]any) { return selTarget(a.Selector, a.Index), nil })
	define(ts, ToolFill, "Clear a form field and type text into it", guard.Medium,
		func(ctx context.Context, c auth.Caller, a FillArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "fill", func(ctx context.Context, o *op) error {
				return fill(ctx, o.page(), elementRef{a.Selector, a.Index}, a.Text)
			})
		}, func(a FillArgs) (string, map[string]any) {
			// The text may be a password: its length only.
			return selTarget(a.Selector, a.Index), map[string]any{"text_chars": len([]rune(a.Text))}
		})
	define(ts, ToolType, "Type text into the focused element", guard.Medium,
		func(ctx context.Context, c auth.Caller, a TypeArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "type", func(ctx context.Context, o *op) error {
				return typeText(ctx, o.page(), a.Text, time.Duration(a.Delay*float64(time.Millisecond)))
			})
		}, func(a TypeArgs) (string, map[string]any) {
			return "", map[string]any{"text_chars": len([]rune(a.Text))}
		})
	define(ts, ToolPressKey, "Press a key (or a combination like Control+a) in the active tab", guard.Medium,
		func(ctx context.Context, c auth.Caller, a KeyArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "press_key", func(ctx context.Context, o *op) error {
				return pressCombo(ctx, o.page(), splitCombo(a.Key))
			})
		}, func(a KeyArgs) (string, map[string]any) { return clipMsg(a.Key), nil })
	define(ts, ToolHotKey, "Press keys together (pressed in order, released in reverse)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a HotKeyArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "hot_key", func(ctx context.Context, o *op) error {
				return pressCombo(ctx, o.page(), a.Keys)
			})
		}, func(a HotKeyArgs) (string, map[string]any) { return clipMsg(strings.Join(a.Keys, "+")), nil })
	define(ts, ToolHover, "Move the mouse over an element or a point", guard.Medium,
		func(ctx context.Context, c auth.Caller, a HoverArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "hover", func(ctx context.Context, o *op) error {
				x, y, err := point(ctx, o.page(), elementRef{Selector: a.Selector}, a.X, a.Y)
				if err != nil {
					return err
				}
				return mouseMove(ctx, o.page(), x, y, 0)
			})
		}, func(a HoverArgs) (string, map[string]any) { return selTarget(a.Selector, nil), nil })
	define(ts, ToolSelect, "Choose an option of a <select> by value, label or index", guard.Medium,
		func(ctx context.Context, c auth.Caller, a SelectArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "select_option", func(ctx context.Context, o *op) error {
				return callJS(ctx, o.page(), `const el = H.find({selector: a.selector});
if (el.tagName !== 'SELECT') throw new Error('the element is not a select');
const opts = Array.from(el.options);
let i = -1;
if (a.value !== null && a.value !== undefined) i = opts.findIndex(o => o.value === a.value);
else if (a.label !== null && a.label !== undefined) i = opts.findIndex(o => o.label === a.label || o.text.trim() === a.label);
else if (a.index !== null && a.index !== undefined) i = a.index < opts.length ? a.index : -1;
if (i < 0) throw new Error('no such option');
el.selectedIndex = i;
el.dispatchEvent(new Event('input', {bubbles: true}));
el.dispatchEvent(new Event('change', {bubbles: true}));`, map[string]any{"selector": a.Selector, "value": a.Value, "label": a.Label, "index": a.Index}, nil)
			})
		}, func(a SelectArgs) (string, map[string]any) { return clipMsg(a.Selector), nil })
	checkOp := func(name, desc string, want bool) {
		define(ts, name, desc, guard.Medium, func(ctx context.Context, c auth.Caller, a SelectorArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, strings.TrimPrefix(name, "browser."), func(ctx context.Context, o *op) error {
				return callJS(ctx, o.page(), `const el = H.find({selector: a.selector});
if (!('checked' in el)) throw new Error('the element is not a checkbox or radio button');
if (el.checked !== a.want) el.click();
if (el.checked !== a.want) throw new Error('the element did not change state');`, map[string]any{"selector": a.Selector, "want": want}, nil)
			})
		}, func(a SelectorArgs) (string, map[string]any) { return clipMsg(a.Selector), nil })
	}
	checkOp(ToolCheck, "Check a checkbox or radio button", true)
	checkOp(ToolUncheck, "Uncheck a checkbox", false)
	define(ts, ToolScroll, "Scroll the page up, down, left or right by an amount of pixels", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ScrollArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "scroll", func(ctx context.Context, o *op) error {
				amount := defaultScrollAmount
				if a.Amount != nil {
					amount = *a.Amount
				}
				dx, dy := 0, amount
				switch a.Direction {
				case "up":
					dy = -amount
				case "left":
					dx, dy = -amount, 0
				case "right":
					dx, dy = amount, 0
				}
				return callJS(ctx, o.page(), `window.scrollBy(a.dx, a.dy);`, map[string]int{"dx": dx, "dy": dy}, nil)
			})
		}, func(a ScrollArgs) (string, map[string]any) { return a.Direction, nil })
	define(ts, ToolScrollTo, "Scroll the page to a position", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ScrollToArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "scroll_to", func(ctx context.Context, o *op) error {
				return callJS(ctx, o.page(), `window.scrollTo(a.x, a.y);`, map[string]int{"x": a.X, "y": a.Y}, nil)
			})
		}, nil)
	define(ts, ToolScrollToElement, "Scroll an element into view", guard.Medium,
		func(ctx context.Context, c auth.Caller, a SelectorArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "scroll_to_element", func(ctx context.Context, o *op) error {
				return callJS(ctx, o.page(), `H.find({selector: a.selector}).scrollIntoView({block: 'center'});`, map[string]any{"selector": a.Selector}, nil)
			})
		}, func(a SelectorArgs) (string, map[string]any) { return clipMsg(a.Selector), nil })

	define(ts, ToolHTML, "The active page's HTML (the body's inner HTML, or the whole document with outer)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a HTMLArgs) (string, error) {
			return read[string](ctx, s, c, a.Sandbox, `return a.outer ? document.documentElement.outerHTML : (document.body ? document.body.innerHTML : '');`, map[string]bool{"outer": a.Outer})
		}, nil)
	define(ts, ToolText, "The active page's visible text", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) (string, error) {
			return read[string](ctx, s, c, a.Sandbox, `return document.body ? document.body.innerText : '';`, nil)
		}, nil)
	define(ts, ToolMarkdown, "The active page's main content as Markdown", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) (map[string]any, error) {
			return read[map[string]any](ctx, s, c, a.Sandbox, markdownJS, nil)
		}, nil)
	define(ts, ToolElements, "The interactive elements of the active page, with the index click and fill take", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) ([]map[string]any, error) {
			out, err := read[[]map[string]any](ctx, s, c, a.Sandbox, `return H.interactive().slice(0, 500).map(H.describe);`, nil)
			if out == nil && err == nil {
				out = []map[string]any{}
			}
			return out, err
		}, nil)
	define(ts, ToolEvaluate, "Run JavaScript in the active page and return its value (arbitrary script: dangerous tier)", guard.Dangerous,
		func(ctx context.Context, c auth.Caller, a EvaluateArgs) (json.RawMessage, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) (json.RawMessage, error) {
				v, err := evaluate(ctx, o.page(), a.Expression)
				if v == nil && err == nil {
					v = json.RawMessage("null")
				}
				return v, err
			})
		}, func(a EvaluateArgs) (string, map[string]any) {
			sum := sha256.Sum256([]byte(a.Expression))
			return clipAudit(a.Expression), map[string]any{"expression_bytes": len(a.Expression), "expression_sha256": hex.EncodeToString(sum[:])}
		})
	define(ts, ToolFindText, "Find text on the active page", guard.Safe,
		func(ctx context.Context, c auth.Caller, a FindTextArgs) ([]TextMatch, error) {
			out, err := read[[]TextMatch](ctx, s, c, a.Sandbox, findTextJS, map[string]any{"keyword": a.Keyword, "max": maxFindText})
			if out == nil && err == nil {
				out = []TextMatch{}
			}
			return out, err
		}, func(a FindTextArgs) (string, map[string]any) { return clipMsg(a.Keyword), nil })
	define(ts, ToolWait, "Wait for a selector, the load, a URL, network idle, a script condition, a request or response, or a time", guard.Medium,
		func(ctx context.Context, c auth.Caller, a WaitArgs) (map[string]any, error) { return s.Wait(ctx, c, a) },
		func(a WaitArgs) (string, map[string]any) { return a.Type, nil },
		dispatch.Hooks[WaitArgs, map[string]any]{Assess: func(a WaitArgs) dispatch.Assessment {
			if a.Type == "function" {
				return dispatch.Assessment{Risk: guard.Dangerous, Reasons: []string{"a function wait runs script in the page"}}
			}
			return dispatch.Assessment{Risk: guard.Medium}
		}})

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

	define(ts, ToolCookiesGet, "The browser's cookies (optionally only those for some URLs)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a CookiesGetArgs) ([]*network.Cookie, error) {
			return s.Cookies(ctx, c, a)
		}, nil)
	define(ts, ToolCookiesSet, "Set cookies in the browser", guard.Medium,
		func(ctx context.Context, c auth.Caller, a CookiesSetArgs) (Action, error) {
			return s.SetCookies(ctx, c, a)
		},
		func(a CookiesSetArgs) (string, map[string]any) { return "", map[string]any{"cookies": len(a.Cookies)} })
	define(ts, ToolCookiesClear, "Delete all of the browser's cookies", guard.Medium,
		func(ctx context.Context, c auth.Caller, a PageArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "clear_cookies", func(ctx context.Context, o *op) error {
				_, err := cdproto.Call(ctx, o.b.client.Browser(), storage.ClearCookies, storage.ClearCookiesParams{})
				return err
			})
		}, nil)
	define(ts, ToolConsole, "The console messages and uncaught exceptions of the browser's pages (the last 1000)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a ConsoleArgs) ([]ConsoleEntry, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) ([]ConsoleEntry, error) { return o.b.consoleLog(a.Clear), nil })
		}, nil)
	define(ts, ToolConsoleExport, "Write the console log to a workspace file (JSON)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ExportArgs) (map[string]any, error) {
			return s.ExportConsole(ctx, c, a)
		},
		func(a ExportArgs) (string, map[string]any) { return clipMsg(a.SavePath), nil })
	define(ts, ToolConfig, "Set the display resolution (AIO's allowed values)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ConfigArgs) (ConfigResult, error) {
			return s.Config(ctx, c, a)
		},
		func(a ConfigArgs) (string, map[string]any) {
			if a.Resolution == nil {
				return "", nil
			}
			return fmt.Sprintf("%dx%d", a.Resolution.Width, a.Resolution.Height), nil
		})
}

// act runs f on the active tab and answers where the page is after it.
func act(ctx context.Context, s *Service, c auth.Caller, sandbox, name string, f func(context.Context, *op) error) (Action, error) {
	return run(ctx, s, c, sandbox, func(o *op) (Action, error) {
		if err := f(ctx, o); err != nil {
			return Action{}, err
		}
		p, err := currentPage(ctx, o.page())
		if err != nil {
			// The action may have started a navigation that replaced the
			// context; the action itself happened.
			return Action{Action: name}, nil //nolint:nilerr // the action succeeded; only the page summary is missing
		}
		return Action{Action: name, URL: p.URL, Title: p.Title}, nil
	})
}

// read runs body in the active tab and decodes its answer as R.
func read[R any](ctx context.Context, s *Service, c auth.Caller, sandbox, body string, args any) (R, error) {
	return run(ctx, s, c, sandbox, func(o *op) (R, error) {
		var r R
		err := callJS(ctx, o.page(), body, args, &r)
		return r, err
	})
}

func clipAudit(s string) string {
	r := []rune(s)
	if len(r) > maxEvaluateAuditChars {
		return string(r[:maxEvaluateAuditChars]) + "…"
	}
	return s
}

// ---- service methods ----------------------------------------------------

// Info answers AIO's BrowserInfoResult.
func (s *Service) Info(ctx context.Context, c auth.Caller, a InfoArgs) (BrowserInfo, error) {
	return run(ctx, s, c, a.Sandbox, func(o *op) (BrowserInfo, error) {
		base := strings.TrimSuffix(cmpOr(a.BaseURL, s.cfg.PublicURL), "/")
		prefix := base + "/sandboxes/" + url.PathEscape(o.sid)
		in := BrowserInfo{UserAgent: o.b.client.Version().UserAgent, CDPURL: prefix + "/cdp", VNCURL: prefix + "/vnc/index.html"}
		res := o.viewport(ctx)
		in.Viewport = Viewport(res)
		var vp Viewport
		if err := callJS(ctx, o.page(), `return {width: innerWidth, height: innerHeight};`, nil, &vp); err == nil {
			in.PageViewport = &vp
		}
		return in, nil
	})
}

// Screenshot captures the active tab.
func (s *Service) Screenshot(ctx context.Context, c auth.Caller, a ScreenshotArgs) (Image, error) {
	return run(ctx, s, c, a.Sandbox, func(o *op) (Image, error) {
		return screenshot(ctx, o.page(), a.Format, a.Quality, a.FullPage, o.viewport(ctx))
	})
}

// Config sets the display resolution of every tab.
func (s *Service) Config(ctx context.Context, c auth.Caller, a ConfigArgs) (ConfigResult, error) {
	return run(ctx, s, c, a.Sandbox, func(o *op) (ConfigResult, error) {
		if a.Resolution != nil {
			for _, t := range o.b.tabs {
				if err := setViewport(ctx, t.session, *a.Resolution); err != nil {
					return ConfigResult{}, err
				}
			}
			o.b.resolution = *a.Resolution
			o.b.resolutionSet = true
		}
		return ConfigResult{Resolution: o.b.resolution}, nil
	})
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

// Cookies lists cookies, for some URLs or all.
func (s *Service) Cookies(ctx context.Context, c auth.Caller, a CookiesGetArgs) ([]*network.Cookie, error) {
	return run(ctx, s, c, a.Sandbox, func(o *op) ([]*network.Cookie, error) {
		var out []*network.Cookie
		if strings.TrimSpace(a.URLs) != "" {
			var urls []string
			for _, u := range strings.Split(a.URLs, ",") {
				if u = strings.TrimSpace(u); u != "" {
					urls = append(urls, u)
				}
			}
			res, err := cdproto.Call(ctx, o.page(), network.GetCookies, network.GetCookiesParams{URLs: urls})
			if err != nil {
				return nil, err
			}
			out = res.Cookies
		} else {
			res, err := cdproto.Call(ctx, o.b.client.Browser(), storage.GetCookies, storage.GetCookiesParams{})
			if err != nil {
				return nil, err
			}
			out = res.Cookies
		}
		if out == nil {
			out = []*network.Cookie{}
		}
		return out, nil
	})
}

// SetCookies sets cookies given in Playwright's (and CDP's) shape.
func (s *Service) SetCookies(ctx context.Context, c auth.Caller, a CookiesSetArgs) (Action, error) {
	params := make([]*network.CookieParam, 0, len(a.Cookies))
	for i, m := range a.Cookies {
		b, err := json.Marshal(m)
		if err != nil {
			return Action{}, fault.InvalidField(fmt.Sprintf("body.cookies[%d]", i), "the cookie is not valid JSON")
		}
		var p network.CookieParam
		if err := jsonUnmarshalV2(b, &p); err != nil {
			return Action{}, fault.InvalidField(fmt.Sprintf("body.cookies[%d]", i), "the cookie does not match the cookie shape: "+clipMsg(err.Error()))
		}
		params = append(params, &p)
	}
	return act(ctx, s, c, a.Sandbox, "set_cookies", func(ctx context.Context, o *op) error {
		_, err := cdproto.Call(ctx, o.b.client.Browser(), storage.SetCookies, storage.SetCookiesParams{Cookies: params})
		return err
	})
}

// ExportConsole writes the console log to the workspace.
func (s *Service) ExportConsole(ctx context.Context, c auth.Caller, a ExportArgs) (map[string]any, error) {
	if s.cfg.Files == nil {
		return nil, fault.New(fault.Unsupported, "workspace files are not available to the browser here")
	}
	id, err := s.cfg.Resolve(ctx, c, a.Sandbox)
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
