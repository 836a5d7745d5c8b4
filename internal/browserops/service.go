// Package browserops is AIO Sandbox's browser API (/v1/browser/*) as
// dispatcher tools: each operation drives the Chromium that runs inside
// a sandbox, over the DevTools protocol, through a connection the
// runtime opens for the caller (Opener). The package never dials a
// browser itself and never resolves a sandbox path on the host.
//
// What it stops: an agent reaching another key's browser (every call
// resolves its sandbox for the caller first, and the Opener scopes the
// connection again); JavaScript smuggled in as a "navigation" (a
// javascript: URL is rated like evaluate, the dangerous tier); a page
// that floods the server (console and request logs are bounded rings,
// protocol messages capped by internal/browser/cdp); one caller's
// operation interleaving with another's input on the same page
// (operations on one sandbox's browser run one at a time). What it does
// not stop: what a page does inside the browser — the sandbox (its
// namespaces, seccomp, landlock and egress proxy) is the boundary.
package browserops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	cdproto "github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser/cdp"
	"github.com/sandhold/sandhold/internal/fault"
)

// Opener opens a fresh connection to the DevTools HTTP/WebSocket port of
// the browser of sandbox sandboxID, starting the browser if it is not
// running. It checks that c may use the sandbox.
type Opener func(ctx context.Context, c auth.Caller, sandboxID string) (net.Conn, error)

// Resolver turns the sandbox a call names ("" = the caller's default
// sandbox) into its id, refusing sandboxes the caller may not see.
type Resolver func(ctx context.Context, c auth.Caller, id string) (string, error)

// Restarter restarts a sandbox's browser process (the runtime's restart)
// with opts.
type Restarter func(ctx context.Context, c auth.Caller, sandboxID string, opts RestartOptions) error

// Files reads and writes files of a sandbox's workspace for the caller,
// under the workspace's policy (sensitive paths, size caps, quota). Paths
// are the sandbox's view (relative ones are under /workspace).
type Files interface {
	ReadFile(ctx context.Context, c auth.Caller, sandboxID, path string) ([]byte, error)
	WriteFile(ctx context.Context, c auth.Caller, sandboxID, path string, data []byte) error
}

// Config is what the service needs from the daemon.
type Config struct {
	Open    Opener
	Resolve Resolver
	// Restart may be nil: restart then answers unsupported.
	Restart Restarter
	// Files may be nil: operations that read or write the workspace
	// then answer unsupported.
	Files Files
	// Network may be nil: it says a sandbox's egress mode (none, proxy,
	// host) for proxy.pac, which then answers unsupported.
	Network func(ctx context.Context, c auth.Caller, sandboxID string) (string, error)
	// Encode may be nil: page recording then answers unsupported.
	Encode Encode
	// PublicURL is the server's URL as clients reach it
	// ("http://127.0.0.1:8080"), for info's cdp_url and vnc_url when
	// the call does not say which host it came in on.
	PublicURL string
	Log       *slog.Logger
}

const (
	// maxConsole and maxRequests bound the per-browser logs a page can
	// fill (a page can log in a loop).
	maxConsole  = 1000
	maxRequests = 1000
	// maxTabs caps the tabs one browser may hold (each is a renderer).
	maxTabs = 32
	// dialTimeout bounds connecting to a browser (the runtime may start
	// it first: Chromium's cold start is a few seconds).
	dialTimeout = 45 * time.Second
	// attachTimeout bounds preparing one tab (a tab that is closing
	// never answers).
	attachTimeout = 15 * time.Second
	// attachRetries bounds the fresh connections tried when the DevTools
	// connection ends while attaching; attachBackoff is the pause before
	// the first (times the try number).
	attachRetries = 2
	attachBackoff = 250 * time.Millisecond
)

// Resolution is a display size.
type Resolution struct {
	Width  int `json:"width" doc:"pixels" minimum:"1"`
	Height int `json:"height" doc:"pixels" minimum:"1"`
}

// allowedResolutions are AIO's (BrowserConfigRequest).
var allowedResolutions = []Resolution{
	{1920, 1080}, {640, 480}, {1360, 768}, {1280, 720}, {800, 600}, {1024, 768}, {1280, 800},
	{1920, 1200}, {1280, 960}, {1400, 1050}, {1680, 1050}, {1280, 1024}, {1600, 1200},
}

// defaultResolution is the display size of a fresh browser.
var defaultResolution = Resolution{1280, 720}

// Service drives the browsers of all sandboxes.
type Service struct {
	cfg Config
	log *slog.Logger

	// mu guards browsers and noDialogs.
	mu       sync.Mutex
	browsers map[string]*browserState
	// noDialogs are the sandboxes whose last restart said
	// allow_file_selection_dialogs: false.
	noDialogs map[string]bool
}

// dialogsIntercepted reports whether sandbox id's tabs intercept file
// choosers.
func (s *Service) dialogsIntercepted(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noDialogs[id]
}

// New returns a service; Config.Open and Config.Resolve are required.
func New(cfg Config) *Service {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: log, browsers: make(map[string]*browserState), noDialogs: make(map[string]bool)}
}

// Close ends every browser connection (the browsers keep running; they
// belong to their sandboxes).
func (s *Service) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, b := range s.browsers {
		b.closeClient()
		delete(s.browsers, id)
	}
}

// Forget drops the state kept for a sandbox (deleted, stopped).
func (s *Service) Forget(sandboxID string) {
	s.mu.Lock()
	b := s.browsers[sandboxID]
	delete(s.browsers, sandboxID)
	delete(s.noDialogs, sandboxID)
	s.mu.Unlock()
	if b != nil {
		b.closeClient()
	}
}

// browserState is what the service keeps per sandbox browser.
type browserState struct {
	sandbox string
	// sem serialises operations on this browser (one slot).
	sem chan struct{}

	// The fields below are used only while holding sem.
	client     *cdp.Client
	tabs       []*tab
	active     int
	resolution Resolution
	// resolutionSet says a caller chose resolution (config); headful
	// says the connected browser has a window (not HeadlessChrome).
	// A headful browser's tabs keep their window's size unless a caller
	// chose one: a person on the desktop sees the page fill the window.
	resolutionSet bool
	headful       bool
	headers       map[string]string
	// closed are tabs closed by an operation that the browser may still
	// list for a moment; they are never attached again.
	closed map[target.ID]bool
	// mouseX, mouseY are where actions left the mouse.
	mouseX, mouseY float64

	// rules are the network routes and scoped headers (own lock: read by
	// the goroutines answering intercepted requests).
	rules netRules

	// logMu guards the logs, filled by the event reader.
	logMu    sync.Mutex
	console  []ConsoleEntry
	requests []*RequestEntry
	reqByID  map[string]*RequestEntry
	inflight int
	sessions map[string]string // session id → target id, for the logs

	// recMu guards rec, the page recording (running or the last one),
	// which outlives the operations (record.go).
	recMu sync.Mutex
	rec   *pageRecording

	// downloads is the download log and downloadDir where they go
	// (download.go); both under logMu.
	downloads   []*Download
	downloadDir string
}

type tab struct {
	id      target.ID
	session *cdp.Session
}

func (s *Service) state(sandbox string) *browserState {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.browsers[sandbox]
	if b == nil {
		b = &browserState{sandbox: sandbox, sem: make(chan struct{}, 1), resolution: defaultResolution,
			reqByID: make(map[string]*RequestEntry), sessions: make(map[string]string)}
		s.browsers[sandbox] = b
	}
	return b
}

// op is one operation's hold on a sandbox's browser.
type op struct {
	s   *Service
	c   auth.Caller
	b   *browserState
	sid string
}

// acquire resolves the sandbox for the caller, waits for its browser's
// slot and connects when needed. Release with op.release.
func (s *Service) acquire(ctx context.Context, c auth.Caller, sandbox string) (*op, error) {
	id, err := s.cfg.Resolve(ctx, c, sandbox)
	if err != nil {
		return nil, err
	}
	b := s.state(id)
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fault.Wrap(fault.Timeout, ctx.Err(), "the browser is busy with another operation")
	}
	o := &op{s: s, c: c, b: b, sid: id}
	err = o.connect(ctx)
	for try := 1; try <= attachRetries && endedWhileAttaching(err) && ctx.Err() == nil; try++ {
		// DevTools is seen to close or reset its connection right after
		// the browser starts or thaws: attach again over a fresh one.
		s.log.Warn("browser connection ended while attaching; reconnecting", "sandbox", id, "try", try, "err", err)
		b.closeClient()
		t := time.NewTimer(time.Duration(try) * attachBackoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		if ctx.Err() != nil {
			break
		}
		err = o.connect(ctx)
	}
	if err != nil {
		err = o.public(err)
		o.release()
		return nil, err
	}
	return o, nil
}

// endedWhileAttaching reports whether connect failed because the DevTools
// connection ended (not a dial that failed: that one has waited already).
func endedWhileAttaching(err error) bool {
	var fe *fault.Error
	return err != nil && !errors.As(err, &fe) && errors.Is(err, cdp.ErrClosed)
}

func (o *op) release() { <-o.b.sem }

// run is the shape of every operation: acquire, f on the active tab,
// release; a connection that died during f is dropped so the next call
// reconnects.
func run[R any](ctx context.Context, s *Service, c auth.Caller, sandbox string, f func(*op) (R, error)) (R, error) {
	o, err := s.acquire(ctx, c, sandbox)
	if err != nil {
		var zero R
		return zero, err
	}
	defer o.release()
	r, err := f(o)
	if err != nil {
		return r, o.public(err)
	}
	return r, nil
}

// public turns an error into one a client may see: faults pass, a closed
// connection is unavailable, a browser error keeps its message (the
// browser's words about the caller's page, not the server's), anything
// else is internal (detail in the log).
func (o *op) public(err error) error {
	var fe *fault.Error
	var ce *cdp.Error
	switch {
	case errors.As(err, &fe):
		return err
	case errors.Is(err, cdp.ErrClosed):
		o.b.closeClient()
		return fault.Wrap(fault.Unavailable, err, "the browser connection ended; retry (the browser may be restarting)")
	case errors.Is(err, context.DeadlineExceeded):
		return fault.Wrap(fault.Timeout, err, "the browser did not answer in time")
	case errors.Is(err, context.Canceled):
		return fault.Wrap(fault.Timeout, err, "the operation was cancelled")
	case errors.As(err, &ce):
		// The browser refused the command for the page's state (no such
		// node, a navigation in progress): a tool-level failure.
		return fault.Wrap(fault.Conflict, err, "browser: "+ce.Message)
	}
	o.s.log.Error("browser operation", "sandbox", o.sid, "err", err)
	return fault.Wrap(fault.Internal, err, "browser operation failed")
}

func (b *browserState) closeClient() {
	if b.client != nil {
		_ = b.client.Close()
		b.client = nil
	}
	b.tabs = nil
	b.active = 0
}

// connect makes sure the browser connection is open and the tab list
// known.
func (o *op) connect(ctx context.Context) error {
	b := o.b
	if b.client != nil {
		select {
		case <-b.client.Done():
			b.closeClient()
		default:
			return o.refreshTabs(ctx)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c := o.c
	client, err := cdp.Dial(dctx, func(ctx context.Context) (net.Conn, error) { return o.s.cfg.Open(ctx, c, o.sid) })
	if err != nil {
		var fe *fault.Error
		if errors.As(err, &fe) {
			return err
		}
		o.s.log.Warn("browser connect", "sandbox", o.sid, "err", err)
		return fault.Wrap(fault.Unavailable, err, "the sandbox's browser is not reachable")
	}
	client.OnEvent(func(session, method string, params jsonv2.Value) {
		switch method {
		case "Fetch.requestPaused":
			// Answering calls the browser: not on the reader goroutine.
			go b.onPaused(client, session, params)
			return
		case "Page.screencastFrame":
			go b.onFrame(client, session, params)
			return
		case "Browser.downloadWillBegin", "Browser.downloadProgress":
			b.onDownload(method, params)
			return
		}
		b.onEvent(session, method, params)
	})
	b.client = client
	b.tabs = nil
	b.active = 0
	b.headful = !strings.Contains(client.Version().UserAgent, "HeadlessChrome")
	if err := o.allowDownloads(ctx); err != nil {
		return err
	}
	return o.refreshTabs(ctx)
}

// refreshTabs reconciles the tab list with the browser's page targets
// (pages opened by a page, closed by one), attaching to new ones.
func (o *op) refreshTabs(ctx context.Context) error {
	b := o.b
	res, err := cdproto.Call(ctx, b.client.Browser(), target.GetTargets, target.GetTargetsParams{})
	if err != nil {
		return err
	}
	live := map[target.ID]bool{}
	var order []target.ID
	for _, ti := range res.TargetInfos {
		if ti.Type == "page" {
			live[ti.TargetID] = true
			order = append(order, ti.TargetID)
		}
	}
	var activeID target.ID
	if b.active < len(b.tabs) {
		activeID = b.tabs[b.active].id
	}
	kept := b.tabs[:0]
	known := map[target.ID]bool{}
	for _, t := range b.tabs {
		if live[t.id] {
			kept = append(kept, t)
			known[t.id] = true
		}
	}
	b.tabs = kept
	for _, id := range order {
		if known[id] || b.closed[id] || len(b.tabs) >= maxTabs {
			continue
		}
		t, err := o.attach(ctx, id)
		if err != nil {
			return err
		}
		b.tabs = append(b.tabs, t)
	}
	if len(b.tabs) == 0 {
		created, err := cdproto.Call(ctx, b.client.Browser(), target.CreateTarget, target.CreateTargetParams{URL: "about:blank"})
		if err != nil {
			return err
		}
		t, err := o.attach(ctx, created.TargetID)
		if err != nil {
			return err
		}
		b.tabs = append(b.tabs, t)
	}
	b.active = 0
	for i, t := range b.tabs {
		if t.id == activeID {
			b.active = i
		}
	}
	return nil
}

var yes = true

// attach attaches to a page target as a flattened session and turns on
// what the operations rely on: page and runtime events (console), the
// network log, lifecycle events (network idle), the display size and the
// extra headers.
func (o *op) attach(ctx context.Context, id target.ID) (*tab, error) {
	b := o.b
	ctx, cancel := context.WithTimeout(ctx, attachTimeout)
	defer cancel()
	att, err := cdproto.Call(ctx, b.client.Browser(), target.AttachToTarget, target.AttachToTargetParams{TargetID: id, Flatten: &yes})
	if err != nil {
		return nil, err
	}
	sess := b.client.Session(string(att.SessionID))
	b.logMu.Lock()
	b.sessions[string(att.SessionID)] = string(id)
	b.logMu.Unlock()
	steps := []func() error{
		func() error { _, err := cdproto.Call(ctx, sess, page.Enable, page.EnableParams{}); return err },
		func() error {
			_, err := cdproto.Call(ctx, sess, page.SetLifecycleEventsEnabled, page.SetLifecycleEventsEnabledParams{Enabled: true})
			return err
		},
		func() error { _, err := cdproto.Call(ctx, sess, runtime.Enable, cdproto.Empty{}); return err },
		func() error { _, err := cdproto.Call(ctx, sess, network.Enable, network.EnableParams{}); return err },
	}
	if b.overridesViewport() {
		steps = append(steps, func() error { return setViewport(ctx, sess, b.resolution) })
	}
	if len(b.headers) > 0 {
		steps = append(steps, func() error { return setHeaders(ctx, sess, b.headers) })
	}
	if o.s.dialogsIntercepted(b.sandbox) {
		// allow_file_selection_dialogs false: the chooser is intercepted
		// and nobody answers it, so no picker opens.
		steps = append(steps, func() error {
			_, err := cdproto.Call(ctx, sess, page.SetInterceptFileChooserDialog, page.SetInterceptFileChooserDialogParams{Enabled: true})
			return err
		})
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return nil, fmt.Errorf("prepare tab: %w", err)
		}
	}
	if b.rules.active() {
		if err := o.applyRoutes(ctx, sess); err != nil {
			return nil, err
		}
	}
	return &tab{id: id, session: sess}, nil
}

// overridesViewport says whether tabs get the resolution as a viewport
// override: always in a headless browser, in a headful one only when a
// caller chose it (otherwise the page fills the window).
func (b *browserState) overridesViewport() bool { return !b.headful || b.resolutionSet }

// viewport is the active tab's display size: the resolution when it is
// the override, else the page's window as the page sees it.
func (o *op) viewport(ctx context.Context) Resolution {
	if o.b.overridesViewport() {
		return o.b.resolution
	}
	var vp Viewport
	if err := callJS(ctx, o.page(), `return {width: innerWidth, height: innerHeight};`, nil, &vp); err != nil || vp.Width < 1 || vp.Height < 1 {
		return o.b.resolution
	}
	return Resolution(vp)
}

func setViewport(ctx context.Context, s *cdp.Session, r Resolution) error {
	_, err := cdproto.Call(ctx, s, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width: int64(r.Width), Height: int64(r.Height), DeviceScaleFactor: 1,
		ScreenWidth: int64(r.Width), ScreenHeight: int64(r.Height)})
	return err
}

func setHeaders(ctx context.Context, s *cdp.Session, h map[string]string) error {
	hs := network.Headers{}
	for k, v := range h {
		hs[k] = v
	}
	_, err := cdproto.Call(ctx, s, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: hs})
	return err
}

// page is the active tab's session.
func (o *op) page() *cdp.Session { return o.b.tabs[o.b.active].session }

// errNoFiles: this server gives the browser no workspace files.
func errNoFiles() error {
	return fault.New(fault.Unsupported, "workspace files are not available to the browser here")
}

// filesFor resolves the sandbox whose workspace files an operation reads
// or writes, refusing when this server gives the browser none.
func (s *Service) filesFor(ctx context.Context, c auth.Caller, sandbox string) (string, error) {
	if s.cfg.Files == nil {
		return "", errNoFiles()
	}
	return s.cfg.Resolve(ctx, c, sandbox)
}
