package browserops

import (
	"context"
	"fmt"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
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

// PageArgs names only the sandbox (back, forward, reload, text …).
type PageArgs struct {
	On
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
