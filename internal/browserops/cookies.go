package browserops

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	cdproto "github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/storage"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

func jsonUnmarshalV2(b []byte, v any) error { return jsonv2.Unmarshal(b, v) }

// CookiesGetArgs is the cookies query.
type CookiesGetArgs struct {
	dispatch.On
	URLs string `json:"urls,omitempty" doc:"comma-separated URLs; empty: all cookies"`
}

// CookiesSetArgs is AIO's CookieSetRequest.
type CookiesSetArgs struct {
	dispatch.On
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

// cookieTools read, set and clear the browser's cookies.
func cookieTools(ts *[]dispatch.Tool, s *Service) {
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
