package aio

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/chromedp/cdproto/network"
	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/browserops"
	"github.com/sandhold/sandhold/internal/dispatch"
)

// AIO's browser namespace: every /v1/browser operation of AIO 1.9.4 is a
// row calling its browser.* tool (internal/browserops), at /v1/... (the
// caller's default sandbox) and /sandboxes/{id}/v1/....

const groupBrowser = "browser"

// BrowserRoutes mounts AIO's browser routes over d's browser.* tools.
func BrowserRoutes(s *api.Server, d *dispatch.Dispatcher) { mountAIO(s, d, groupBrowser) }

// bOn is the route's sandbox.
func bOn(r *http.Request) dispatch.On { return dispatch.On{Sandbox: chi.URLParam(r, "id")} }

// bPage is a row's tool arguments when only the sandbox matters.
func bPage(r *http.Request, _ struct{}) (browserops.PageArgs, error) {
	return browserops.PageArgs{On: bOn(r)}, nil
}

// bQueryBool reads a boolean query parameter the way FastAPI does.
func bQueryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	switch strings.ToLower(v) {
	case "":
		return false, nil
	case "1", "true", "on", "yes", "t", "y":
		return true, nil
	case "0", "false", "off", "no", "f", "n":
		return false, nil
	}
	return false, fieldError(inQuery, name, "bool_parsing", "Input should be a valid boolean, unable to interpret input")
}

// queryInt reads an optional integer query parameter.
func queryInt(r *http.Request, name string) (*int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, fieldError(inQuery, name, "int_parsing", "Input should be a valid integer, unable to parse string as an integer")
	}
	return &n, nil
}

func bQuery(names ...string) rowOpt {
	return doc(func(op *huma.Operation) { op.Parameters = append(op.Parameters, api.QueryParams(names...)...) })
}

// bAction is a page action's row: AIO's request In is the tool's A with
// the URL's sandbox.
func bAction[A any](method, path string, tool dispatch.Ref[A, browserops.Action], summary string, opts ...rowOpt) aioRoute {
	return jsonRow(groupBrowser, method, path, tool, "browser", summary, opts...)
}

// bPageInfo is a row without a body that answers where the page is.
func bPageInfo(method, path string, tool dispatch.Ref[browserops.PageArgs, browserops.PageInfo], summary string) aioRoute {
	return jsonRowAs(groupBrowser, method, path, tool, "browser", summary,
		bPage, same[struct{}, browserops.PageInfo])
}

func bTab(r *http.Request, _ struct{}) (browserops.TabArgs, error) {
	i, err := strconv.Atoi(chi.URLParam(r, "index"))
	if err != nil || i < 0 {
		return browserops.TabArgs{}, fieldError(inPath, "index", "int_parsing", "Input should be a valid integer, unable to parse string as an integer")
	}
	return browserops.TabArgs{On: bOn(r), Index: i}, nil
}

// baseURL is the scheme and host the client reached the server at (the
// edge has checked Host), so info's cdp_url and vnc_url work from the
// client's side.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// aioDisplayRows is AIO's display namespace: the headful desktop's
// recording, served by the browser runtime (mounted with the browser's
// rows).
var aioDisplayRows = []aioRoute{
	jsonRow(groupBrowser, http.MethodPost, "/v1/display/record", browser.ToolDisplayRecord, "display",
		"Record the desktop (the headful browser's virtual display) to an MP4 made inside the sandbox: start, stop, status", required("action")),
}

var aioBrowserRows = []aioRoute{
	jsonRowAs(groupBrowser, http.MethodGet, "/v1/browser/info", browserops.ToolInfo, "browser",
		"The browser's user agent and display size, and cdp_url / vnc_url through sandhold (send the key header)",
		func(r *http.Request, _ struct{}) (browserops.InfoArgs, error) {
			return browserops.InfoArgs{On: bOn(r), BaseURL: baseURL(r)}, nil
		}, same[struct{}, browserops.BrowserInfo]),
	plainRow(groupBrowser, http.MethodGet, "/v1/browser/screenshot", browserops.ToolScreenshot, "browser",
		"Screenshot of the display (the active tab at the configured resolution), PNG or JPEG", nil, screenshotRoute(browserops.ToolScreenshot, false),
		doc(imageDoc("format", "quality"))),
	plainRow(groupBrowser, http.MethodPost, "/v1/browser/actions", browserops.ToolActions, "browser",
		"Perform one of AIO's actions (MOVE_TO, CLICK, DRAG_TO, SCROLL, TYPING, HOTKEY, WAIT …)",
		reflect.TypeFor[actionResponse](), browserAction, reqType[browserops.ActionArgs]()),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/config", browserops.ToolConfig, "browser",
		"Set the display resolution (AIO's allowed values)"),

	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/page/navigate", browserops.ToolNavigate, "browser",
		"Open a URL in the active tab (the sandbox's egress rules apply); javascript: URLs are dangerous-tier", required("url")),
	bPageInfo(http.MethodPost, "/v1/browser/page/back", browserops.ToolBack, "Go back in the active tab's history"),
	bPageInfo(http.MethodPost, "/v1/browser/page/forward", browserops.ToolForward, "Go forward in the active tab's history"),
	bPageInfo(http.MethodPost, "/v1/browser/page/reload", browserops.ToolReload, "Reload the active tab"),
	bAction[browserops.ClickArgs](http.MethodPost, "/v1/browser/page/click", browserops.ToolClick, "Click an element (selector or index) or a point"),
	bAction[browserops.FillArgs](http.MethodPost, "/v1/browser/page/fill", browserops.ToolFill, "Clear a field and type text into it", required("text")),
	bAction[browserops.TypeArgs](http.MethodPost, "/v1/browser/page/type", browserops.ToolType, "Type text into the focused element", required("text")),
	bAction[browserops.KeyArgs](http.MethodPost, "/v1/browser/page/press_key", browserops.ToolPressKey, "Press a key or a combination (Control+a)", required("key")),
	bAction[browserops.HotKeyArgs](http.MethodPost, "/v1/browser/page/hot_key", browserops.ToolHotKey, "Press keys together", required("keys")),
	bAction[browserops.HoverArgs](http.MethodPost, "/v1/browser/page/hover", browserops.ToolHover, "Move the mouse over an element or a point"),
	bAction[browserops.SelectArgs](http.MethodPost, "/v1/browser/page/select_option", browserops.ToolSelect, "Choose an option of a select", required("selector")),
	bAction[browserops.SelectorArgs](http.MethodPost, "/v1/browser/page/check", browserops.ToolCheck, "Check a checkbox or radio button", required("selector")),
	bAction[browserops.SelectorArgs](http.MethodPost, "/v1/browser/page/uncheck", browserops.ToolUncheck, "Uncheck a checkbox", required("selector")),
	bAction[browserops.UploadArgs](http.MethodPost, "/v1/browser/page/upload_file", browserops.ToolUploadFile, "Set workspace files on a file input", required("selector", "files")),
	bAction[browserops.FillFormArgs](http.MethodPost, "/v1/browser/page/fill_form", browserops.ToolFillForm, "Fill several fields at once", required("items")),
	bAction[browserops.ScrollArgs](http.MethodPost, "/v1/browser/page/scroll", browserops.ToolScroll, "Scroll by an amount"),
	bAction[browserops.ScrollToArgs](http.MethodPost, "/v1/browser/page/scroll_to", browserops.ToolScrollTo, "Scroll to a position"),
	bAction[browserops.SelectorArgs](http.MethodPost, "/v1/browser/page/scroll_to_element", browserops.ToolScrollToElement, "Scroll an element into view", required("selector")),
	plainRow(groupBrowser, http.MethodGet, "/v1/browser/page/screenshot", browserops.ToolPageScreenshot, "browser",
		"Screenshot of the active page (full_page: all of it)", nil, screenshotRoute(browserops.ToolPageScreenshot, true), doc(imageDoc("full_page", "format", "quality"))),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/page/record", browserops.ToolRecord, "browser",
		"Record the active page to an MP4 made inside the sandbox (once, start, pause, resume, stop, status; default /workspace/recordings)"),
	jsonRowAs(groupBrowser, http.MethodGet, "/v1/browser/page/html", browserops.ToolHTML, "browser",
		"The active page's HTML (outer: the whole document)", func(r *http.Request, _ struct{}) (browserops.HTMLArgs, error) {
			outer, err := bQueryBool(r, "outer")
			return browserops.HTMLArgs{On: bOn(r), Outer: outer}, err
		}, same[struct{}, string], bQuery("outer")),
	jsonRowAs(groupBrowser, http.MethodGet, "/v1/browser/page/text", browserops.ToolText, "browser",
		"The active page's visible text", bPage, same[struct{}, string]),
	jsonRowAs(groupBrowser, http.MethodGet, "/v1/browser/page/markdown", browserops.ToolMarkdown, "browser",
		"The active page's main content as Markdown", bPage, same[struct{}, browserops.PageMarkdown]),
	jsonRowAs(groupBrowser, http.MethodGet, "/v1/browser/page/elements", browserops.ToolElements, "browser",
		"The interactive elements of the active page (their index is what click and fill take)", bPage, same[struct{}, []browserops.Element]),
	jsonRowAs(groupBrowser, http.MethodGet, "/v1/browser/page/console", browserops.ToolConsole, "browser",
		"The pages' console messages (clear: empty the log after reading)", func(r *http.Request, _ struct{}) (browserops.ConsoleArgs, error) {
			clear, err := bQueryBool(r, "clear")
			return browserops.ConsoleArgs{On: bOn(r), Clear: clear}, err
		}, same[struct{}, []browserops.ConsoleEntry], bQuery("clear")),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/page/console/export", browserops.ToolConsoleExport, "browser",
		"Write the console log to a workspace file", required("save_path")),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/page/evaluate", browserops.ToolEvaluate, "browser",
		"Run JavaScript in the active page (dangerous tier)", required("expression")),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/page/find_text", browserops.ToolFindText, "browser",
		"Find text on the active page", required("keyword")),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/page/wait", browserops.ToolWait, "browser",
		"Wait for a selector, the load, a URL, network idle, a script condition, a request or response, or a time", required("type")),

	jsonRowAs(groupBrowser, http.MethodGet, "/v1/browser/tabs", browserops.ToolTabList, "browser",
		"The browser's tabs", bPage, same[struct{}, []browserops.TabInfo]),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/tabs", browserops.ToolTabNew, "browser",
		"Open a tab (optionally at a URL) and make it active"),
	jsonRowAs(groupBrowser, http.MethodDelete, "/v1/browser/tabs/{index}", browserops.ToolTabClose, "browser",
		"Close a tab", bTab, same[struct{}, []browserops.TabInfo]),
	jsonRowAs(groupBrowser, http.MethodPut, "/v1/browser/tabs/{index}/activate", browserops.ToolTabSwitch, "browser",
		"Make a tab the active one", bTab, same[struct{}, []browserops.TabInfo]),

	jsonRowAs(groupBrowser, http.MethodGet, "/v1/browser/cookies", browserops.ToolCookiesGet, "browser",
		"The browser's cookies (urls: comma-separated, only those)", func(r *http.Request, _ struct{}) (browserops.CookiesGetArgs, error) {
			return browserops.CookiesGetArgs{On: bOn(r), URLs: r.URL.Query().Get("urls")}, nil
		}, same[struct{}, []*network.Cookie], bQuery("urls")),
	bAction[browserops.CookiesSetArgs](http.MethodPost, "/v1/browser/cookies", browserops.ToolCookiesSet, "Set cookies", required("cookies")),
	jsonRowAs(groupBrowser, http.MethodDelete, "/v1/browser/cookies", browserops.ToolCookiesClear, "browser",
		"Delete all cookies", bPage, same[struct{}, browserops.Action]),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/state/save", browserops.ToolStateSave, "browser",
		"Save cookies and localStorage to a workspace file (Playwright's storage state)", required("path")),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/state/load", browserops.ToolStateLoad, "browser",
		"Load cookies and localStorage from a workspace file", required("path")),

	bAction[browserops.HeadersArgs](http.MethodPost, "/v1/browser/network/headers", browserops.ToolHeaders, "Send extra headers with every request", required("headers")),
	bAction[browserops.ScopedHeadersArgs](http.MethodPost, "/v1/browser/network/scoped_headers", browserops.ToolScopedHeaders, "Send extra headers to one origin", required("origin", "headers")),
	bAction[browserops.RouteArgs](http.MethodPost, "/v1/browser/network/route", browserops.ToolRouteAdd, "Mock or abort matching requests", required("url_pattern")),
	plainRow(groupBrowser, http.MethodDelete, "/v1/browser/network/route", browserops.ToolRouteRemove, "browser",
		"Remove a network route (url_pattern in the JSON body, or ?url_pattern=)", reflect.TypeFor[api.Envelope[browserops.Action]](), routeRemove,
		reqType[browserops.RouteRemoveArgs](), required("url_pattern")),
	jsonRowAs(groupBrowser, http.MethodGet, "/v1/browser/network/requests", browserops.ToolRequests, "browser",
		"The logged network requests (filter: URL substring; limit: newest N, 100 by default)", func(r *http.Request, _ struct{}) (browserops.RequestsArgs, error) {
			limit, err := queryInt(r, "limit")
			a := browserops.RequestsArgs{On: bOn(r), Filter: r.URL.Query().Get("filter")}
			if limit != nil {
				a.Limit = *limit
			}
			return a, err
		}, same[struct{}, []browserops.RequestEntry], bQuery("filter", "limit")),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/network/export_har", browserops.ToolExportHAR, "browser",
		"Write the network log to a workspace file as HAR 1.2", required("save_path")),
	jsonRowAs(groupBrowser, http.MethodGet, "/v1/browser/captcha/detect", browserops.ToolCaptchaDetect, "browser",
		"Detect a CAPTCHA on the active page (detection only)", bPage, same[struct{}, browserops.CaptchaDetection]),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/captcha/wait", browserops.ToolCaptchaWait, "browser",
		"Wait until no CAPTCHA is detected (a person solves it)"),
	jsonRow(groupBrowser, http.MethodPost, "/v1/browser/restart", browserops.ToolRestart, "browser",
		"Restart the browser (hard) or reconnect (soft)"),
	plainRow(groupBrowser, http.MethodGet, "/v1/browser/proxy.pac", browserops.ToolProxyPAC, "browser",
		"The PAC file matching the sandbox's egress", nil, proxyPAC, doc(func(op *huma.Operation) {
			op.Responses["200"] = &huma.Response{Description: "the PAC file", Content: map[string]*huma.MediaType{
				"application/x-ns-proxy-autoconfig": {Schema: api.StringSchema}}}
		})),
}

// imageDoc documents a screenshot route: query parameters and an image.
func imageDoc(params ...string) func(*huma.Operation) {
	return func(op *huma.Operation) {
		op.Parameters = append(op.Parameters, api.QueryParams(params...)...)
		op.Responses["200"] = &huma.Response{Description: "the image", Content: map[string]*huma.MediaType{
			"image/png": {Schema: api.BinarySchema}, "image/jpeg": {Schema: api.BinarySchema}}}
	}
}

// screenshotRoute serves a screenshot as the image itself (AIO's answer),
// with its size in X-Screenshot-Width/Height.
func screenshotRoute(tool dispatch.Ref[browserops.ScreenshotArgs, browserops.Image], page bool) func(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	return func(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
		a := browserops.ScreenshotArgs{On: bOn(r), Format: r.URL.Query().Get("format")}
		var err error
		if a.Quality, err = queryInt(r, "quality"); err == nil && page {
			a.FullPage, err = bQueryBool(r, "full_page")
		}
		if err != nil {
			e.fail(w, r, rt, "", e.requestError(rt, err))
			return
		}
		img, err := tool.Call(r.Context(), e.dispatcher(), callerOf(r), a)
		if err != nil {
			e.fail(w, r, rt, "", err)
			return
		}
		w.Header().Set("Content-Type", img.MIMEType)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Screenshot-Width", strconv.Itoa(img.Width))
		w.Header().Set("X-Screenshot-Height", strconv.Itoa(img.Height))
		w.Header().Set("Content-Length", strconv.Itoa(len(img.Data)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(img.Data) // the client went away: nothing to do
	}
}

// actionResponse is AIO's ActionResponse: the envelope plus the old
// top-level status and action_performed.
type actionResponse struct {
	Success         bool                   `json:"success"`
	Message         string                 `json:"message"`
	Data            *browserops.ActionData `json:"data"`
	Hint            *string                `json:"hint"`
	Status          string                 `json:"status"`
	ActionPerformed string                 `json:"action_performed"`
}

func browserAction(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	in, err := decodeRow[browserops.ActionArgs](rt, r)
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	in.On = bOn(r)
	data, err := browserops.ToolActions.Call(r.Context(), e.dispatcher(), callerOf(r), in)
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, actionResponse{Success: true, Message: "Operation successful", Data: &data,
		Status: data.Status, ActionPerformed: data.ActionPerformed})
}

// routeRemove reads AIO's DELETE body (a JSON body on a DELETE, which the
// table's rows do not read), or ?url_pattern=.
func routeRemove(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	var a browserops.RouteRemoveArgs
	var err error
	if p := r.URL.Query().Get("url_pattern"); p != "" {
		a.URLPattern = p
	} else {
		a, err = decodeRow[browserops.RouteRemoveArgs](rt, r)
	}
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	a.On = bOn(r)
	answer(e, rt, w, r, browserops.ToolRouteRemove, a, "")
}

func proxyPAC(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	pac, err := browserops.ToolProxyPAC.Call(r.Context(), e.dispatcher(), callerOf(r), browserops.PageArgs{On: bOn(r)})
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ns-proxy-autoconfig")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(pac))
}
