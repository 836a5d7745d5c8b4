package shell

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/sessions"
)

// Service defaults, with their reasons.
const (
	// DefaultIdleTimeout ends a session nobody used (and no terminal is
	// attached to) for this long: each holds a shell and an execution
	// group.
	DefaultIdleTimeout = 30 * time.Minute
	// DefaultImplicitIdle ends a session the server created for a
	// shell/exec call that named none (the AIO SDK's default use) after
	// this much idleness: such callers rarely come back to it, and one is
	// made per call, so the long timeout would let a busy agent grow the
	// server and fill its sandbox with shells.
	DefaultImplicitIdle = 30 * time.Second
	// DefaultMaxSessions caps shell sessions plus bash sessions per key.
	DefaultMaxSessions = 32
	// DefaultMaxPerSandbox caps shell plus bash sessions in one sandbox,
	// all keys: each shell is a process of the sandbox's pids budget, and
	// 16 is the per-sandbox execution cap (agents fan out that many calls).
	DefaultMaxPerSandbox = 16
	// endedKeep is how long an ended session stays listed.
	endedKeep = 2 * time.Minute
	// reapEvery paces the idle reaper.
	reapEvery = 10 * time.Second
	// MaxWait caps how long one request waits for a command.
	MaxWait = sandbox.MaxTimeout
)

// Session kinds in the table.
const (
	kindShell = "shell"
	kindBash  = "bash"
)

// Options configures a Service.
type Options struct {
	// IdleTimeout: 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// ImplicitIdle is the idle timeout of sessions made for id-less
	// shell/exec calls: 0 means DefaultImplicitIdle.
	ImplicitIdle time.Duration
	// MaxSessions per key: 0 means DefaultMaxSessions.
	MaxSessions int
	// MaxPerSandbox: 0 means DefaultMaxPerSandbox.
	MaxPerSandbox int
	// ReapEvery paces the idle reaper: 0 means every 10 s.
	ReapEvery time.Duration
	// Limiter caps live terminals per key (ratelimit.Terminal); nil: none.
	Limiter *ratelimit.Limiter
	Log     *slog.Logger
	// Audit records the end of commands (their start is audited by the
	// dispatcher); nil records nothing.
	Audit func(ctx context.Context, e audit.Entry)
}

// Service holds every shell and bash session of the server.
type Service struct {
	m    *sandbox.Manager
	opt  Options
	log  *slog.Logger
	stop context.CancelFunc
	// table holds shell (*Session) and bash (*BashSession) sessions, so
	// the caps count both.
	table *sessions.Table[sessions.Session]

	// mu guards the maps below.
	mu        sync.Mutex
	terminals map[*Terminal]struct{}
	info      map[string]SandboxInfo // by sandbox id
}

// New starts the service and its idle reaper (until Close).
func New(m *sandbox.Manager, opt Options) *Service {
	if opt.IdleTimeout <= 0 {
		opt.IdleTimeout = DefaultIdleTimeout
	}
	if opt.ImplicitIdle <= 0 {
		opt.ImplicitIdle = DefaultImplicitIdle
	}
	if opt.MaxSessions <= 0 {
		opt.MaxSessions = DefaultMaxSessions
	}
	if opt.MaxPerSandbox <= 0 {
		opt.MaxPerSandbox = DefaultMaxPerSandbox
	}
	if opt.ReapEvery <= 0 {
		opt.ReapEvery = reapEvery
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{m: m, opt: opt, log: opt.Log, stop: cancel,
		table: sessions.New[sessions.Session](sessions.Limits{PerKey: opt.MaxSessions, PerSandbox: opt.MaxPerSandbox,
			Idle: opt.IdleTimeout, EndedKeep: endedKeep}),
		terminals: map[*Terminal]struct{}{}, info: map[string]SandboxInfo{}}
	go s.reap(ctx)
	return s
}

// Close ends every session and terminal.
func (s *Service) Close() {
	s.stop()
	s.mu.Lock()
	terms := make([]*Terminal, 0, len(s.terminals))
	for t := range s.terminals {
		terms = append(terms, t)
	}
	s.terminals = map[*Terminal]struct{}{}
	s.mu.Unlock()
	for _, t := range terms {
		t.End("server stopping")
	}
	sessions.CloseAll(s.table.RemoveWhere(func(sessions.Key, string) bool { return true }))
}

// Revoke ends the terminals and sessions of a revoked key (auth.OnRevoke)
// and waits until their processes are killed.
func (s *Service) Revoke(keyID string) {
	s.mu.Lock()
	var terms []*Terminal
	for t := range s.terminals {
		if t.owner == keyID {
			terms = append(terms, t)
		}
	}
	s.mu.Unlock()
	for _, t := range terms {
		t.End("key revoked")
	}
	s.table.Revoke(keyID)
}

// reap ends idle sessions and forgets ended ones.
func (s *Service) reap(ctx context.Context) {
	t := time.NewTicker(s.opt.ReapEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.reapOnce()
	}
}

func (s *Service) reapOnce() {
	for _, r := range s.table.Reap(time.Now()) {
		s.log.Info("session expired", "kind", r.Key.Kind, "session", r.Key.ID, "sandbox", r.Key.Sandbox)
	}
	s.mu.Lock()
	for id := range s.info {
		if _, err := s.m.Get(sandbox.Caller{Admin: true}, id); err != nil {
			delete(s.info, id)
		}
	}
	s.mu.Unlock()
}

// sees reports whether c may see what owner made: its own, or everything
// for admins and viewers.
func sees(c auth.Caller, owner string) bool {
	return c.KeyID == owner || sandbox.CallerOf(c).Admin
}

var errNoSession = fault.New(fault.NotFound, "session not found")

// find returns the session of kind named id in sandbox sb that c may
// see, and its key in the table: c's own, or for an admin (who sees every
// key's sessions) another key's when c has none of that id.
func (s *Service) find(c auth.Caller, kind string, sb *sandbox.Sandbox, id string) (sessions.Session, sessions.Key, bool) {
	k := sessions.Key{Kind: kind, Sandbox: sb.ID(), Owner: c.KeyID, ID: id}
	if v, _, ok := s.table.Get(k); ok {
		return v, k, true
	}
	if sandbox.CallerOf(c).Admin {
		if rows := s.table.Find(kind, sb.ID(), id); len(rows) > 0 {
			return rows[0].Session, rows[0].Key, true
		}
	}
	return nil, k, false
}

// Session returns a shell session of sandbox sb the caller may see.
func (s *Service) Session(c auth.Caller, sb *sandbox.Sandbox, id string) (*Session, error) {
	v, _, ok := s.find(c, kindShell, sb, id)
	x, isShell := v.(*Session)
	if !ok || !isShell {
		return nil, errNoSession
	}
	return x, nil
}

// ownSession returns the caller's own shell session id in sb, or nil.
func (s *Service) ownSession(c auth.Caller, sb *sandbox.Sandbox, id string) *Session {
	v, _, _ := s.table.Get(sessions.Key{Kind: kindShell, Sandbox: sb.ID(), Owner: c.KeyID, ID: id})
	x, _ := v.(*Session)
	return x
}

// ExecSession returns the caller's shell session id in sb, starting it
// when the caller has none of that id (AIO: a new id on shell/exec starts
// a session with it). Another key's session of the same id is never
// used: the caller gets its own. An empty id starts an implicit session
// with a generated id and the short idle timeout.
func (s *Service) ExecSession(ctx context.Context, c auth.Caller, sb *sandbox.Sandbox, id string) (*Session, error) {
	if id == "" {
		return s.createSession(ctx, c, sb, "", KindExec, "", 0, 0, 0, true)
	}
	for range 2 {
		if x := s.ownSession(c, sb, id); x != nil {
			x.touch()
			return x, nil
		}
		x, err := s.createSession(ctx, c, sb, id, KindExec, "", 0, 0, 0, false)
		if !errors.Is(err, sessions.ErrExists) {
			return x, err
		}
		// Another call of the caller's started it meanwhile: use it.
	}
	return nil, sessions.ErrExists
}

// newID checks a caller's id or makes one.
func newID(field, id string) (string, error) {
	if id == "" {
		return uuid.NewString(), nil
	}
	if err := sessions.CheckID(field, id); err != nil {
		return "", err
	}
	return id, nil
}

// CreateSession starts a shell session in sb for c. An implicit session
// (made for a call that named none) gets the short ImplicitIdle timeout.
// At the per-key or per-sandbox cap the least recently used idle session
// is closed first (AIO clients create a session per call when they name
// none, and must not run into the cap for that).
func (s *Service) CreateSession(ctx context.Context, c auth.Caller, sb *sandbox.Sandbox, id, kind, dir string, noChange time.Duration, rows, cols uint16) (*Session, error) {
	return s.createSession(ctx, c, sb, id, kind, dir, noChange, rows, cols, false)
}

func (s *Service) createSession(ctx context.Context, c auth.Caller, sb *sandbox.Sandbox, id, kind, dir string, noChange time.Duration, rows, cols uint16, implicit bool) (*Session, error) {
	id, err := newID("id", id)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		dir = "/workspace"
	}
	if agent.CheckPath(dir) != nil {
		return nil, fault.InvalidField("exec_dir", "exec_dir must be an absolute, clean path")
	}
	idle := s.opt.IdleTimeout
	if implicit {
		idle = s.opt.ImplicitIdle
	}
	res, err := s.table.Reserve(c.KeyID, sessions.Key{Kind: kindShell, Sandbox: sb.ID(), ID: id}, idle)
	if err != nil {
		return nil, err
	}
	x, err := startSession(ctx, sb, id, c.KeyID, kind, dir, c.IsAdmin(), rows, cols)
	if err != nil {
		res.Cancel()
		return nil, err
	}
	if noChange > 0 {
		x.noChange = noChange
	}
	x.claimed = implicit // not shared yet: no lock needed
	x.onFinish = func(c *command, status string, exit *int) {
		s.finished("shell.finish", x.Owner, x.Sandbox, c.text, x.ID+"/"+c.id, status, exit, time.Since(c.started))
	}
	if !res.Commit(x) {
		return nil, fault.New(fault.Conflict, "the session was ended while it started (key revoked or sandbox stopped)")
	}
	return x, nil
}

// DeleteSession ends and forgets a session.
func (s *Service) DeleteSession(c auth.Caller, sb *sandbox.Sandbox, id string) error {
	v, k, ok := s.find(c, kindShell, sb, id)
	x, isShell := v.(*Session)
	if !ok || !isShell {
		return errNoSession
	}
	if s.table.Remove(k, x) {
		x.Close()
	}
	return nil
}

// DeleteAll ends the caller's sessions in sb (an admin's: all of sb's).
func (s *Service) DeleteAll(c auth.Caller, sb *sandbox.Sandbox) int {
	out := s.table.RemoveWhere(func(k sessions.Key, owner string) bool {
		return k.Kind == kindShell && k.Sandbox == sb.ID() && sees(c, owner)
	})
	sessions.CloseAll(out)
	return len(out)
}

// EndSandbox ends every session of sandbox id (it was deleted or stopped
// by a revocation).
func (s *Service) EndSandbox(id string) {
	sessions.CloseAll(s.table.RemoveWhere(func(k sessions.Key, _ string) bool { return k.Sandbox == id }))
}

// List returns the sessions c may see: of sandbox sb, or of every sandbox
// when sb is nil (the monitoring view).
func (s *Service) List(c auth.Caller, sb *sandbox.Sandbox) []Info {
	rows := s.table.Select(func(k sessions.Key, owner string) bool {
		return k.Kind == kindShell && sees(c, owner) && (sb == nil || k.Sandbox == sb.ID())
	})
	out := make([]Info, 0, len(rows))
	for _, r := range rows {
		if x, ok := r.Session.(*Session); ok {
			out = append(out, x.Info())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// Stats is AIO's ShellSessionStats.
type Stats struct {
	Total          int     `json:"total_sessions"`
	Active         int     `json:"active_sessions"`
	Idle           int     `json:"idle_sessions"`
	Max            int     `json:"max_sessions"`
	SessionTimeout int     `json:"session_timeout"`
	UsageRatio     float64 `json:"usage_ratio"`
}

// activeWindow is AIO's "used within the last 5 minutes".
const activeWindow = 5 * time.Minute

// Stats reports the sessions c may see.
func (s *Service) Stats(c auth.Caller, sb *sandbox.Sandbox) Stats {
	list := s.List(c, sb)
	st := Stats{Total: len(list), Max: s.opt.MaxSessions, SessionTimeout: int(s.opt.IdleTimeout.Seconds())}
	for _, in := range list {
		if time.Duration(in.IdleSeconds)*time.Second < activeWindow {
			st.Active++
		} else {
			st.Idle++
		}
	}
	st.UsageRatio = float64(st.Total) / float64(st.Max)
	return st
}

// Bash returns a bash session of sb the caller may see.
func (s *Service) Bash(c auth.Caller, sb *sandbox.Sandbox, id string) (*BashSession, error) {
	v, _, ok := s.find(c, kindBash, sb, id)
	b, isBash := v.(*BashSession)
	if !ok || !isBash {
		return nil, errNoSession
	}
	return b, nil
}

// ExecBash returns the caller's bash session id in sb, starting it (in
// dir) when the caller has none of that id; see ExecSession.
func (s *Service) ExecBash(c auth.Caller, sb *sandbox.Sandbox, id, dir string) (*BashSession, error) {
	if id == "" {
		return s.CreateBash(c, sb, "", dir)
	}
	for range 2 {
		v, _, _ := s.table.Get(sessions.Key{Kind: kindBash, Sandbox: sb.ID(), Owner: c.KeyID, ID: id})
		if b, ok := v.(*BashSession); ok {
			return b, nil
		}
		b, err := s.CreateBash(c, sb, id, dir)
		if !errors.Is(err, sessions.ErrExists) {
			return b, err
		}
	}
	return nil, sessions.ErrExists
}

// CreateBash makes a bash session in sb.
func (s *Service) CreateBash(c auth.Caller, sb *sandbox.Sandbox, id, dir string) (*BashSession, error) {
	id, err := newID("session_id", id)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		dir = "/workspace"
	}
	if agent.CheckPath(dir) != nil {
		return nil, fault.InvalidField("exec_dir", "exec_dir must be an absolute, clean path")
	}
	res, err := s.table.Reserve(c.KeyID, sessions.Key{Kind: kindBash, Sandbox: sb.ID(), ID: id}, s.opt.IdleTimeout)
	if err != nil {
		return nil, err
	}
	b := newBashSession(id, sb.ID(), c.KeyID, dir)
	b.onFinish = func(cmd *BashCommand) {
		s.finished("bash.finish", b.Owner, b.Sandbox, cmd.Command, cmd.ID, cmd.Status(), cmd.ExitCode(), time.Since(cmd.Started))
	}
	if !res.Commit(b) {
		return nil, fault.New(fault.Conflict, "the session was ended while it started (key revoked or sandbox stopped)")
	}
	return b, nil
}

// CloseBash closes and forgets a bash session.
func (s *Service) CloseBash(c auth.Caller, sb *sandbox.Sandbox, id string) error {
	v, k, ok := s.find(c, kindBash, sb, id)
	b, isBash := v.(*BashSession)
	if !ok || !isBash {
		return errNoSession
	}
	if s.table.Remove(k, b) {
		b.close()
	}
	return nil
}

// ListBash returns the bash sessions of sb the caller may see.
func (s *Service) ListBash(c auth.Caller, sb *sandbox.Sandbox) []BashInfo {
	rows := s.table.Select(func(k sessions.Key, owner string) bool {
		return k.Kind == kindBash && k.Sandbox == sb.ID() && sees(c, owner)
	})
	out := make([]BashInfo, 0, len(rows))
	for _, r := range rows {
		if b, ok := r.Session.(*BashSession); ok {
			out = append(out, b.Info())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// track registers a live terminal (for revocation and Close).
func (s *Service) track(t *Terminal) {
	s.mu.Lock()
	s.terminals[t] = struct{}{}
	s.mu.Unlock()
}

func (s *Service) untrack(t *Terminal) {
	s.mu.Lock()
	delete(s.terminals, t)
	s.mu.Unlock()
}

// finished audits the end of a command (action shell.finish or
// bash.finish). Output is never recorded.
func (s *Service) finished(action, actor, sb, command, id, status string, exit *int, took time.Duration) {
	if s.opt.Audit == nil {
		return
	}
	d := map[string]any{"command": command, "command_id": id, "duration_ms": took.Milliseconds()}
	if exit != nil {
		d["exit_code"] = *exit
	}
	s.opt.Audit(context.Background(), audit.Entry{Actor: actor, Action: action, Sandbox: sb, Verdict: status, Detail: d})
}
