package coderun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/sandbox/execenv"
	"github.com/sandhold/sandhold/internal/sessions"
)

// Defaults and caps, with their reasons.
const (
	// DefaultTimeout and MaxTimeout are AIO's (CodeExecuteRequest.timeout:
	// 1..300 s, default 30 s).
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 300 * time.Second
	// MaxCodeBytes caps one cell: it is held in memory and sent down a pipe.
	MaxCodeBytes = 1 << 20
	// maxCellEnv caps a cell's own environment variables, as an
	// execution's are capped: they travel in the cell's request.
	maxCellEnv = 256
	// DefaultIdleTimeout is AIO's session expiry (30 minutes idle).
	DefaultIdleTimeout = 30 * time.Minute
	// DefaultMaxSessions caps the live sessions of one key: each is a
	// resident interpreter in the key's sandbox.
	DefaultMaxSessions = 8
	// DefaultOutputLimit is the bytes kept per stream of one execution
	// (head and tail; the middle is dropped and marked).
	DefaultOutputLimit = 1 << 20
	// reapEvery is how often idle sessions are looked for.
	reapEvery = 30 * time.Second
)

// Config configures the service; zero values take the defaults.
type Config struct {
	IdleTimeout time.Duration
	MaxSessions int
	OutputLimit int
	Log         *slog.Logger
}

// Request is one execution.
type Request struct {
	Language string
	Code     string
	// Timeout is the wall time of this execution (0: DefaultTimeout).
	Timeout time.Duration
	// Cwd is where the cell runs (stateful: where the session moves to).
	Cwd string
	// Stateful runs the cell in the caller's session SessionID (started
	// with that id if the caller has none; a new session with a generated
	// id when SessionID is empty).
	Stateful  bool
	SessionID string
	// Output, when set, is handed each piece of the cell's stdout and
	// stderr as the interpreter writes it ("stdout" or "stderr"), for a
	// caller that streams them (E2B's runCode); the Result still holds
	// them all.
	Output func(stream string, p []byte)
	// Env are environment variables of this cell alone (python and
	// javascript: set in the interpreter's environment for the cell, then
	// restored; the rules of an execution's env apply).
	Env map[string]string
}

// Result is an execution's outcome.
type Result struct {
	Language  string `json:"language"`
	SessionID string `json:"session_id,omitempty"`
	// Status is ok, error or timeout.
	Status string `json:"status"`
	// Outputs are Jupyter-style: streams first, then rich outputs, the
	// last expression's value, and errors.
	Outputs        []Output `json:"outputs"`
	Stdout         string   `json:"stdout"`
	Stderr         string   `json:"stderr"`
	ExitCode       *int     `json:"exit_code"`
	Traceback      []string `json:"traceback,omitempty"`
	ExecutionCount int      `json:"execution_count"`
	// StateLost: the interpreter was killed or died during this call (or
	// since the last one), so the session's variables are gone.
	StateLost  bool   `json:"state_lost,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	CPUMS      int64  `json:"cpu_ms"`
	Version    string `json:"runtime_version,omitempty"`
}

// SessionInfo describes a live session.
type SessionInfo struct {
	ID             string    `json:"session_id"`
	Language       string    `json:"language"`
	Sandbox        string    `json:"sandbox"`
	Created        time.Time `json:"created"`
	LastUsed       time.Time `json:"last_used"`
	ExecutionCount int       `json:"execution_count"`
	Running        bool      `json:"running"`
	Busy           bool      `json:"busy"`
	Version        string    `json:"runtime_version,omitempty"`
}

// session is a stateful interpreter owned by one key.
type session struct {
	id, owner, sandbox, lang string
	created                  time.Time

	// mu guards the fields below; it is never held while a cell runs
	// (busy marks that).
	mu       sync.Mutex
	lastUsed time.Time
	busy     bool
	closed   bool
	in       *interp
	count    int
	// hadInterp: an interpreter ran before, so a missing one means lost
	// state.
	hadInterp bool
	// cwd is where cells run when a call names no cwd ("" = /workspace).
	cwd     string
	version string
}

func (s *session) info() SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionInfo{ID: s.id, Language: s.lang, Sandbox: s.sandbox, Created: s.created, LastUsed: s.lastUsed,
		ExecutionCount: s.count, Running: s.in != nil && s.in.alive(), Busy: s.busy, Version: s.version}
}

// Service runs code and keeps the stateful sessions.
type Service struct {
	cfg  Config
	m    *sandbox.Manager
	log  *slog.Logger
	stop chan struct{}
	wg   sync.WaitGroup

	// sessions are the stateful sessions (kind "code", by sandbox and id).
	sessions *sessions.Table[*session]

	// mu guards probes.
	mu     sync.Mutex
	probes map[string]probe
}

// New starts the service and its idle reaper.
func New(cfg Config, m *sandbox.Manager) *Service {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = DefaultOutputLimit
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Service{cfg: cfg, m: m, log: cfg.Log, stop: make(chan struct{}), probes: map[string]probe{},
		sessions: sessions.New[*session](sessions.Limits{PerKey: cfg.MaxSessions, PerSandbox: cfg.MaxSessions, Idle: cfg.IdleTimeout})}
	s.wg.Add(1)
	go s.reaper()
	return s
}

// Close ends every session.
func (s *Service) Close() {
	select {
	case <-s.stop:
		return
	default:
		close(s.stop)
	}
	s.wg.Wait()
	sessions.CloseAll(s.sessions.RemoveWhere(func(sessions.Key, string) bool { return true }))
}

// Revoke ends every session (and its interpreter) a revoked key holds,
// and waits until the interpreters are killed (auth.OnRevoke).
func (s *Service) Revoke(keyID string) { s.sessions.Revoke(keyID) }

// EndSandbox ends every session of a sandbox that was deleted or stopped.
func (s *Service) EndSandbox(id string) {
	sessions.CloseAll(s.sessions.RemoveWhere(func(k sessions.Key, _ string) bool { return k.Sandbox == id }))
}

// IdleTimeout is how long an unused session lives.
func (s *Service) IdleTimeout() time.Duration { return s.cfg.IdleTimeout }

// MaxSessions is the cap of live sessions per key.
func (s *Service) MaxSessions() int { return s.cfg.MaxSessions }

func (s *Service) reaper() {
	defer s.wg.Done()
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.reapIdle(time.Now())
		}
	}
}

// reapIdle ends sessions unused for the idle timeout.
func (s *Service) reapIdle(now time.Time) {
	for _, r := range s.sessions.Reap(now) {
		s.log.Info("code session expired", "session", r.Key.ID, "sandbox", r.Key.Sandbox, "language", r.Session.lang)
	}
}

// kindCode is the sessions.Key kind of code sessions.
const kindCode = "code"

// Busy reports a cell running (sessions.Session).
func (ss *session) Busy() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.busy
}

// LastUsed is when the session last ran a cell (sessions.Session).
func (ss *session) LastUsed() time.Time {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.lastUsed
}

// Ended is false: a lost interpreter is restarted on the next cell, with
// the loss reported (sessions.Session).
func (ss *session) Ended() bool { return false }

// Close kills the interpreter (sessions.Session).
func (ss *session) Close() { ss.shut() }

// shut kills the session's interpreter.
func (ss *session) shut() {
	ss.mu.Lock()
	in := ss.in
	ss.in, ss.closed = nil, true
	ss.mu.Unlock()
	if in != nil {
		in.close()
	}
}

// CheckRequest validates r and fills defaults.
func CheckRequest(r *Request) error {
	if _, ok := runtimes[r.Language]; !ok {
		return fault.InvalidField("language", fmt.Sprintf("unsupported language %q (python, javascript or bash)", r.Language))
	}
	if len(r.Code) > MaxCodeBytes {
		return fault.InvalidField("code", fmt.Sprintf("code longer than %d bytes", MaxCodeBytes))
	}
	switch {
	case r.Timeout < 0 || r.Timeout > MaxTimeout:
		return fault.InvalidField("timeout", fmt.Sprintf("timeout must be between 1 and %d seconds", int(MaxTimeout.Seconds())))
	case r.Timeout == 0:
		r.Timeout = DefaultTimeout
	}
	if r.Cwd != "" {
		if err := agent.CheckPath(r.Cwd); err != nil {
			return fault.InvalidField("cwd", "cwd must be an absolute, clean path")
		}
	}
	if len(r.Env) > 0 && r.Language == Bash {
		return fault.InvalidField("env", "a bash cell takes no env: export the variables in the cell")
	}
	if len(r.Env) > maxCellEnv {
		return fault.InvalidField("env", fmt.Sprintf("at most %d environment variables", maxCellEnv))
	}
	if r.SessionID != "" {
		if !r.Stateful {
			// AIO: the session id only means something for stateful runs.
			r.SessionID = ""
		} else if err := CheckSessionID(r.SessionID); err != nil {
			return err
		}
	}
	return nil
}

// CheckSessionID validates a client-chosen session id (sessions.IDPattern).
func CheckSessionID(id string) error { return sessions.CheckID("session_id", id) }

// Execute runs r for caller c in sandbox sandboxID ("" = the caller's
// default sandbox).
func (s *Service) Execute(ctx context.Context, c auth.Caller, sandboxID string, r Request) (Result, error) {
	if err := CheckRequest(&r); err != nil {
		return Result{}, err
	}
	sb, err := s.m.Resolve(ctx, c, sandboxID)
	if err != nil {
		return Result{}, err
	}
	sb.Touch() // a cell is use, even when no new process starts
	// The cell's env passes the rule of an execution's (names, no NUL,
	// LD_PRELOAD and friends for admins only).
	if _, err := execenv.Build(execenv.Base(), r.Env, c.IsAdmin(), execenv.MaxVars); err != nil {
		return Result{}, err
	}
	l := limits{timeout: r.Timeout, cpu: sb.Info().Limits.CPUTime, outputLimit: s.cfg.OutputLimit, output: r.Output, env: r.Env}
	start := time.Now()
	if !r.Stateful {
		in, err := startInterp(ctx, sb, r.Language, r.Cwd, c.IsAdmin())
		if err != nil {
			return Result{}, err
		}
		defer in.close()
		cl, err := in.run(ctx, r.Code, "", l)
		if err != nil {
			return Result{}, err
		}
		if cl.lost && cl.exit != nil && cl.exit.Signal == 0 {
			// A stateless program may end itself (bash: exit 3): that is
			// its exit code, not a failure of the session.
			code := cl.exit.Code
			cl.exitCode, cl.lost, cl.reason = &code, false, ""
			cl.outputs = cl.outputs[:len(cl.outputs)-1]
			cl.status = StatusOK
			if code != 0 {
				cl.status = StatusError
			}
		}
		res := s.result(r.Language, "", cl, 1, time.Since(start))
		res.Version = in.version
		// Nothing to lose in a stateless run.
		res.StateLost = false
		return res, nil
	}

	ss, fresh, err := s.execSession(c, sb.ID(), r.Language, r.SessionID)
	if err != nil {
		return Result{}, err
	}
	if ss.lang != r.Language {
		return Result{}, fault.InvalidField("language", fmt.Sprintf("session %s runs %s, not %s", ss.id, ss.lang, r.Language))
	}
	cwd := r.Cwd
	if cwd == "" {
		ss.mu.Lock()
		cwd = ss.cwd
		ss.mu.Unlock()
	}
	res, err := s.runSession(ctx, c, sb, ss, r.Code, cwd, l, start)
	if err != nil && fresh {
		// The session never ran a cell: do not leave it behind.
		s.drop(ss)
	}
	return res, err
}

// execSession is the session a stateful execution runs in: the caller's
// session id, or a new one with that id when the caller has none (AIO:
// the id is "required when stateful=True to maintain state across
// requests"), or a new one with a generated id when id is empty. Ids are
// the caller's own: another key's session of the same id is never used.
// fresh says the session was started by this call.
func (s *Service) execSession(c auth.Caller, sandboxID, lang, id string) (ss *session, fresh bool, err error) {
	if id == "" {
		ss, err = s.newSession(c, sandboxID, lang, uuid.NewString())
		return ss, true, err
	}
	for range 2 {
		if ss, err = s.lookup(c, sandboxID, id); err == nil {
			return ss, false, nil
		}
		ss, err = s.newSession(c, sandboxID, lang, id)
		if !errors.Is(err, errSessionExists) {
			return ss, err == nil, err
		}
		// Another call of the caller's started it meanwhile: use it.
	}
	return nil, false, errSessionExists
}

// runSession runs one cell in ss, starting its interpreter if needed.
func (s *Service) runSession(ctx context.Context, c auth.Caller, sb *sandbox.Sandbox, ss *session, code, cwd string, l limits, start time.Time) (Result, error) {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return Result{}, fault.New(fault.NotFound, "no such session")
	}
	if ss.busy {
		ss.mu.Unlock()
		return Result{}, fault.New(fault.Conflict, "the session is running another execution; wait for it or use another session")
	}
	ss.busy = true
	in := ss.in
	ss.mu.Unlock()
	defer func() {
		ss.mu.Lock()
		ss.busy, ss.lastUsed = false, time.Now()
		ss.mu.Unlock()
	}()

	lostBefore := false
	if in != nil && !in.alive() {
		in.close()
		in, lostBefore = nil, true
	}
	if in == nil {
		ss.mu.Lock()
		lostBefore = lostBefore || ss.hadInterp
		ss.mu.Unlock()
		var err error
		if in, err = startInterp(ctx, sb, ss.lang, cwd, c.IsAdmin()); err != nil {
			return Result{}, err
		}
		ss.mu.Lock()
		if ss.closed {
			ss.mu.Unlock()
			in.close()
			return Result{}, fault.New(fault.NotFound, "no such session")
		}
		ss.in, ss.hadInterp, ss.version = in, true, in.version
		if lostBefore {
			ss.count = 0
		}
		ss.mu.Unlock()
	}
	cl, err := in.run(ctx, code, cwd, l)
	if err != nil {
		return Result{}, err
	}
	ss.mu.Lock()
	ss.count++
	count := ss.count
	if cl.lost {
		ss.in = nil
	}
	ss.mu.Unlock()
	res := s.result(ss.lang, ss.id, cl, count, time.Since(start))
	res.Version = in.version
	if lostBefore {
		res.StateLost = true
		lost := "the session's previous interpreter had exited; this call ran in a new one and earlier state is lost"
		res.Outputs = append([]Output{{OutputType: "stream", Name: "stderr", Text: &lost}}, res.Outputs...)
	}
	return res, nil
}

// result turns a cell into a Result: streams first, then the driver's
// outputs, and the error's traceback lifted to the top level.
func (s *Service) result(lang, sessionID string, cl cell, count int, took time.Duration) Result {
	res := Result{Language: lang, SessionID: sessionID, Status: cl.status, Stdout: cl.stdout, Stderr: cl.stderr,
		ExitCode: cl.exitCode, ExecutionCount: count, StateLost: cl.lost, Reason: cl.reason, Truncated: cl.truncated,
		DurationMS: took.Milliseconds(), CPUMS: cl.cpu.Milliseconds(), Outputs: []Output{}}
	if cl.stdout != "" {
		t := cl.stdout
		res.Outputs = append(res.Outputs, Output{OutputType: "stream", Name: "stdout", Text: &t})
	}
	if cl.stderr != "" {
		t := cl.stderr
		res.Outputs = append(res.Outputs, Output{OutputType: "stream", Name: "stderr", Text: &t})
	}
	for _, o := range cl.outputs {
		if o.OutputType == "execute_result" {
			n := count
			o.ExecutionCount = &n
		}
		if o.OutputType == "error" && res.Traceback == nil {
			res.Traceback = o.Traceback
		}
		res.Outputs = append(res.Outputs, o)
	}
	if res.ExitCode == nil && lang != Bash {
		code := 0
		if res.Status != StatusOK {
			code = 1
		}
		res.ExitCode = &code
	}
	if lang == Bash && res.Status == StatusOK && res.ExitCode != nil && *res.ExitCode != 0 {
		res.Status = StatusError
	}
	return res
}

// lookup finds the caller's session; anything else is not found.
func (s *Service) lookup(c auth.Caller, sandboxID, id string) (*session, error) {
	ss, _, ok := s.sessions.Get(sessions.Key{Kind: kindCode, Sandbox: sandboxID, Owner: c.KeyID, ID: id})
	if !ok {
		return nil, fault.New(fault.NotFound, "no such session")
	}
	return ss, nil
}

// errSessionExists: the caller already has a session of that id (ids
// are scoped to their key, so another key's never collides).
var errSessionExists = fault.New(fault.Conflict, "session already exists")

// newSession registers a session; at the per-key or per-sandbox cap the
// least recently used idle session is ended first.
func (s *Service) newSession(c auth.Caller, sandboxID, lang, id string) (*session, error) {
	now := time.Now()
	ss := &session{id: id, owner: c.KeyID, sandbox: sandboxID, lang: lang, created: now, lastUsed: now}
	k := sessions.Key{Kind: kindCode, Sandbox: sandboxID, Owner: c.KeyID, ID: id}
	res, err := s.sessions.Reserve(c.KeyID, k, 0)
	if errors.Is(err, sessions.ErrExists) {
		return nil, errSessionExists
	}
	if err != nil {
		return nil, err
	}
	res.Commit(ss)
	return ss, nil
}

// CreateSession starts a session (its interpreter starts now, so errors
// show at once). An empty id is generated.
func (s *Service) CreateSession(ctx context.Context, c auth.Caller, sandboxID, lang, id, cwd string) (SessionInfo, error) {
	if _, ok := runtimes[lang]; !ok {
		return SessionInfo{}, fault.InvalidField("language", fmt.Sprintf("unsupported language %q", lang))
	}
	if id == "" {
		id = uuid.NewString()
	} else if err := CheckSessionID(id); err != nil {
		return SessionInfo{}, err
	}
	if cwd != "" {
		if err := agent.CheckPath(cwd); err != nil {
			return SessionInfo{}, fault.InvalidField("cwd", "cwd must be an absolute, clean path")
		}
	}
	sb, err := s.m.Resolve(ctx, c, sandboxID)
	if err != nil {
		return SessionInfo{}, err
	}
	ss, err := s.newSession(c, sb.ID(), lang, id)
	if err != nil {
		return SessionInfo{}, err
	}
	in, err := startInterp(ctx, sb, lang, cwd, c.IsAdmin())
	if err != nil {
		s.drop(ss)
		return SessionInfo{}, err
	}
	ss.mu.Lock()
	if ss.closed {
		// Ended (key revoked, sandbox stopped) while the interpreter started.
		ss.mu.Unlock()
		in.close()
		return SessionInfo{}, fault.New(fault.Conflict, "the session was ended while it started")
	}
	ss.in, ss.hadInterp, ss.version, ss.cwd = in, true, in.version, cwd
	ss.mu.Unlock()
	return ss.info(), nil
}

func (s *Service) drop(ss *session) {
	s.sessions.Remove(sessions.Key{Kind: kindCode, Sandbox: ss.sandbox, Owner: ss.owner, ID: ss.id}, ss)
	ss.shut()
}

// Sessions lists the caller's sessions in a sandbox ("" = default), of
// one language ("" = all).
func (s *Service) Sessions(ctx context.Context, c auth.Caller, sandboxID, lang string) ([]SessionInfo, error) {
	if c.Role == auth.RoleViewer && sandboxID == "" {
		// Viewers own no sessions, and resolving "" would create them a
		// default sandbox.
		return []SessionInfo{}, nil
	}
	sb, err := s.m.Resolve(ctx, c, sandboxID)
	if err != nil {
		return nil, err
	}
	rows := s.sessions.Select(func(k sessions.Key, owner string) bool { return k.Sandbox == sb.ID() && owner == c.KeyID })
	out := make([]SessionInfo, 0, len(rows))
	for _, r := range rows {
		if lang == "" || r.Session.lang == lang {
			out = append(out, r.Session.info())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// DeleteSession ends one of the caller's sessions.
func (s *Service) DeleteSession(ctx context.Context, c auth.Caller, sandboxID, id string) error {
	sb, err := s.m.Resolve(ctx, c, sandboxID)
	if err != nil {
		return err
	}
	ss, err := s.lookup(c, sb.ID(), id)
	if err != nil {
		return err
	}
	s.drop(ss)
	return nil
}

// DeleteSessions ends the caller's sessions of lang ("" = all) in a
// sandbox and reports how many.
func (s *Service) DeleteSessions(ctx context.Context, c auth.Caller, sandboxID, lang string) (int, error) {
	list, err := s.Sessions(ctx, c, sandboxID, lang)
	if err != nil {
		return 0, err
	}
	sb, err := s.m.Resolve(ctx, c, sandboxID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, in := range list {
		if ss, err := s.lookup(c, sb.ID(), in.ID); err == nil {
			s.drop(ss)
			n++
		}
	}
	return n, nil
}

// seconds converts a validated number of seconds to a duration.
func seconds(v float64) time.Duration {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return -1
	}
	return time.Duration(v * float64(time.Second))
}
