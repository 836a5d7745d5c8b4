package browserops

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// InfoArgs asks for the browser's info.
type InfoArgs struct {
	dispatch.On
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
	dispatch.On
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

// ConfigArgs is AIO's BrowserConfigRequest.
type ConfigArgs struct {
	dispatch.On
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

// displayTools are the browser's info, screenshots and display size.
func displayTools(ts *[]dispatch.Tool, s *Service) {
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
