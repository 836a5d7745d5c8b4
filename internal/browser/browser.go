package browser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser/cdp"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Caps and defaults with their reasons.
const (
	// chromiumPath is Debian's browser binary (the /usr/bin/chromium
	// wrapper script reads /etc/chromium.d, which a sandbox's synthetic
	// /etc does not have).
	chromiumPath = "/usr/lib/chromium/chromium"
	xvfbPath     = "/usr/bin/Xvfb"
	x11vncPath   = "/usr/bin/x11vnc"
	// profileDir is the browser's profile, on the sandbox's /tmp: a fresh
	// profile per start, never mixed into the workspace.
	profileDir = "/tmp/.sandhold-browser"
	// defaultStartTimeout bounds a cold start to the first DevTools answer
	// (about 1 s on an idle host; a loaded 2-core host takes many more).
	defaultStartTimeout = 60 * time.Second
	// pollEvery is how often a starting browser's port is tried.
	pollEvery = 50 * time.Millisecond
	// browserPids is what a browser needs of a pids limit, and the
	// allowance it brings with it (sandbox.GrantPids) into a sandbox whose
	// own limit is smaller: Chromium 156, multi-process, is 79 threads at
	// rest and about 9 more per browser context with a page (124 with six,
	// measured 2026-12-06), so 192 holds a dozen contexts and a
	// recording's encoder; the sandbox's commands keep their own limit
	// beside it.
	browserPids = 192
	// processMode is what Status reports: the browser runs as Chromium's
	// usual tree of processes.
	processMode = "multi-process"
	// headfulExtraPids is what Xvfb and x11vnc add.
	headfulExtraPids = 8
	// stderrTail is how much of the browser's last output is kept for the
	// log when it dies.
	stderrTail = 8 << 10
	// browserCPU is RLIMIT_CPU of the browser's processes: it runs for
	// the sandbox's life, so the per-execution CPU limit does not fit;
	// this only ends a browser that has burnt an hour of CPU.
	browserCPU = time.Hour
	// Display is the virtual display of headful mode, and its size.
	display       = ":99"
	DefaultWidth  = 1280
	DefaultHeight = 1024
)

// Options choose how a sandbox's browser runs.
type Options struct {
	// Headful runs Chromium on a virtual display (Xvfb) with a VNC
	// server (x11vnc) for human takeover; default headless.
	Headful bool
	// Width and Height of the window or virtual display (0: default).
	Width, Height int
	// Locale is the browser's UI language and Accept-Language (--lang,
	// --accept-lang), a checked language tag; "" the default.
	Locale string
}

// Status describes a sandbox's browser.
type Status struct {
	Running bool   `json:"running"`
	Headful bool   `json:"headful"`
	Mode    string `json:"process_mode,omitempty"` // always multi-process (processMode)
	Width   int    `json:"width,omitempty"`
	Height  int    `json:"height,omitempty"`
	Version string `json:"version,omitempty"`
	// Started is when the running browser answered first.
	Started time.Time `json:"started,omitzero"`
	// LastExit says why the previous browser ended, if it did.
	LastExit string `json:"last_exit,omitempty"`
}

// Config sets the manager up.
type Config struct {
	// StartTimeout bounds a start (0: 30 s).
	StartTimeout time.Duration
	Log          *slog.Logger
}

// Manager runs one browser per sandbox.
type Manager struct {
	sb  *sandbox.Manager
	cfg Config

	// mu guards byID; each entry has its own lock for starts.
	mu   sync.Mutex
	byID map[string]*entry
}

// New returns a manager over sb's sandboxes.
func New(sb *sandbox.Manager, cfg Config) *Manager {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = defaultStartTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Manager{sb: sb, cfg: cfg, byID: make(map[string]*entry)}
}

// Available reports whether this host has a browser to run.
func Available() error {
	if _, err := os.Stat(chromiumPath); err != nil {
		return fmt.Errorf("chromium is not installed (%s; `make deps` installs Debian's chromium)", chromiumPath)
	}
	return nil
}

// entry is one sandbox's browser slot.
type entry struct {
	// mu serialises start, stop and restart, and guards the fields.
	mu       sync.Mutex
	run      *running
	lastExit string
	// display is the desktop's recording while it runs; lastDisplay
	// describes the one that ended last (display.go).
	display     *Encoder
	lastDisplay *Recorded
}

// running is one started browser (and, headful, its display and VNC
// server).
type running struct {
	s        *sandbox.Sandbox
	opts     Options
	procs    []*sandbox.Proc // display, vnc (headful), chromium last
	chromium *sandbox.Proc
	// devtools is the browser's DevTools endpoint over its pipe.
	devtools *devtools
	mode     string
	version  string
	started  time.Time
	// done is closed when chromium exited; why says how.
	done chan struct{}
	why  string
	tail *tailBuffer

	// encMu guards encoders: the recordings of this browser's page or
	// desktop, which end with it.
	encMu    sync.Mutex
	encoders []*Encoder
	// release returns the pids allowance the browser was granted
	// (in a sandbox with a small pids limit; idempotent).
	release func()
}

// addEncoder ties a recording to the browser's life.
func (r *running) addEncoder(e *Encoder) {
	r.encMu.Lock()
	defer r.encMu.Unlock()
	kept := r.encoders[:0]
	for _, x := range r.encoders {
		if !x.exited() {
			kept = append(kept, x)
		}
	}
	r.encoders = append(kept, e)
}

func (m *Manager) entry(id string) *entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byID[id]
	if e == nil {
		m.pruneLocked()
		e = &entry{}
		m.byID[id] = e
	}
	return e
}

// pruneLocked drops the entries of sandboxes that no longer exist
// (deleted, expired), so the map holds at most the live sandboxes: a
// server that creates and deletes sandboxes all day does not grow. An
// entry still holding a browser is stopped first (its sandbox's delete
// has killed it already; this frees its groups). Called with m.mu held,
// when a new entry is added, so its cost is paid by creation only.
func (m *Manager) pruneLocked() {
	for id, e := range m.byID {
		if _, err := m.sb.Get(sandbox.Caller{Admin: true}, id); err == nil {
			continue
		}
		delete(m.byID, id)
		go e.forget()
	}
}

// Forget drops a sandbox's entry at once (the daemon calls it when a
// sandbox is deleted), stopping its browser and recordings.
func (m *Manager) Forget(id string) {
	m.mu.Lock()
	e := m.byID[id]
	delete(m.byID, id)
	m.mu.Unlock()
	if e != nil {
		e.forget()
	}
}

// forget ends whatever the entry still runs.
func (e *entry) forget() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.run != nil {
		e.run.stop()
		e.run = nil
	}
}

// Entries is how many sandboxes the manager keeps state for (tests, and
// the bound pruneLocked keeps).
func (m *Manager) Entries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID)
}

// DevTools ensures the sandbox's browser runs (the caller must be allowed
// to see the sandbox: another key's is NotFound; "" is the caller's default
// sandbox) and returns a fresh connection to its DevTools endpoint — served
// by this server over the browser's pipe (devtools.go), never by whatever
// listens on a port in the sandbox. The caller speaks HTTP or WebSocket
// over it and closes it; a pause, HALT or stop of the sandbox closes it.
func (m *Manager) DevTools(ctx context.Context, c auth.Caller, sandboxID string) (net.Conn, error) {
	s, err := m.sb.Resolve(ctx, c, sandboxID)
	if err != nil {
		return nil, err
	}
	if _, err := m.ensure(ctx, s, nil); err != nil {
		return nil, err
	}
	e := m.entry(s.ID())
	e.mu.Lock()
	var dt *devtools
	if e.run != nil && e.run.s == s {
		dt = e.run.devtools
	}
	e.mu.Unlock()
	if dt == nil {
		return nil, fault.New(fault.Unavailable, "the browser ended; try again")
	}
	conn, err := dt.dial()
	if err != nil {
		return nil, fault.New(fault.Unavailable, "the browser ended; try again")
	}
	return s.Relay(conn)
}

// VNC returns a fresh connection to the sandbox's VNC server. A sandbox
// without a running browser gets a headful one (opening the desktop starts
// it); a headless browser is refused with a hint to restart it headful.
func (m *Manager) VNC(ctx context.Context, c auth.Caller, sandboxID string) (net.Conn, error) {
	s, err := m.sb.Resolve(ctx, c, sandboxID)
	if err != nil {
		return nil, err
	}
	st, err := m.ensure(ctx, s, &Options{Headful: true})
	if err != nil {
		return nil, err
	}
	if !st.Headful {
		return nil, fault.New(fault.Conflict, "the sandbox's browser runs headless; restart it headful to get a desktop")
	}
	return s.DialPort(ctx, sandbox.VNCPort)
}

// Start starts the sandbox's browser with opts unless it runs already
// (then its status is returned, whatever its options).
func (m *Manager) Start(ctx context.Context, c auth.Caller, sandboxID string, opts Options) (Status, error) {
	s, err := m.sb.Resolve(ctx, c, sandboxID)
	if err != nil {
		return Status{}, err
	}
	return m.ensure(ctx, s, &opts)
}

// Restart stops the sandbox's browser and starts it again (with opts, or
// the previous options when nil).
func (m *Manager) Restart(ctx context.Context, c auth.Caller, sandboxID string, opts *Options) (Status, error) {
	return m.RestartWith(ctx, c, sandboxID, func(o *Options) {
		if opts != nil {
			*o = *opts
		}
	})
}

// RestartWith stops the sandbox's browser and starts it again with its
// previous options (the defaults when none ran) changed by edit.
func (m *Manager) RestartWith(ctx context.Context, c auth.Caller, sandboxID string, edit func(*Options)) (Status, error) {
	s, err := m.sb.Resolve(ctx, c, sandboxID)
	if err != nil {
		return Status{}, err
	}
	e := m.entry(s.ID())
	e.mu.Lock()
	var o Options
	if e.run != nil {
		o = e.run.opts
	}
	edit(&o)
	if o.Locale != "" && !localeTag.MatchString(o.Locale) {
		// It becomes a command-line flag: only a plain tag passes.
		e.mu.Unlock()
		return Status{}, fault.InvalidField("locale", "locale must be a language tag like en-US")
	}
	if e.run != nil {
		e.run.stop()
		e.lastExit = "restarted"
		e.run = nil
	}
	e.mu.Unlock()
	return m.ensure(ctx, s, &o)
}

// localeTag is a language tag and up to three subtags (en, en-US,
// zh-Hant-TW).
var localeTag = regexp.MustCompile(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$`)

// Stop ends the sandbox's browser, if it runs.
func (m *Manager) Stop(ctx context.Context, c auth.Caller, sandboxID string) error {
	s, err := m.sb.Resolve(ctx, c, sandboxID)
	if err != nil {
		return err
	}
	e := m.entry(s.ID())
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.run != nil {
		e.run.stop()
		e.lastExit = "stopped"
		e.run = nil
	}
	return nil
}

// Status reports the sandbox's browser without starting it.
func (m *Manager) Status(ctx context.Context, c auth.Caller, sandboxID string) (Status, error) {
	s, err := m.sb.Resolve(ctx, c, sandboxID)
	if err != nil {
		return Status{}, err
	}
	e := m.entry(s.ID())
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.statusLocked(s), nil
}

func (e *entry) statusLocked(s *sandbox.Sandbox) Status {
	r := e.run
	if r == nil || r.exited() || r.s != s {
		return Status{LastExit: e.lastExit}
	}
	return Status{Running: true, Headful: r.opts.Headful, Mode: r.mode, Width: r.opts.Width, Height: r.opts.Height,
		Version: r.version, Started: r.started, LastExit: e.lastExit}
}

// Close stops every browser (server shutdown; the sandboxes' own stop
// would end them too).
func (m *Manager) Close() {
	m.mu.Lock()
	entries := make([]*entry, 0, len(m.byID))
	for _, e := range m.byID {
		entries = append(entries, e)
	}
	m.mu.Unlock()
	for _, e := range entries {
		e.mu.Lock()
		if e.run != nil {
			e.run.stop()
			e.run = nil
		}
		e.mu.Unlock()
	}
}

// ensure returns the status of s's running browser, starting one (with
// opts, or the defaults) when none runs.
func (m *Manager) ensure(ctx context.Context, s *sandbox.Sandbox, opts *Options) (Status, error) {
	if err := Available(); err != nil {
		return Status{}, fault.Wrap(fault.Unsupported, err, "this server has no browser installed")
	}
	e := m.entry(s.ID())
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.run; r != nil {
		if !r.exited() && r.s == s {
			return e.statusLocked(s), nil
		}
		// Dead (crashed, killed with its sandbox) or of a sandbox object
		// since deleted: forget it and start again.
		if r.exited() {
			e.lastExit = r.why
		}
		r.stop()
		e.run = nil
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	r, err := m.start(ctx, s, o)
	if err != nil {
		return Status{}, err
	}
	e.run = r
	return e.statusLocked(s), nil
}

func (m *Manager) start(ctx context.Context, s *sandbox.Sandbox, o Options) (*running, error) {
	info := s.Info()
	if info.Network.Mode == sandbox.NetworkHost {
		return nil, fault.New(fault.Unsupported, "the browser does not run in a sandbox with network.mode host (its DevTools port would be on the host's loopback)")
	}
	if err := checkSize(&o); err != nil {
		return nil, err
	}
	r := &running{s: s, opts: o, mode: processMode, done: make(chan struct{}), tail: &tailBuffer{max: stderrTail}, release: func() {}}
	if pids := info.Limits.Pids; pids > 0 && pids < browserPids {
		// The browser's threads would fill a small sandbox's limit; it
		// brings its own allowance, returned when it ends (stop).
		grant := int64(browserPids)
		if o.Headful {
			grant += headfulExtraPids
		}
		release, err := s.GrantPids(grant)
		if err != nil {
			return nil, fault.Wrap(fault.Unavailable, err, "the browser's process allowance could not be set")
		}
		r.release = release
	}
	ok := false
	defer func() {
		if !ok {
			r.stop()
		}
	}()
	sctx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	defer cancel()
	env := map[string]string{"HOME": profileDir + "/home"}
	if o.Headful {
		env["DISPLAY"] = display
		if err := r.spawnHelper(sctx, []string{xvfbPath, display, "-screen", "0", fmt.Sprintf("%dx%dx24", o.Width, o.Height), "-nolisten", "tcp"}, env); err != nil {
			return nil, err
		}
		if err := waitFor(sctx, r, func() bool { return m.displayUp(sctx, s) }); err != nil {
			return nil, m.startFault(r, "the virtual display", err)
		}
		vnc := []string{x11vncPath, "-display", display, "-rfbport", strconv.Itoa(sandbox.VNCPort), "-localhost", "-forever", "-shared", "-nopw", "-quiet", "-noxdamage"}
		if err := r.spawnHelper(sctx, vnc, env); err != nil {
			return nil, err
		}
	}
	p, err := s.Spawn(sctx, sandbox.SpawnSpec{Argv: chromiumArgs(info.Network.Mode, o), Env: env, Cwd: "/tmp", CPUTime: browserCPU, DevToolsPipe: true})
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "the browser could not be started in the sandbox")
	}
	r.chromium = p
	r.procs = append(r.procs, p)
	if p.DevToolsIn == nil || p.DevToolsOut == nil {
		return nil, fault.New(fault.Internal, "the browser was started without its DevTools pipe")
	}
	mux := cdp.NewMux(cdp.NewPipe(p.DevToolsIn, p.DevToolsOut))
	go r.drain(p)
	go r.watch(p)
	// The browser answers on its pipe once it is up; if it ends first,
	// the pipe ends and so does the call.
	var v browserVersion
	verr := make(chan error, 1)
	go func() { verr <- mux.Call(sctx, "Browser.getVersion", nil, &v) }()
	select {
	case err = <-verr:
		if errors.Is(err, cdp.ErrClosed) {
			err = errExited
		}
	case <-r.done:
		err = errExited
	}
	if err != nil {
		_ = mux.Close()
		return nil, m.startFault(r, "the browser", err)
	}
	r.version = v.Product
	r.devtools = newDevTools(mux, v, m.cfg.Log)
	if o.Headful {
		if c, err := s.DialPort(sctx, sandbox.VNCPort); err == nil {
			_ = c.Close()
		} else if err := waitFor(sctx, r, func() bool {
			c, err := s.DialPort(sctx, sandbox.VNCPort)
			if err == nil {
				_ = c.Close()
			}
			return err == nil
		}); err != nil {
			return nil, m.startFault(r, "the VNC server", err)
		}
	}
	r.started = time.Now()
	ok = true
	m.cfg.Log.Info("browser started", "sandbox", s.ID(), "headful", o.Headful, "version", r.version)
	return r, nil
}

// checkSize fills and bounds the window size.
func checkSize(o *Options) error {
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.Height == 0 {
		o.Height = DefaultHeight
	}
	if o.Width < 320 || o.Width > 3840 || o.Height < 240 || o.Height > 2160 {
		return fault.InvalidField("width", "the browser's size must be within 320x240 and 3840x2160")
	}
	return nil
}

// chromiumArgs is the browser's command line. Every flag has a reason.
func chromiumArgs(netMode string, o Options) []string {
	args := []string{
		chromiumPath,
		// Chromium's own sandbox cannot start under sandhold's seccomp
		// filter; see the package doc for what replaces it.
		"--no-sandbox",
		// DevTools over descriptors 3 and 4, which only the browser and
		// the server hold (devtools.go): no port that code in the
		// sandbox could bind first.
		"--remote-debugging-pipe",
		"--user-data-dir=" + profileDir,
		// /dev/shm is small in a sandbox; /tmp holds the shared memory.
		"--disable-dev-shm-usage",
		"--disable-gpu",
		"--no-first-run", "--no-default-browser-check",
		// Nothing phones home: no component updates, no background
		// fetches, no sync (in mode proxy each would be an audited
		// refusal; in mode none a wasted attempt).
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider",
		"--password-store=basic", "--use-mock-keychain",
		"--mute-audio",
		fmt.Sprintf("--window-size=%d,%d", o.Width, o.Height),
	}
	if !o.Headful {
		args = append(args, "--headless=new")
	}
	if o.Locale != "" {
		// The UI language and what pages are told (Accept-Language,
		// navigator.language); RestartWith checked the tag.
		args = append(args, "--lang="+o.Locale, "--accept-lang="+o.Locale)
	}
	// Multi-process always: --single-process fits fewer pids, but a
	// second browser context (Playwright's browser.newContext) closes it.
	args = append(args, "--no-zygote", "--renderer-process-limit=4")
	if netMode == sandbox.NetworkProxy {
		// Every request through the init's egress listener to the
		// server's allow-list proxy; the sandbox's own loopback stays
		// direct (Chromium's implicit bypass).
		args = append(args, "--proxy-server=http://127.0.0.1:"+strconv.Itoa(agent.EgressPort))
	}
	return append(args, "about:blank")
}

// spawnHelper starts Xvfb or x11vnc; its output joins the tail.
func (r *running) spawnHelper(ctx context.Context, argv []string, env map[string]string) error {
	p, err := r.s.Spawn(ctx, sandbox.SpawnSpec{Argv: argv, Env: env, Cwd: "/tmp", CPUTime: browserCPU})
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "the browser's desktop could not be started in the sandbox")
	}
	r.procs = append(r.procs, p)
	go r.drain(p)
	return nil
}

// displayUp reports whether Xvfb's socket exists.
func (m *Manager) displayUp(ctx context.Context, s *sandbox.Sandbox) bool {
	_, _, err := s.File(ctx, agent.OpStat, agent.FileReq{Path: "/tmp/.X11-unix/X" + strings.TrimPrefix(display, ":")})
	return err == nil
}

// drain keeps a process's last output (its pipes must be read, or it
// blocks on a full pipe).
func (r *running) drain(p *sandbox.Proc) {
	var wg sync.WaitGroup
	for _, f := range []*os.File{p.Stdout, p.Stderr} {
		if f == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(r.tail, f)
		}()
	}
	wg.Wait()
}

// watch waits for chromium's end, records why, and frees everything.
func (r *running) watch(p *sandbox.Proc) {
	ex := <-p.Exited()
	st, _ := p.Stats()
	r.why = exitReason(ex, st.OOMKills > 0, r.tail.String())
	close(r.done)
	r.stop()
}

// exitReason names why the browser ended: the limit it hit when it can
// tell, else its exit status.
func exitReason(ex agent.Exit, oom bool, output string) string {
	switch {
	case oom:
		return "killed by the sandbox's memory limit (out of memory)"
	case strings.Contains(output, "Resource temporarily unavailable") || strings.Contains(output, "pthread_create"):
		return "could not create a thread or process: the sandbox's process limit (limits.pids) is reached"
	case strings.Contains(output, "No space left on device"):
		return "ran out of space in the sandbox's /tmp"
	case ex.Signal != 0:
		return fmt.Sprintf("killed by signal %d", ex.Signal)
	}
	return fmt.Sprintf("exited with status %d", ex.Code)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	// mu guards b.
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// waitFor polls ready until it is true, the browser died, or ctx ends.
func waitFor(ctx context.Context, r *running, ready func() bool) error {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		if ready() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
			return errExited
		case <-t.C:
		}
	}
}

// errExited is a browser (or helper) that ended while starting.
var errExited = errors.New("exited")

// startFault says why a start failed, in words a client may see; the
// process's last output goes to the log.
func (m *Manager) startFault(r *running, what string, err error) error {
	m.cfg.Log.Warn("browser start failed", "sandbox", r.s.ID(), "what", what, "err", err, "why", r.why, "output", r.tail.String())
	switch {
	case errors.Is(err, errExited):
		return fault.Errorf(fault.Unavailable, "%s ended while starting: %s", what, r.reason())
	case errors.Is(err, context.DeadlineExceeded):
		return fault.Errorf(fault.Timeout, "%s did not answer within %s", what, m.cfg.StartTimeout)
	}
	return err
}

func (r *running) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// reason is why chromium ended, in client words.
func (r *running) reason() string {
	if r.why != "" {
		return r.why
	}
	return "unknown"
}

// stop ends the browser and its helpers and frees their groups.
func (r *running) stop() {
	if r.devtools != nil {
		r.devtools.close() // every DevTools session ends with the browser
	}
	r.encMu.Lock()
	for _, e := range r.encoders {
		e.Kill()
	}
	r.encoders = nil
	r.encMu.Unlock()
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].Kill()
	}
	for _, p := range r.procs {
		p.Release()
	}
	r.release()
}

// HostReport says what of the browser runtime this host has, for
// `sandhold doctor`.
type HostReport struct {
	Chromium bool
	Version  string // `chromium --version`, when it ran
	Desktop  bool   // Xvfb and x11vnc, for the headful desktop
	Recorder bool   // ffmpeg, for page and desktop recordings
}

// String is one line for the doctor's table.
func (h HostReport) String() string {
	switch {
	case !h.Chromium:
		return "browser: chromium not installed (" + chromiumPath + "); the browser, DevTools and VNC routes answer 'unsupported' (make deps installs it)"
	}
	line := "browser: " + h.Version + "; headful desktop: Xvfb + x11vnc"
	if !h.Desktop {
		line = "browser: " + h.Version + "; headful desktop unavailable (Xvfb or x11vnc missing)"
	}
	if !h.Recorder {
		return line + "; recording unavailable (ffmpeg missing)"
	}
	return line + "; recording: ffmpeg"
}

// ProbeHost checks the browser binaries on the host (the sandbox sees the
// host's /usr read-only, so these are what a sandbox runs).
func ProbeHost(ctx context.Context) HostReport {
	var h HostReport
	if Available() != nil {
		return h
	}
	h.Chromium, h.Version = true, "chromium (version unknown)"
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, chromiumPath, "--version").Output(); err == nil { //nolint:gosec // G204: a fixed path, no arguments from input
		h.Version = strings.TrimSpace(string(out))
	}
	_, errX := os.Stat(xvfbPath)
	_, errV := os.Stat(x11vncPath)
	h.Desktop = errX == nil && errV == nil
	h.Recorder = RecorderAvailable() == nil
	return h
}
