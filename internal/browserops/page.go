package browserops

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	cdproto "github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"

	"github.com/sandhold/sandhold/internal/browser/cdp"
	"github.com/sandhold/sandhold/internal/fault"
)

const (
	// maxWait caps every wait an operation takes on the caller's behalf
	// (navigate, wait, captcha/wait): a call never holds the browser
	// longer than this.
	maxWait = 120 * time.Second
	// defaultWait is AIO's 30 s.
	defaultWait = 30 * time.Second
	// settleWait bounds waiting for a history navigation or reload that
	// may come from the cache without a load event.
	settleWait = 10 * time.Second
)

// seconds turns AIO's timeout in seconds into a duration within maxWait.
func seconds(s float64, def time.Duration) time.Duration {
	if s <= 0 || math.IsNaN(s) {
		return def
	}
	d := time.Duration(s * float64(time.Second))
	return min(d, maxWait)
}

// PageInfo is where a page is after an operation.
type PageInfo struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

func currentPage(ctx context.Context, s *cdp.Session) (PageInfo, error) {
	var p PageInfo
	err := callJS(ctx, s, `return {url: location.href, title: document.title};`, nil, &p)
	return p, err
}

// allowedScheme lists what navigate and tabs/new accept. javascript: is
// accepted only because Assess rates it dangerous (it runs script, like
// evaluate); everything else (chrome:, chrome-extension:, devtools: …)
// is refused.
func checkURL(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return fault.InvalidField(field, "url must be an absolute URL (http, https, file, data or about)")
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "file", "data", "about", "javascript":
		return nil
	}
	return fault.InvalidField(field, fmt.Sprintf("url scheme %q is not allowed (http, https, file, data or about)", u.Scheme))
}

func isJavaScriptURL(raw string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(raw)), "javascript:")
}

// lifecycleName maps AIO's wait_until onto Chromium's lifecycle events.
var lifecycleName = map[string]string{"load": "load", "domcontentloaded": "DOMContentLoaded", "networkidle": "networkIdle"}

// navigate loads u in s and waits as asked.
func navigate(ctx context.Context, s *cdp.Session, u, waitUntil string, timeout time.Duration) (PageInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	events, stop := s.Subscribe("Page.lifecycleEvent")
	defer stop()
	res, err := cdproto.Call(ctx, s, page.Navigate, page.NavigateParams{URL: u})
	if err != nil {
		return PageInfo{}, err
	}
	if res.ErrorText != "" {
		// The page could not be loaded (refused, unresolvable, blocked by
		// the egress proxy): a tool-level failure, not the server's.
		return PageInfo{}, fault.New(fault.Conflict, "navigation failed: "+res.ErrorText)
	}
	want := lifecycleName[cmpOr(waitUntil, "load")]
	if want != "" && res.LoaderID != "" {
		if err := waitLifecycle(ctx, events, res.LoaderID, want); err != nil {
			return PageInfo{}, err
		}
	}
	return currentPage(ctx, s)
}

func waitLifecycle(ctx context.Context, events <-chan jsonv2.Value, loader cdproto.LoaderID, name string) error {
	for {
		select {
		case <-ctx.Done():
			return fault.Wrap(fault.Timeout, ctx.Err(), "the page did not reach "+name+" in time")
		case raw, ok := <-events:
			if !ok {
				return cdp.ErrClosed
			}
			var e page.EventLifecycleEvent
			if jsonv2.Unmarshal(raw, &e) == nil && e.LoaderID == loader && e.Name == name {
				return nil
			}
		}
	}
}

// history moves delta entries through the session history.
func history(ctx context.Context, s *cdp.Session, delta int64) (PageInfo, error) {
	h, err := cdproto.Call(ctx, s, page.GetNavigationHistory, cdproto.Empty{})
	if err != nil {
		return PageInfo{}, err
	}
	i := h.CurrentIndex + delta
	if i < 0 || i >= int64(len(h.Entries)) {
		if delta < 0 {
			return PageInfo{}, fault.New(fault.Conflict, "there is no page to go back to")
		}
		return PageInfo{}, fault.New(fault.Conflict, "there is no page to go forward to")
	}
	nav, stop := s.Subscribe("Page.frameNavigated")
	defer stop()
	same, stop2 := s.Subscribe("Page.navigatedWithinDocument")
	defer stop2()
	if _, err := cdproto.Call(ctx, s, page.NavigateToHistoryEntry, page.NavigateToHistoryEntryParams{EntryID: h.Entries[i].ID}); err != nil {
		return PageInfo{}, err
	}
	if err := settle(ctx, s, nav, same); err != nil {
		return PageInfo{}, err
	}
	return currentPage(ctx, s)
}

// settle waits for a navigation to commit (either channel) and the
// document to finish loading; a page from the back/forward cache sends
// no load event, so readiness is polled.
func settle(ctx context.Context, s *cdp.Session, chans ...<-chan jsonv2.Value) error {
	ctx, cancel := context.WithTimeout(ctx, settleWait)
	defer cancel()
	var a, b <-chan jsonv2.Value
	if len(chans) > 0 {
		a = chans[0]
	}
	if len(chans) > 1 {
		b = chans[1]
	}
	select {
	case <-a:
	case <-b:
	case <-ctx.Done():
		return fault.Wrap(fault.Timeout, ctx.Err(), "the page did not navigate in time")
	}
	return waitReady(ctx, s)
}

func waitReady(ctx context.Context, s *cdp.Session) error {
	for {
		var state string
		if err := callJS(ctx, s, `return document.readyState;`, nil, &state); err == nil && state == "complete" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fault.Wrap(fault.Timeout, ctx.Err(), "the page did not finish loading in time")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func reload(ctx context.Context, s *cdp.Session) (PageInfo, error) {
	nav, stop := s.Subscribe("Page.frameNavigated")
	defer stop()
	if _, err := cdproto.Call(ctx, s, page.Reload, page.ReloadParams{}); err != nil {
		return PageInfo{}, err
	}
	if err := settle(ctx, s, nav); err != nil {
		return PageInfo{}, err
	}
	return currentPage(ctx, s)
}

// Image is a screenshot: its bytes, type and size. MCP shows it as image
// content; the AIO route sends the bytes.
type Image struct {
	MIMEType string `json:"mime_type"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	Data     []byte `json:"data" doc:"the image, base64"`
}

// MCPImage lets internal/mcp render the answer as image content.
func (i Image) MCPImage() (string, []byte) { return i.MIMEType, i.Data }

func screenshot(ctx context.Context, s *cdp.Session, format string, quality *int, fullPage bool, vp Resolution) (Image, error) {
	p := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng}
	mime := "image/png"
	switch strings.ToLower(format) {
	case "", "png":
	case "jpg", "jpeg":
		p.Format, mime = page.CaptureScreenshotFormatJpeg, "image/jpeg"
		if quality != nil {
			q := int64(*quality)
			p.Quality = &q
		}
	case "webp":
		p.Format, mime = page.CaptureScreenshotFormatWebp, "image/webp"
	default:
		return Image{}, fault.InvalidField("query.format", "format must be png, jpg or jpeg")
	}
	w, h := vp.Width, vp.Height
	if fullPage {
		var size struct{ W, H float64 }
		if err := callJS(ctx, s, `const e = document.documentElement;
return {W: Math.max(e.scrollWidth, innerWidth), H: Math.max(e.scrollHeight, innerHeight)};`, nil, &size); err != nil {
			return Image{}, err
		}
		w, h = int(math.Ceil(size.W)), min(int(math.Ceil(size.H)), maxFullPageHeight)
		p.CaptureBeyondViewport = &yes
		p.Clip = &page.Viewport{X: 0, Y: 0, Width: float64(w), Height: float64(h), Scale: 1}
	}
	res, err := cdproto.Call(ctx, s, page.CaptureScreenshot, p)
	if err != nil {
		return Image{}, err
	}
	return Image{MIMEType: mime, Width: w, Height: h, Data: res.Data}, nil
}

// maxFullPageHeight caps a full-page screenshot (an endless page would
// otherwise make an image of any size).
const maxFullPageHeight = 16384

// elementRef addresses an element: a CSS selector, or an index into
// the interactive elements (page/elements).
type elementRef struct {
	Selector *string `json:"selector,omitempty"`
	Index    *int    `json:"index,omitempty"`
}

// point finds where to act: the centre of an element (scrolled into
// view) or the given coordinates.
func point(ctx context.Context, s *cdp.Session, ref elementRef, x, y *float64) (float64, float64, error) {
	if ref.Selector != nil && *ref.Selector != "" || ref.Index != nil {
		var p struct{ X, Y float64 }
		if err := callJS(ctx, s, `const el = H.find(a); const c = H.center(el); return {X: c.x, Y: c.y};`, ref, &p); err != nil {
			return 0, 0, err
		}
		return p.X, p.Y, nil
	}
	if x != nil && y != nil {
		return *x, *y, nil
	}
	return 0, 0, fault.InvalidField("body", "give a selector, an index, or x and y")
}

func fill(ctx context.Context, s *cdp.Session, ref elementRef, text string) error {
	if err := callJS(ctx, s, `const el = H.find(a);
el.scrollIntoView({block: 'center'});
el.focus();
if (el.isContentEditable) {
  const r = document.createRange(); r.selectNodeContents(el);
  const sel = getSelection(); sel.removeAllRanges(); sel.addRange(r);
} else if ('value' in el && el.tagName !== 'SELECT') {
  H.setValue(el, '');
} else {
  throw new Error('the element cannot be filled (use select_option for a select)');
}`, ref, nil); err != nil {
		return err
	}
	if text != "" {
		if err := insertText(ctx, s, text); err != nil {
			return err
		}
	}
	return callJS(ctx, s, `const el = document.activeElement;
if (el) el.dispatchEvent(new Event('change', {bubbles: true}));`, nil, nil)
}

func typeText(ctx context.Context, s *cdp.Session, text string, delay time.Duration) error {
	if delay <= 0 {
		return insertText(ctx, s, text)
	}
	for _, r := range text {
		if err := insertText(ctx, s, string(r)); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
	return nil
}

// TabInfo lists a tab.
type TabInfo struct {
	Index  int    `json:"index"`
	ID     string `json:"id"`
	URL    string `json:"url"`
	Title  string `json:"title"`
	Active bool   `json:"active"`
}

func (o *op) listTabs(ctx context.Context) ([]TabInfo, error) {
	res, err := cdproto.Call(ctx, o.b.client.Browser(), target.GetTargets, target.GetTargetsParams{})
	if err != nil {
		return nil, err
	}
	info := map[string][2]string{}
	for _, t := range res.TargetInfos {
		info[string(t.TargetID)] = [2]string{t.URL, t.Title}
	}
	out := make([]TabInfo, 0, len(o.b.tabs))
	for i, t := range o.b.tabs {
		in := info[string(t.id)]
		out = append(out, TabInfo{Index: i, ID: string(t.id), URL: in[0], Title: in[1], Active: i == o.b.active})
	}
	return out, nil
}
