package browserops

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names. Where AIO's MCP server (its browser tools) has a name for
// an operation, the dispatcher name is chosen so that its MCP name
// (dots become underscores) is AIO's: browser.navigate → browser_navigate.
var (
	ToolInfo            = dispatch.Ref[InfoArgs, BrowserInfo]("browser.info")
	ToolScreenshot      = dispatch.Ref[ScreenshotArgs, Image]("browser.screenshot")
	ToolPageScreenshot  = dispatch.Ref[ScreenshotArgs, Image]("browser.page_screenshot")
	ToolNavigate        = dispatch.Ref[NavigateArgs, PageInfo]("browser.navigate")
	ToolBack            = dispatch.Ref[PageArgs, PageInfo]("browser.go_back")
	ToolForward         = dispatch.Ref[PageArgs, PageInfo]("browser.go_forward")
	ToolReload          = dispatch.Ref[PageArgs, PageInfo]("browser.reload")
	ToolClick           = dispatch.Ref[ClickArgs, Action]("browser.click")
	ToolFill            = dispatch.Ref[FillArgs, Action]("browser.form_input_fill")
	ToolType            = dispatch.Ref[TypeArgs, Action]("browser.type")
	ToolPressKey        = dispatch.Ref[KeyArgs, Action]("browser.press_key")
	ToolHotKey          = dispatch.Ref[HotKeyArgs, Action]("browser.hot_key")
	ToolHover           = dispatch.Ref[HoverArgs, Action]("browser.hover")
	ToolSelect          = dispatch.Ref[SelectArgs, Action]("browser.select")
	ToolCheck           = dispatch.Ref[SelectorArgs, Action]("browser.check")
	ToolUncheck         = dispatch.Ref[SelectorArgs, Action]("browser.uncheck")
	ToolScroll          = dispatch.Ref[ScrollArgs, Action]("browser.scroll")
	ToolScrollTo        = dispatch.Ref[ScrollToArgs, Action]("browser.scroll_to")
	ToolScrollToElement = dispatch.Ref[SelectorArgs, Action]("browser.scroll_to_element")
	ToolHTML            = dispatch.Ref[HTMLArgs, string]("browser.get_html")
	ToolText            = dispatch.Ref[PageArgs, string]("browser.get_text")
	ToolMarkdown        = dispatch.Ref[PageArgs, PageMarkdown]("browser.get_markdown")
	ToolElements        = dispatch.Ref[PageArgs, []Element]("browser.get_clickable_elements")
	ToolEvaluate        = dispatch.Ref[EvaluateArgs, json.RawMessage]("browser.evaluate")
	ToolFindText        = dispatch.Ref[FindTextArgs, []TextMatch]("browser.find_text")
	ToolWait            = dispatch.Ref[WaitArgs, map[string]any]("browser.wait")
	ToolTabList         = dispatch.Ref[PageArgs, []TabInfo]("browser.tab_list")
	ToolTabNew          = dispatch.Ref[NewTabArgs, []TabInfo]("browser.new_tab")
	ToolTabSwitch       = dispatch.Ref[TabArgs, []TabInfo]("browser.switch_tab")
	ToolTabClose        = dispatch.Ref[TabArgs, []TabInfo]("browser.close_tab")
	ToolCookiesGet      = dispatch.Ref[CookiesGetArgs, []*network.Cookie]("browser.cookies_get")
	ToolCookiesSet      = dispatch.Ref[CookiesSetArgs, Action]("browser.cookies_set")
	ToolCookiesClear    = dispatch.Ref[PageArgs, Action]("browser.cookies_clear")
	ToolConsole         = dispatch.Ref[ConsoleArgs, []ConsoleEntry]("browser.console")
	ToolConsoleExport   = dispatch.Ref[ExportArgs, map[string]any]("browser.console_export")
	ToolConfig          = dispatch.Ref[ConfigArgs, ConfigResult]("browser.config")
	ToolActions         = dispatch.Ref[ActionArgs, ActionData]("browser.actions")
	ToolUploadFile      = dispatch.Ref[UploadArgs, Action]("browser.upload_file")
	ToolFillForm        = dispatch.Ref[FillFormArgs, Action]("browser.fill_form")
	ToolStateSave       = dispatch.Ref[PathArgs, map[string]any]("browser.state_save")
	ToolStateLoad       = dispatch.Ref[PathArgs, map[string]any]("browser.state_load")
	ToolHeaders         = dispatch.Ref[HeadersArgs, Action]("browser.network_headers")
	ToolScopedHeaders   = dispatch.Ref[ScopedHeadersArgs, Action]("browser.network_scoped_headers")
	ToolRouteAdd        = dispatch.Ref[RouteArgs, Action]("browser.network_route_add")
	ToolRouteRemove     = dispatch.Ref[RouteRemoveArgs, Action]("browser.network_route_remove")
	ToolRequests        = dispatch.Ref[RequestsArgs, []RequestEntry]("browser.network_requests")
	ToolExportHAR       = dispatch.Ref[ExportArgs, map[string]any]("browser.network_export_har")
	ToolCaptchaDetect   = dispatch.Ref[PageArgs, CaptchaDetection]("browser.captcha_detect")
	ToolCaptchaWait     = dispatch.Ref[CaptchaWaitArgs, CaptchaWaitResult]("browser.captcha_wait")
	ToolRestart         = dispatch.Ref[RestartArgs, map[string]any]("browser.restart")
	ToolProxyPAC        = dispatch.Ref[PageArgs, string]("browser.proxy_pac")
	ToolRecord          = dispatch.Ref[RecordArgs, map[string]any]("browser.record")
)

// Limits of the operations' arguments and answers.
const (
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

// sandboxed is an operation's arguments: they embed dispatch.On, naming
// the sandbox whose browser the operation drives.
type sandboxed interface{ SandboxID() string }

// Action is the answer of an operation that changes the page.
type Action struct {
	Action string `json:"action" doc:"what was done"`
	URL    string `json:"url,omitempty" doc:"the page's URL afterwards"`
	Title  string `json:"title,omitempty"`
}

// define registers one browser operation: rate-limited as a browser
// call, audited with its sandbox and target.
func define[A sandboxed, R any](ts *[]dispatch.Tool, name dispatch.Ref[A, R], desc string, risk guard.Risk,
	run func(context.Context, auth.Caller, A) (R, error), describe func(A) (string, map[string]any), hooks ...dispatch.Hooks[A, R]) {
	var h dispatch.Hooks[A, R]
	if len(hooks) > 0 {
		h = hooks[0]
	}
	spec := dispatch.Spec{Description: desc, Risk: risk, Category: ratelimit.Browser}
	if h.Assess != nil {
		spec.RiskCeiling = guard.Dangerous
	}
	h.Describe = func(a A) dispatch.Target {
		t := dispatch.Target{Sandbox: a.SandboxID()}
		if describe != nil {
			t.Target, t.Detail = describe(a)
		}
		return t
	}
	*ts = append(*ts, dispatch.Define(name, spec, run, h))
}

// PageArgs names only the sandbox (back, forward, reload, text …).
type PageArgs struct {
	dispatch.On
}

// Tools are every browser operation, as dispatcher tools, one subject
// (and one file) at a time.
func Tools(s *Service) []dispatch.Tool {
	var ts []dispatch.Tool
	for _, add := range []func(*[]dispatch.Tool, *Service){
		displayTools, navigateTools, interactTools, contentTools, waitTools, tabTools,
		cookieTools, consoleTools, actionTools, formTools, stateTools, networkTools,
		captchaTools, restartTools, recordTools,
	} {
		add(&ts, s)
	}
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
