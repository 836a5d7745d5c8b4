package shell

import (
	"context"
	"log/slog"
	"regexp"
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
)

// Service defaults, with their reasons.
const (
	// DefaultIdleTimeout ends a session nobody used (and no terminal is
	// attached to) for this long: each holds a shell and an execution
	// group.
	DefaultIdleTimeout = 30 * time.Minute
	// DefaultMaxSessions caps shell sessions plus bash sessions per key.
	DefaultMaxSessions = 32
	// endedKeep is how long an ended session stays listed.
	endedKeep = 2 * time.Minute
	// reapEvery paces the idle reaper.
	reapEvery = 15 * time.Second
	// MaxWait caps how long one request waits for a command.
	MaxWait = sandbox.MaxTimeout
)

// sessionID is what callers may name a session.
var sessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Options configures a Service.
type Options struct {
	// IdleTimeout: 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxSessions per key: 0 means DefaultMaxSessions.
	MaxSessions int
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

	// mu guards the maps below.
	mu        sync.Mutex
	sessions  map[string]*Session     // by sandbox + "/" + id
	bash      map[string]*BashSession // by sandbox + "/" + id
	terminals map[*Terminal]struct{}
	info      map[string]SandboxInfo // by sandbox id
}

// New starts the service and its idle reaper (until Close).
func New(m *sandbox.Manager, opt Options) *Service {
	if opt.IdleTimeout <= 0 {
		opt.IdleTimeout = DefaultIdleTimeout
	}
	if opt.MaxSessions <= 0 {
		opt.MaxSessions = DefaultMaxSessions
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{m: m, opt: opt, log: opt.Log, stop: cancel, sessions: map[string]*Session{}, bash: map[string]*BashSession{},
		terminals: map[*Terminal]struct{}{}, info: map[string]SandboxInfo{}}
	go s.reap(ctx)
	return s
}

// Close ends every session and terminal.
func (s *Service) Close() {
	s.stop()
	s.mu.Lock()
	sess := make([]*Session, 0, len(s.sessions))
	for _, x := range s.sessions {
		sess = append(sess, x)
	}
	bs := make([]*BashSession, 0, len(s.bash))
	for _, b := range s.bash {
		bs = append(bs, b)
	}
	terms := make([]*Terminal, 0, len(s.terminals))
	for t := range s.terminals {
		terms = append(terms, t)
	}
	s.sessions, s.bash, s.terminals = map[string]*Session{}, map[string]*BashSession{}, map[*Terminal]struct{}{}
	s.mu.Unlock()
	for _, t := range terms {
		t.End("server stopping")
	}
	for _, x := range sess {
		if x.proc != nil {
			x.Close()
		}
	}
	for _, b := range bs {
		b.close()
	}
}

// Revoke ends the terminals and sessions of a revoked key (auth.OnRevoke;
// it does not block).
func (s *Service) Revoke(keyID string) {
	s.mu.Lock()
	var terms []*Terminal
	for t := range s.terminals {
		if t.owner == keyID {
			terms = append(terms, t)
		}
	}
	var sess []*Session
	for k, x := range s.sessions {
		if x.Owner == keyID {
			sess = append(sess, x)
			delete(s.sessions, k)
		}
	}
	var bs []*BashSession
	for k, b := range s.bash {
		if b.Owner == keyID {
			bs = append(bs, b)
			delete(s.bash, k)
		}
	}
	s.mu.Unlock()
	for _, t := range terms {
		t.End("key revoked")
	}
	go func() {
		for _, x := range sess {
			if x.proc != nil {
				x.Close()
			}
		}
		for _, b := range bs {
			b.close()
		}
	}()
}

// reap ends idle sessions and forgets ended ones.
func (s *Service) reap(ctx context.Context) {
	t := time.NewTicker(reapEvery)
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
	var closeSess []*Session
	var closeBash []*BashSession
	s.mu.Lock()
	for k, x := range s.sessions {
		idle, attached, ended := x.idle()
		switch {
		case ended && idle > endedKeep:
			delete(s.sessions, k)
		case !ended && !attached && idle > s.opt.IdleTimeout:
			delete(s.sessions, k)
			closeSess = append(closeSess, x)
		}
	}
	for k, b := range s.bash {
		if idle, _ := b.idle(); idle > s.opt.IdleTimeout {
			delete(s.bash, k)
			closeBash = append(closeBash, b)
		}
	}
	for id := range s.info {
		if _, err := s.m.Get(sandbox.Caller{Admin: true}, id); err != nil {
			delete(s.info, id)
		}
	}
	s.mu.Unlock()
	for _, x := range closeSess {
		s.log.Info("shell session expired", "session", x.ID, "sandbox", x.Sandbox)
		x.Close()
	}
	for _, b := range closeBash {
		s.log.Info("bash session expired", "session", b.ID, "sandbox", b.Sandbox)
		b.close()
	}
}

// sees reports whether c may see what owner made: its own, or everything
// for admins and viewers.
func sees(c auth.Caller, owner string) bool {
	return c.KeyID == owner || sandbox.CallerOf(c).Admin
}

var errNoSession = fault.New(fault.NotFound, "session not found")

// Session returns a shell session of sandbox sb the caller may see.
func (s *Service) Session(c auth.Caller, sb *sandbox.Sandbox, id string) (*Session, error) {
	s.mu.Lock()
	x := s.sessions[sb.ID()+"/"+id]
	s.mu.Unlock()
	if x == nil || x.proc == nil || !sees(c, x.Owner) {
		return nil, errNoSession
	}
	return x, nil
}

// countLocked is how many sessions owner holds. Callers hold mu.
func (s *Service) countLocked(owner string) int {
	n := 0
	for _, x := range s.sessions {
		if x.Owner == owner {
			n++
		}
	}
	for _, b := range s.bash {
		if b.Owner == owner {
			n++
		}
	}
	return n
}

// newID checks a caller's id or makes one.
func newID(id string) (string, error) {
	if id == "" {
		return uuid.NewString(), nil
	}
	if !sessionID.MatchString(id) {
		return "", fault.InvalidField("id", "a session id is 1-64 letters, digits, '.', '_' or '-'")
	}
	return id, nil
}

// reserveLocked checks that owner may add a session named key. At the cap
// it evicts owner's least recently used session that is idle (ended, or no
// command running and no terminal attached): AIO clients create a session
// per call when they name none, and must not run into the cap for that.
// Callers hold mu.
func (s *Service) reserveLocked(owner, key string, exists bool) error {
	if exists {
		return fault.New(fault.Conflict, "a session with this id exists")
	}
	if s.countLocked(owner) < s.opt.MaxSessions {
		return nil
	}
	var (
		oldest  time.Time
		evictFn func()
		evictK  string
		isBash  bool
	)
	for k, x := range s.sessions {
		if x.Owner != owner || x.proc == nil {
			continue
		}
		idle, attached, ended := x.idle()
		running := false
		if c := x.current(); c != nil && x.status(c) == StatusRunning {
			running = true
		}
		if (ended || (!running && !attached)) && (evictFn == nil || time.Now().Add(-idle).Before(oldest)) {
			oldest, evictK, isBash = time.Now().Add(-idle), k, false
			x := x
			evictFn = func() { x.Close() }
		}
	}
	for k, b := range s.bash {
		if b.Owner != owner {
			continue
		}
		idle, running := b.idle()
		if !running && (evictFn == nil || time.Now().Add(-idle).Before(oldest)) {
			oldest, evictK, isBash = time.Now().Add(-idle), k, true
			b := b
			evictFn = b.close
		}
	}
	if evictFn == nil {
		return fault.Errorf(fault.Conflict, "at most %d sessions per key, all busy; delete one first", s.opt.MaxSessions)
	}
	if isBash {
		delete(s.bash, evictK)
	} else {
		delete(s.sessions, evictK)
	}
	s.log.Info("session evicted for a new one", "owner", owner, "session", evictK)
	go evictFn()
	return nil
}

// CreateSession starts a shell session in sb for c.
func (s *Service) CreateSession(ctx context.Context, c auth.Caller, sb *sandbox.Sandbox, id, kind, dir string, noChange time.Duration, rows, cols uint16) (*Session, error) {
	id, err := newID(id)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		dir = "/workspace"
	}
	if agent.CheckPath(dir) != nil {
		return nil, fault.InvalidField("exec_dir", "exec_dir must be an absolute, clean path")
	}
	key := sb.ID() + "/" + id
	s.mu.Lock()
	_, exists := s.sessions[key]
	if err := s.reserveLocked(c.KeyID, key, exists); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	// A placeholder keeps the id and the count while the shell starts.
	placeholder := &Session{ID: id, Sandbox: sb.ID(), Owner: c.KeyID, terminated: true, lastUsed: time.Now()}
	s.sessions[key] = placeholder
	s.mu.Unlock()
	x, err := startSession(ctx, sb, id, c.KeyID, kind, dir, c.IsAdmin(), rows, cols)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[key] == placeholder {
		delete(s.sessions, key)
	}
	if err != nil {
		return nil, err
	}
	if noChange > 0 {
		x.noChange = noChange
	}
	x.onFinish = func(c *command, status string, exit *int) {
		s.finished("shell.finish", x.Owner, x.Sandbox, c.text, x.ID+"/"+c.id, status, exit, time.Since(c.started))
	}
	s.sessions[key] = x
	return x, nil
}

// DeleteSession ends and forgets a session.
func (s *Service) DeleteSession(c auth.Caller, sb *sandbox.Sandbox, id string) error {
	x, err := s.Session(c, sb, id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.sessions[sb.ID()+"/"+id] == x {
		delete(s.sessions, sb.ID()+"/"+id)
	}
	s.mu.Unlock()
	if x.proc != nil {
		x.Close()
	}
	return nil
}

// DeleteAll ends the caller's sessions in sb (an admin's: all of sb's).
func (s *Service) DeleteAll(c auth.Caller, sb *sandbox.Sandbox) int {
	var out []*Session
	s.mu.Lock()
	for k, x := range s.sessions {
		if x.Sandbox == sb.ID() && sees(c, x.Owner) && x.proc != nil {
			out = append(out, x)
			delete(s.sessions, k)
		}
	}
	s.mu.Unlock()
	for _, x := range out {
		x.Close()
	}
	return len(out)
}

// List returns the sessions c may see: of sandbox sb, or of every sandbox
// when sb is nil (the monitoring view).
func (s *Service) List(c auth.Caller, sb *sandbox.Sandbox) []Info {
	s.mu.Lock()
	all := make([]*Session, 0, len(s.sessions))
	for _, x := range s.sessions {
		if x.proc != nil && sees(c, x.Owner) && (sb == nil || x.Sandbox == sb.ID()) {
			all = append(all, x)
		}
	}
	s.mu.Unlock()
	out := make([]Info, 0, len(all))
	for _, x := range all {
		out = append(out, x.Info())
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
	s.mu.Lock()
	b := s.bash[sb.ID()+"/"+id]
	s.mu.Unlock()
	if b == nil || !sees(c, b.Owner) {
		return nil, errNoSession
	}
	return b, nil
}

// CreateBash makes a bash session in sb.
func (s *Service) CreateBash(c auth.Caller, sb *sandbox.Sandbox, id, dir string) (*BashSession, error) {
	id, err := newID(id)
	if err != nil {
		return nil, fault.InvalidField("session_id", fault.Public(err))
	}
	if dir == "" {
		dir = "/workspace"
	}
	if agent.CheckPath(dir) != nil {
		return nil, fault.InvalidField("exec_dir", "exec_dir must be an absolute, clean path")
	}
	key := sb.ID() + "/" + id
	s.mu.Lock()
	defer s.mu.Unlock()
	_, exists := s.bash[key]
	if err := s.reserveLocked(c.KeyID, key, exists); err != nil {
		return nil, err
	}
	b := newBashSession(id, sb.ID(), c.KeyID, dir)
	b.onFinish = func(cmd *BashCommand) {
		s.finished("bash.finish", b.Owner, b.Sandbox, cmd.Command, cmd.ID, cmd.Status(), cmd.ExitCode(), time.Since(cmd.Started))
	}
	s.bash[key] = b
	return b, nil
}

// CloseBash closes and forgets a bash session.
func (s *Service) CloseBash(c auth.Caller, sb *sandbox.Sandbox, id string) error {
	b, err := s.Bash(c, sb, id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.bash, sb.ID()+"/"+id)
	s.mu.Unlock()
	b.close()
	return nil
}

// ListBash returns the bash sessions of sb the caller may see.
func (s *Service) ListBash(c auth.Caller, sb *sandbox.Sandbox) []BashInfo {
	s.mu.Lock()
	all := make([]*BashSession, 0, len(s.bash))
	for _, b := range s.bash {
		if sees(c, b.Owner) && b.Sandbox == sb.ID() {
			all = append(all, b)
		}
	}
	s.mu.Unlock()
	out := make([]BashInfo, 0, len(all))
	for _, b := range all {
		out = append(out, b.Info())
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
