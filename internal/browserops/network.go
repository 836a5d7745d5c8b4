package browserops

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	cdproto "github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser/cdp"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

const (
	// maxRoutes caps the network routes of one browser.
	maxRoutes = 100
	// maxRouteBody caps a mocked response body.
	maxRouteBody = 1 << 20
)

// HeadersArgs is AIO's HeadersRequest.
type HeadersArgs struct {
	dispatch.On
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
	dispatch.On
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
	dispatch.On
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
	dispatch.On
	URLPattern string `json:"url_pattern" required:"true"`
}

// RequestsArgs is network/requests's query.
type RequestsArgs struct {
	dispatch.On
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

// networkTools shape the browser's requests (extra headers, mocked or
// aborted routes), read the request log, export it as HAR and answer the
// PAC file of the sandbox's egress.
func networkTools(ts *[]dispatch.Tool, s *Service) {
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
	define(ts, ToolProxyPAC, "The PAC file matching the sandbox's egress (its allow-list proxy in proxy mode)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) (string, error) { return s.ProxyPAC(ctx, c, a) }, nil)
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

// ExportHAR writes the request log as HAR 1.2.
func (s *Service) ExportHAR(ctx context.Context, c auth.Caller, a ExportArgs) (map[string]any, error) {
	id, err := s.filesFor(ctx, c, a.Sandbox)
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
