// Package daemon assembles the sandhold server: it owns the store, the
// audit log, the auth service, the Prometheus registry and the HTTP API, and
// runs them with every http.Server timeout set and a graceful shutdown.
//
// It is the Main-like value an end-to-end test starts on 127.0.0.1:0 with a
// temporary data dir, and the one place where subsystems are wired together:
// construction in New reads top to bottom in dependency order, so the next
// subsystem (sandbox manager, dispatcher) is added as one more step.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/cluster"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/connlimit"
	"github.com/sandhold/sandhold/internal/console"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/posture"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/template"
)

// AdminKeyFile holds the generated admin key (0600) in the data dir.
const AdminKeyFile = "admin.key"

// HTTP server limits. WriteTimeout bounds a whole response; handlers that
// stream longer (PTY, WebSocket, long exec) extend their own deadline with
// http.NewResponseController(w).SetWriteDeadline.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 10 * time.Minute
	writeTimeout      = 15 * time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	shutdownTimeout   = 15 * time.Second
	// revocationPoll: how often keys revoked by another process (the CLI)
	// are noticed to end their open sessions.
	revocationPoll = 2 * time.Second
)

// Daemon is one server instance.
type Daemon struct {
	cfg      config.Config
	log      *slog.Logger
	stderr   io.Writer
	version  string
	adminKey string
	posture  posture.Report

	store store.Store
	audit *audit.Log
	// retention is the audit's, resolved at start (auditretention.go).
	retention audit.Retention
	// endings tracks revocation hooks in flight; Run waits for them
	// before it releases the store.
	endings  sync.WaitGroup
	auth     *auth.Service
	registry *prometheus.Registry
	api      *api.Server

	guard     *guard.Guard
	limiter   *ratelimit.Limiter
	dispatch  *dispatch.Dispatcher
	sandboxes *sandbox.Manager
	templates *template.Store
	// cg is the server's cgroup base, made before anything is written.
	cg cgroup.Manager
	// lost is closed when another server took this node (lease.go).
	lost *nodeLoss
	// browser runs one Chromium per sandbox (browser.go).
	browser *browser.Manager

	// sessionTimers are test knobs of the shell sessions (WithSessionTimers).
	sessionTimers [2]time.Duration
	// inflight are the requests in progress, by key (revocation cancels them).
	inflight inflight

	ready chan struct{}

	mu   sync.Mutex
	addr string
	// contentAddr is the content listener's address (SANDBOX_CONTENT_LISTEN).
	contentAddr string
	closers     []func() error // run in reverse order by Close
	// revokers end a revoked key's sessions, one per capability (onRevoke).
	revokers []func(keyID string)
	closed   bool
}

type options struct {
	logger   *slog.Logger
	stderr   io.Writer
	version  string
	authOpts []auth.Option
	probe    func() posture.Report
	initExe  string
	initArgs []string
	// sessionTimers: implicit-session idle timeout and reaper interval.
	sessionTimers [2]time.Duration
}

// WithSessionTimers shortens the idle timeout of implicit shell sessions
// and the reaper's interval, so a test can watch them end.
func WithSessionTimers(implicitIdle, reapEvery time.Duration) Option {
	return func(o *options) { o.sessionTimers = [2]time.Duration{implicitIdle, reapEvery} }
}

// Option configures New.
type Option func(*options)

// WithLogger sets the logger (default: JSON to stderr at cfg.LogLevel, redacted).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithStderr sets where the generated admin key is announced (default os.Stderr).
func WithStderr(w io.Writer) Option { return func(o *options) { o.stderr = w } }

// WithVersion sets the version reported by /healthz and the OpenAPI document.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithClock replaces time.Now in the auth service (lockout windows, ticket
// expiry) so tests can move time instead of sleeping.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.authOpts = append(o.authOpts, auth.WithClock(now)) }
}

// WithPosture replaces the host probe (posture.Probe) that decides whether
// sandboxes can be isolated here; tests that are about the API, not the
// kernel, pass a fixed report so they run unprivileged.
func WithPosture(probe func() posture.Report) Option { return func(o *options) { o.probe = probe } }

// New validates cfg and builds every subsystem. Nothing listens until Run.
func New(cfg config.Config, opts ...Option) (*Daemon, error) {
	o := options{stderr: os.Stderr, version: "dev", probe: posture.Probe}
	for _, opt := range opts {
		opt(&o)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	if o.logger == nil {
		o.logger = NewLogger(os.Stderr, cfg.LogLevel)
	}
	d := &Daemon{cfg: cfg, log: o.logger, stderr: o.stderr, version: o.version, ready: make(chan struct{}), sessionTimers: o.sessionTimers}
	built := false
	defer func() {
		if !built {
			_ = d.Close() // release what the failed step's predecessors opened
		}
	}()
	var err error
	ctx := context.Background()

	// 1. Isolation: refuse to run without it unless told to.
	d.posture = o.probe()
	if missing := d.posture.Missing(); len(missing) > 0 {
		if !cfg.InsecureNoIsolation {
			return nil, fmt.Errorf("sandboxes cannot be isolated on this host (missing: %s); run `sandhold doctor`, or start with --insecure-no-isolation to run without isolation", strings.Join(missing, ", "))
		}
		d.log.Warn("RUNNING WITHOUT ISOLATION: required kernel features are missing", "missing", missing)
	}

	// What serving sandboxes needs of this process, and its cgroups,
	// before anything is written (no data dir, no admin key).
	if err := checkPrivileges(); err != nil {
		return nil, err
	}
	if d.cg, err = cgroup.New(cgroupBase(cfg.DataDir)); err != nil {
		return nil, fmt.Errorf("cgroups: %w. %s", err, cgroupHint)
	}
	// Also released after the manager's own closer (harmless twice): a
	// start that fails before the manager exists leaves no base group.
	d.closers = append(d.closers, func() error { d.cg.Release(); return nil })

	// 2. Data dir, private.
	if err := EnsureDataDir(cfg.DataDir); err != nil {
		return nil, err
	}

	// 3. Store.
	if d.store, err = store.OpenConfigured(ctx, cfg.DataDir, cfg.DatabaseURL, cfg.NodeName); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	d.closers = append(d.closers, d.store.Close)
	// This server's node (the data dir; in a cluster, the node name),
	// held before anything touches a sandbox record (lease.go).
	if err := d.holdNode(ctx); err != nil {
		return nil, err
	}

	// 4. Audit log and auth.
	d.audit = audit.New(d.store, cfg.DataDir)
	d.closers = append(d.closers, d.audit.Close) // the kept lock and head files
	if d.retention, err = auditRetention(ctx, cfg, d.auditHeld); err != nil {
		return nil, fmt.Errorf("audit retention: %w", err)
	}
	d.log.Info("audit retention", "max_age", d.retention.MaxAge, "budget_bytes", d.retention.Budget, "off", cfg.AuditRetention.Off)
	authOpts := []auth.Option{auth.WithLogger(d.log), auth.WithRateMaxima(ratelimit.DefaultRules().Merge(cfg.RateLimits))}
	if cfg.DatabaseURL == "" { // a shared store has no shared epoch file: no key cache
		authOpts = append(authOpts, auth.WithKeyCache(filepath.Join(cfg.DataDir, auth.KeyEpochFile)))
	}
	d.auth = auth.NewService(d.store, d.audit, append(authOpts, o.authOpts...)...)
	d.closers = append(d.closers, d.auth.Close)

	// 5. Admin key.
	if d.adminKey, err = d.loadAdminKey(ctx); err != nil {
		return nil, err
	}

	// 6. Metrics registry.
	d.registry = prometheus.NewRegistry()
	d.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sandhold", Subsystem: "audit", Name: "batches_total",
			Help: "Audit transactions committed (concurrent appends share one: group commit)."},
			func() float64 { return float64(d.audit.Stats().Batches) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sandhold", Subsystem: "audit", Name: "records_total",
			Help: "Audit records committed by this server."},
			func() float64 { return float64(d.audit.Stats().Records) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sandhold", Subsystem: "audit", Name: "bytes",
			Help: "What the audit takes on this host: its stored records (estimated) and archive files; SANDBOX_AUDIT_RETENTION bounds it."},
			func() float64 { n, _ := d.auditHeld(context.Background()); return float64(n) }))

	// 7. HTTP API.
	if d.api, err = api.New(api.Deps{Config: cfg, Auth: d.auth, Audit: d.audit, Logger: d.log,
		Registry: d.registry, Version: o.version}); err != nil {
		return nil, err
	}

	// The web console at / and its cookie sign-in (internal/console).
	if _, err := console.Mount(d.api, console.Deps{Auth: d.auth, Keys: d.store, Audit: d.audit, Logger: d.log}); err != nil {
		return nil, err
	}

	// 8. Dispatcher and sandboxes (the manager reaps a previous run's
	// leftovers and a self-test sandbox proves the isolation).
	if err := d.startSandboxes(ctx, o); err != nil {
		return nil, err
	}

	// Revoking a key ends what it holds (revoke.go); the hook must not
	// block the revoking request.
	d.auth.OnRevoke(func(id string) { d.endings.Go(func() { d.endKey(id) }) })

	// 9. Say loudly what is weaker than the defaults.
	for _, l := range cfg.Loosenings() {
		d.log.Warn("LOOSENED DEFAULT: "+l, "setting", strings.SplitN(l, "=", 2)[0])
		if _, err := d.audit.Append(ctx, audit.Entry{Actor: "system", Action: "config.loosen",
			Target: strings.SplitN(l, "=", 2)[0], Verdict: audit.Allow, Detail: map[string]any{"detail": l}}); err != nil {
			return nil, fmt.Errorf("audit loosening: %w", err)
		}
	}
	built = true
	return d, nil
}

// EnsureDataDir creates dir 0700, or tightens an existing one to 0700.
func EnsureDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil { // #nosec G302 -- a directory needs x; 0700 is owner-only
			return fmt.Errorf("tighten data dir: %w", err)
		}
	}
	return nil
}

// loadAdminKey picks SANDBOX_API_KEY, else the key file, else generates and
// saves a key (announced once on stderr), and makes the store agree.
func (d *Daemon) loadAdminKey(ctx context.Context) (string, error) {
	key := d.cfg.APIKey
	if key == "" {
		var generated bool
		var err error
		key, generated, err = LoadOrCreateKeyFile(filepath.Join(d.cfg.DataDir, AdminKeyFile))
		if err != nil {
			return "", err
		}
		if generated {
			_, _ = fmt.Fprintf(d.stderr, "sandhold: generated admin API key (saved 0600 in %s, shown once):\n%s\n",
				filepath.Join(d.cfg.DataDir, AdminKeyFile), key)
		}
	}
	if err := d.auth.EnsureAdmin(ctx, key); err != nil {
		return "", fmt.Errorf("admin key: %w", err)
	}
	return key, nil
}

// LoadOrCreateKeyFile reads the admin key file, or creates it with a fresh
// key (0600, written atomically). generated reports the latter.
func LoadOrCreateKeyFile(path string) (key string, generated bool, err error) {
	b, err := os.ReadFile(filepath.Clean(path))
	if err == nil {
		key = strings.TrimSpace(string(b))
		if key == "" {
			return "", false, fmt.Errorf("admin key file %s is empty", path)
		}
		return key, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("read admin key file: %w", err)
	}
	key, err = auth.GenerateKey()
	if err != nil {
		return "", false, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".admin.key-*")
	if err != nil {
		return "", false, fmt.Errorf("write admin key file: %w", err)
	}
	tmp := f.Name()
	_, werr := f.WriteString(key + "\n")
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o600)
	}
	if werr == nil {
		// Link, not rename: never overwrite a key file another process
		// created meanwhile.
		werr = os.Link(tmp, path)
	}
	_ = os.Remove(tmp)
	if werr != nil {
		if errors.Is(werr, os.ErrExist) {
			return LoadOrCreateKeyFile(path)
		}
		return "", false, fmt.Errorf("write admin key file: %w", werr)
	}
	return key, true, nil
}

// Run listens on cfg.Listen and serves until ctx ends, then shuts down
// gracefully and releases everything. It may be called once.
func (d *Daemon) Run(ctx context.Context) error {
	// Losing the node's name to another server stops the server as a
	// signal would (lease.go).
	ctx, stopWatch, lostErr := d.untilLost(ctx)
	defer stopWatch()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", d.cfg.Listen)
	if err != nil {
		_ = d.Close()
		return fmt.Errorf("listen: %w", err)
	}
	// The sandbox-content listener (SANDBOX_CONTENT_LISTEN): an origin of
	// its own for what sandboxes serve (internal/api/content.go).
	var cln net.Listener
	if d.cfg.ContentListen != "" {
		if cln, err = lc.Listen(ctx, "tcp", d.cfg.ContentListen); err != nil {
			_ = ln.Close()
			_ = d.Close()
			return fmt.Errorf("listen (content): %w", err)
		}
		d.api.SetContentAddr(cln.Addr().String())
	}
	handler, content := d.api.Handler(), d.api.ContentHandler()
	var fw *cluster.Forwarder
	if cl := d.store.Cluster(); cl != nil { // a cluster node: forward other nodes' sandboxes
		fw = cluster.NewForwarder(cl, d.cfg.ClusterSecret, d.log)
		fw.SetCapacity(d.cfg.NodeCapacity)
		handler, content = fw.Handler(handler), fw.Handler(content)
	}
	server := func(h http.Handler) *http.Server {
		return &http.Server{
			Handler:           connlimit.Guard(d.inflight.track(h), controlPath, refuseOverflow),
			ConnContext:       connlimit.ConnContext,
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
			BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		}
	}
	srv := server(handler)
	ln = d.limitConns(ln, srv)
	var csrv *http.Server
	d.mu.Lock()
	d.addr = ln.Addr().String()
	if cln != nil {
		csrv = server(content)
		cln = d.limitConns(cln, csrv) // counted apart from the API's
		d.contentAddr = cln.Addr().String()
	}
	d.mu.Unlock()

	// The background loops use the store: they end, and are waited for,
	// before Close releases it (a query racing Close reopens SQLite's
	// shared-memory file after the data dir is meant to be quiet).
	runCtx, cancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	stopBackground := func() { cancel(); bg.Wait() }
	defer stopBackground()
	bg.Go(func() { d.auth.WatchRevocations(runCtx, revocationPoll) })
	bg.Go(func() { d.retainAudit(runCtx, d.retention) })
	if fw != nil {
		bg.Go(func() { fw.Beat(runCtx, cmp.Or(d.cfg.NodeAddr, d.addr)) })
	}

	d.log.Info("sandhold listening", "addr", d.addr, "data_dir", d.cfg.DataDir, "version", d.version)
	d.announce()
	if _, err := d.audit.Append(ctx, audit.Entry{Actor: "system", Action: "server.start", Verdict: audit.Allow,
		Detail: map[string]any{"listen": d.addr, "version": d.version}}); err != nil {
		d.log.Error("audit server.start", "err", err)
	}
	close(d.ready)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	cerrc := make(chan error, 1)
	if csrv != nil {
		go func() { cerrc <- csrv.Serve(cln) }()
	}
	select {
	case err = <-errc:
		if csrv != nil {
			_ = csrv.Close()
			d.ended("content", <-cerrc)
		}
	case err = <-cerrc:
		_ = srv.Close()
		d.ended("api", <-errc)
	case <-ctx.Done():
		d.log.Info("shutting down")
		if fw != nil {
			fw.Drain(context.WithoutCancel(ctx))
		}
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(d.cfg.ShutdownGrace, shutdownTimeout))
		if csrv != nil {
			go func() {
				if csrv.Shutdown(sctx) != nil {
					_ = csrv.Close()
				}
			}()
		}
		err = srv.Shutdown(sctx)
		scancel()
		if err != nil {
			_ = srv.Close()
		}
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
		if csrv != nil {
			_ = csrv.Close()
			d.ended("content", <-cerrc)
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	stopBackground()
	d.endings.Wait()
	if _, aerr := d.audit.Append(context.WithoutCancel(ctx), audit.Entry{Actor: "system", Action: "server.stop", Verdict: audit.Allow}); aerr != nil {
		d.log.Error("audit server.stop", "err", aerr)
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if lerr := lostErr(); lerr != nil {
		err = lerr
	}
	return err
}

// ended logs how a listener closed after the other one ended the server.
func (d *Daemon) ended(listener string, err error) {
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		d.log.Warn("listener ended with an error", "listener", listener, "err", err)
	}
}

// Close releases the store and everything else New opened. Run calls it;
// call it yourself only when Run is never called.
func (d *Daemon) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for i := len(d.closers) - 1; i >= 0; i-- {
		errs = append(errs, d.closers[i]())
	}
	return errors.Join(errs...)
}

// ContentAddr is the address of the sandbox-content listener ("" without
// one, or before Ready).
func (d *Daemon) ContentAddr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.contentAddr
}

// Ready is closed once Run is listening.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// Addr is the address Run listens on ("" before Ready).
func (d *Daemon) Addr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addr
}

// AdminKey is the bootstrap admin key (tests; never log it).
func (d *Daemon) AdminKey() string { return d.adminKey }

// Config is the validated configuration in force.
func (d *Daemon) Config() config.Config { return d.cfg }

// Logger is the server logger.
func (d *Daemon) Logger() *slog.Logger { return d.log }

// Posture is the host report taken at start (for /v1/sandbox/security).
func (d *Daemon) Posture() posture.Report { return d.posture }

// Store is the store.
func (d *Daemon) Store() store.Store { return d.store }

// Audit is the audit log.
func (d *Daemon) Audit() *audit.Log { return d.audit }

// Auth is the auth service.
func (d *Daemon) Auth() *auth.Service { return d.auth }

// API is the HTTP server, for registering more routes before Run.
func (d *Daemon) API() *api.Server { return d.api }

// Registry is the Prometheus registry.
func (d *Daemon) Registry() *prometheus.Registry { return d.registry }

// AddCloser registers fn to run on Close (reverse order of registration),
// for subsystems the lead wires in after New.
func (d *Daemon) AddCloser(fn func() error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closers = append(d.closers, fn)
}
