package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sessions"
)

// Watches are implemented by polling: every interval the watcher walks
// the watched tree through the init (agent.OpWalk, one round trip) and
// diffs the snapshot. Why not inotify inside the init: it would need a
// long-lived event channel in the protocol and per-watch state in PID 1,
// inotify watches are a per-user kernel resource an agent can exhaust for
// everyone on the host's user, and a recursive inotify watch must add a
// watch per directory (racing new directories). Polling reuses a bounded
// op, costs nothing while no watch exists, and is bounded here: at most
// maxWatchesPerSandbox watches, each walking at most maxWatchEntries
// entries per poll. The price is latency (up to one interval) and that a
// rename shows as remove + create.
const (
	maxWatchesPerSandbox = 8
	maxWatchEntries      = 10_000
	maxWatchEvents       = 1000 // ring of events kept per watch
	minPollInterval      = 500 * time.Millisecond
	// maxWatchIdle stops a watch nobody polled for that long, so a
	// forgotten watch does not keep a sandbox busy forever.
	maxWatchIdle = 10 * time.Minute
	// waitInterval is how often wait re-checks its one path.
	waitInterval = 200 * time.Millisecond
)

// defaultWatchExclude is AIO's default exclude list.
var defaultWatchExclude = []string{".git", "node_modules", "__pycache__", ".venv", "*.pyc", "*.pyo", ".DS_Store", "*.swp", "*.swo"}

// WatchCreateArgs is CreateWatchRequest.
type WatchCreateArgs struct {
	dispatch.On
	Path            string   `json:"path" required:"true"`
	Recursive       *bool    `json:"recursive,omitempty"`
	Exclude         []string `json:"exclude,omitempty"`
	Debounce        *int     `json:"debounce,omitempty"`
	IncludePatterns []string `json:"include_patterns,omitempty"`
}

// WatchRef names a watch (poll, events, delete).
type WatchRef struct {
	dispatch.On
	WatcherID string `json:"watcher_id"`
	Cursor    int64  `json:"cursor,omitempty"`
	Limit     *int   `json:"limit,omitempty"`
	Timeout   *int   `json:"timeout,omitempty"`
}

// WatchWaitArgs is FileWatchWaitRequest.
type WatchWaitArgs struct {
	dispatch.On
	Path       string   `json:"path" required:"true"`
	Timeout    *int     `json:"timeout,omitempty"`
	EventTypes []string `json:"event_types,omitempty"`
}

// WatchEvent is one change.
// WatchEvent is one change, with AIO's field names: is_dir,
// relative_path (to the watched path), size and mtime of the entry (for a
// removal, as last seen) and timestamp, when the change was seen; times
// are Unix epoch seconds.
type WatchEvent struct {
	Seq          int64   `json:"seq"`
	Type         string  `json:"type"` // create, write, remove, chmod
	Path         string  `json:"path"`
	RelativePath string  `json:"relative_path"`
	IsDir        bool    `json:"is_dir"`
	Size         int64   `json:"size"`
	Mtime        float64 `json:"mtime"`
	Timestamp    float64 `json:"timestamp"`
}

// newEvent builds the event of a change to rel (under the watched path
// given) seen at now.
func newEvent(typ, given, rel string, sn snap, now time.Time) WatchEvent {
	return WatchEvent{Type: typ, Path: path.Join(given, rel), RelativePath: rel, IsDir: fs.FileMode(sn.mode).IsDir(),
		Size: sn.size, Mtime: epochSeconds(sn.mtime), Timestamp: epochSeconds(now.UnixNano())}
}

// epochSeconds turns Unix nanoseconds into seconds with a fraction.
func epochSeconds(ns int64) float64 { return float64(ns) / 1e9 }

// WatchInfo describes a watch.
type WatchInfo struct {
	WatcherID       string   `json:"watcher_id"`
	Path            string   `json:"path"`
	Recursive       bool     `json:"recursive"`
	Exclude         []string `json:"exclude"`
	IncludePatterns []string `json:"include_patterns"`
	Debounce        int      `json:"debounce"`
	CreatedAt       string   `json:"created_at"`
	Cursor          int64    `json:"cursor"`
	Error           *string  `json:"error"`
	// Truncated: the tree is larger than one poll walks (maxWatchEntries,
	// or the walk caps of internal/agent: depth, visits, time), so changes
	// beyond what the baseline saw are not reported.
	Truncated bool `json:"truncated"`
}

// PollResult is what poll returns.
type PollResult struct {
	WatcherID string       `json:"watcher_id"`
	Events    []WatchEvent `json:"events"`
	Cursor    int64        `json:"cursor"`
	HasMore   bool         `json:"has_more"`
}

// WaitResult is what wait returns.
type WaitResult struct {
	Path     string      `json:"path"`
	Matched  bool        `json:"matched"`
	TimedOut bool        `json:"timed_out"`
	Event    *WatchEvent `json:"event"`
}

// StopResult is what delete returns.
type StopResult struct {
	WatcherID string `json:"watcher_id"`
	Stopped   bool   `json:"stopped"`
}

type snap struct {
	size  int64
	mtime int64
	mode  uint32
}

// Watch is one running watch.
type Watch struct {
	id, sandbox string
	info        WatchInfo
	t           target
	caller      auth.Caller
	interval    time.Duration
	stop        chan struct{}
	once        sync.Once

	// mu guards the fields below.
	mu       sync.Mutex
	events   []WatchEvent // at most maxWatchEvents, oldest first
	seq      int64
	changed  chan struct{} // closed and replaced when events arrive or the watch ends
	lastUsed time.Time
	err      string
	ended    bool
}

// kindWatch is the sessions.Key kind of watches.
const kindWatch = "watch"

// maxWatchesPerKey caps the watches of one key, all sandboxes.
const maxWatchesPerKey = 32

// watchTable holds the running watches in the one session table type
// (owner, per-key and per-sandbox caps, revocation). A running watch is
// busy (it polls its tree), so a cap refuses instead of ending another
// watch; it ends itself after maxWatchIdle without a client's poll.
type watchTable struct {
	t *sessions.Table[*Watch]
}

func newWatchTable() *watchTable {
	return &watchTable{t: sessions.New[*Watch](sessions.Limits{PerKey: maxWatchesPerKey, PerSandbox: maxWatchesPerSandbox, Idle: maxWatchIdle})}
}

func (wt *watchTable) closeAll() {
	sessions.CloseAll(wt.t.RemoveWhere(func(sessions.Key, string) bool { return true }))
}

// get returns the watch id of sandbox sb. Watch ids are random, made by
// the server: whoever may use the sandbox may use its watches.
func (wt *watchTable) get(sb, id string) *Watch {
	if rows := wt.t.Find(kindWatch, sb, id); len(rows) > 0 {
		return rows[0].Session
	}
	return nil
}

func (wt *watchTable) remove(w *Watch) {
	wt.t.Remove(sessions.Key{Kind: kindWatch, Sandbox: w.sandbox, Owner: w.caller.KeyID, ID: w.id}, w)
}

// Busy is true: a running watch is working (sessions.Session).
func (w *Watch) Busy() bool { return true }

// LastUsed is the client's last poll (sessions.Session).
func (w *Watch) LastUsed() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastUsed
}

// Ended reports the watch stopped (sessions.Session).
func (w *Watch) Ended() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

// Close stops the watch (sessions.Session): the server stops, or its
// key was revoked.
func (w *Watch) Close() { w.end("the watch was closed (server stopping or key revoked)") }

// RevokeWatches stops every watch a revoked key started (auth.OnRevoke).
func (s *Service) RevokeWatches(keyID string) { s.watches.t.Revoke(keyID) }

func (w *Watch) end(why string) {
	w.once.Do(func() {
		close(w.stop)
		w.mu.Lock()
		w.ended, w.err = true, why
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
	})
}

// WatchCreate starts a watch on a file or directory.
func (s *Service) WatchCreate(ctx context.Context, c auth.Caller, a WatchCreateArgs) (WatchInfo, error) {
	const op = "watch"
	deb := intOr(a.Debounce, 300)
	if deb < 50 || deb > 5000 {
		return WatchInfo{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, "debounce must be between 50 and 5000 ms", false, "", nil)
	}
	exclude := a.Exclude
	if exclude == nil {
		exclude = defaultWatchExclude
	}
	include := a.IncludePatterns
	if include == nil {
		include = []string{}
	}
	if err := agent.CheckPatterns(exclude, include); err != nil {
		return WatchInfo{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, err.Error(), false, "", nil)
	}
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return WatchInfo{}, fileErr(op, a.Path, err)
	}
	t, err := s.locate(ctx, f, op, a.Path, false)
	if err != nil {
		return WatchInfo{}, err
	}
	if !t.exists {
		return WatchInfo{}, newErr(fault.NotFound, op, t.given, TypeNotFound, "no such file or directory", false, "", nil)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	w := &Watch{
		id: "w" + hex.EncodeToString(rnd[:]), sandbox: f.ID(), t: t, caller: c,
		interval: max(minPollInterval, time.Duration(deb)*time.Millisecond),
		stop:     make(chan struct{}), changed: make(chan struct{}), lastUsed: time.Now(),
	}
	w.info = WatchInfo{WatcherID: w.id, Path: t.given, Recursive: boolOr(a.Recursive, true), Exclude: exclude,
		IncludePatterns: include, Debounce: deb, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	// The first snapshot is the baseline; taking it here reports a tree
	// too big to watch at once.
	base, truncated, err := s.snapshot(ctx, f, w)
	if err != nil {
		return WatchInfo{}, err
	}
	w.info.Truncated = truncated
	res, err := s.watches.t.Reserve(c.KeyID, sessions.Key{Kind: kindWatch, Sandbox: w.sandbox, ID: w.id}, maxWatchIdle)
	if err != nil {
		return WatchInfo{}, newErr(fault.Conflict, op, t.given, TypeIO,
			fmt.Sprintf("a sandbox has at most %d watches (a key %d); stop one first", maxWatchesPerSandbox, maxWatchesPerKey), false, "watch_cap", nil)
	}
	if !res.Commit(w) {
		return WatchInfo{}, newErr(fault.Conflict, op, t.given, TypeIO, "the watch was closed while it started", false, "", nil)
	}
	// The watch outlives the request that made it: it polls with
	// contexts of its own and ends on stop, idleness or the sandbox's end.
	go s.runWatch(w, base) //nolint:gosec // G118: see above

	return w.snapshotInfo(), nil
}

func (w *Watch) snapshotInfo() WatchInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.info
	in.Cursor = w.seq
	if w.err != "" {
		e := w.err
		in.Error = &e
	}
	return in
}

// snapshot walks the watched tree once; truncated says a cap cut the walk.
func (s *Service) snapshot(ctx context.Context, f FS, w *Watch) (_ map[string]snap, truncated bool, _ error) {
	const op = "watch"
	out := make(map[string]snap)
	if !w.t.isDir() {
		resp, _, err := f.File(ctx, agent.OpResolve, agent.FileReq{Path: w.t.resolved, NoFollow: true})
		if err != nil {
			return nil, false, fileErr(op, w.t.given, err)
		}
		if resp.Exists && resp.Stat != nil {
			out[""] = snap{size: resp.Stat.Size, mtime: resp.Stat.ModTime, mode: resp.Stat.Mode}
		}
		return out, false, nil
	}
	depth := 1
	if w.info.Recursive {
		depth = 0
	}
	req := agent.WalkReq{MaxDepth: depth, Hidden: true, Exclude: w.info.Exclude, Limit: maxWatchEntries, Deny: s.cfg.Policy.deny()}
	resp, _, err := f.File(ctx, agent.OpWalk, agent.FileReq{Path: w.t.resolved, NoFollow: true, Walk: &req})
	if err != nil {
		return nil, false, fileErr(op, w.t.given, err)
	}
	for _, e := range resp.Walk.Entries {
		out[e.Name] = snap{size: e.Size, mtime: e.ModTime, mode: e.Mode}
	}
	return out, resp.Walk.Truncated, nil
}

func (s *Service) runWatch(w *Watch, prev map[string]snap) {
	defer s.watches.remove(w)
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		w.mu.Lock()
		idle := time.Since(w.lastUsed) > maxWatchIdle
		w.mu.Unlock()
		if idle {
			w.end("stopped after 10 minutes without a poll")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// Resolve by id each time: a deleted sandbox ends the watch
		// instead of being started again.
		f, err := s.sandboxOf(ctx, w.caller, w.sandbox)
		var cur map[string]snap
		if err == nil {
			cur, _, err = s.snapshot(ctx, f, w)
		}
		cancel()
		if err != nil {
			w.end("the watch stopped: " + FileErrorOf("watch", w.t.given, err).Message)
			return
		}
		w.diff(prev, cur)
		prev = cur
	}
}

// diff records the changes between two snapshots.
func (w *Watch) diff(prev, cur map[string]snap) {
	now := time.Now()
	var evs []WatchEvent
	add := func(typ, rel string, sn snap) {
		if len(w.info.IncludePatterns) > 0 && !agent.MatchName(w.info.IncludePatterns, path.Base(rel), rel) {
			return
		}
		evs = append(evs, newEvent(typ, w.t.given, rel, sn, now))
	}
	for rel, c := range cur {
		p, ok := prev[rel]
		switch {
		case !ok:
			add("create", rel, c)
		case p.size != c.size || p.mtime != c.mtime:
			if !fs.FileMode(c.mode).IsDir() {
				add("write", rel, c)
			}
		case p.mode != c.mode:
			add("chmod", rel, c)
		}
	}
	for rel, p := range prev {
		if _, ok := cur[rel]; !ok {
			add("remove", rel, p)
		}
	}
	if len(evs) == 0 {
		return
	}
	sortEvents(evs)
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range evs {
		w.seq++
		evs[i].Seq = w.seq
	}
	w.events = append(w.events, evs...)
	if n := len(w.events) - maxWatchEvents; n > 0 {
		w.events = append([]WatchEvent(nil), w.events[n:]...)
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func sortEvents(evs []WatchEvent) {
	// Map order is random; order by path, then type, for stable output.
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && (evs[j].Path < evs[j-1].Path || evs[j].Path == evs[j-1].Path && evs[j].Type < evs[j-1].Type); j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}

// Next returns events after cursor (at most limit), waiting up to timeout
// for one to arrive. ended reports a stopped watch.
func (w *Watch) Next(ctx context.Context, cursor int64, limit int, timeout time.Duration) (evs []WatchEvent, last int64, more, ended bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		w.lastUsed = time.Now()
		for _, e := range w.events {
			if e.Seq > cursor {
				if len(evs) == limit {
					more = true
					break
				}
				evs = append(evs, e)
			}
		}
		last, ended = w.seq, w.ended
		ch := w.changed
		w.mu.Unlock()
		if len(evs) > 0 {
			return evs, evs[len(evs)-1].Seq, more, ended
		}
		if ended || timeout <= 0 {
			return []WatchEvent{}, cursor, false, ended
		}
		select {
		case <-ch:
		case <-deadline.C:
			return []WatchEvent{}, cursor, false, false
		case <-ctx.Done():
			return []WatchEvent{}, cursor, false, false
		}
	}
}

// ID is the watch's id.
func (w *Watch) ID() string { return w.id }

// Info describes the watch (the data of the SSE watch_started event).
func (w *Watch) Info() WatchInfo { return w.snapshotInfo() }

// WatchGet returns a caller's watch (for polling and SSE).
func (s *Service) WatchGet(ctx context.Context, c auth.Caller, sandbox, id string) (*Watch, error) {
	const op = "watch"
	f, err := s.sandboxOf(ctx, c, sandbox)
	if err != nil {
		return nil, fileErr(op, id, err)
	}
	w := s.watches.get(f.ID(), id)
	if w == nil {
		return nil, newErr(fault.NotFound, op, id, TypeNotFound, "no such watch", false, "", nil)
	}
	return w, nil
}

// WatchList lists the watches of a sandbox.
func (s *Service) WatchList(ctx context.Context, c auth.Caller, sandbox string) ([]WatchInfo, error) {
	f, err := s.sandboxOf(ctx, c, sandbox)
	if err != nil {
		return nil, fileErr("watch", "", err)
	}
	out := []WatchInfo{}
	for _, r := range s.watches.t.Select(func(k sessions.Key, _ string) bool { return k.Kind == kindWatch && k.Sandbox == f.ID() }) {
		out = append(out, r.Session.snapshotInfo())
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].CreatedAt < out[j-1].CreatedAt; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// WatchPoll returns events after the cursor, long-polling up to timeout
// seconds (at most 60).
func (s *Service) WatchPoll(ctx context.Context, c auth.Caller, a WatchRef) (PollResult, error) {
	limit, timeout := intOr(a.Limit, 100), intOr(a.Timeout, 0)
	if limit < 1 || limit > 1000 || timeout < 0 || timeout > 60 || a.Cursor < 0 {
		return PollResult{}, newErr(fault.Invalid, "watch", a.WatcherID, TypeInvalidTarget,
			"limit must be 1..1000, timeout 0..60, cursor >= 0", false, "", nil)
	}
	w, err := s.WatchGet(ctx, c, a.Sandbox, a.WatcherID)
	if err != nil {
		return PollResult{}, err
	}
	evs, cur, more, _ := w.Next(ctx, a.Cursor, limit, time.Duration(timeout)*time.Second)
	return PollResult{WatcherID: w.id, Events: evs, Cursor: cur, HasMore: more}, nil
}

// WatchDelete stops a watch.
func (s *Service) WatchDelete(ctx context.Context, c auth.Caller, a WatchRef) (StopResult, error) {
	w, err := s.WatchGet(ctx, c, a.Sandbox, a.WatcherID)
	if err != nil {
		return StopResult{}, err
	}
	w.end("stopped by the client")
	s.watches.remove(w)
	return StopResult{WatcherID: w.id, Stopped: true}, nil
}

// WatchWait waits until one path sees one of the event types (default
// all), or the timeout (default 30 s, at most 300 s) passes.
func (s *Service) WatchWait(ctx context.Context, c auth.Caller, a WatchWaitArgs) (WaitResult, error) {
	const op = "watch_wait"
	timeout := intOr(a.Timeout, 30)
	if timeout < 1 || timeout > 300 {
		return WaitResult{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, "timeout must be between 1 and 300 seconds", false, "", nil)
	}
	want := map[string]bool{}
	for _, t := range a.EventTypes {
		switch t {
		case "create", "write", "remove", "rename", "chmod":
			want[t] = true
		default:
			return WaitResult{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, "event_types: create, write, remove, rename, chmod", false, "", nil)
		}
	}
	if len(want) == 0 {
		want = map[string]bool{"create": true, "write": true, "remove": true, "rename": true, "chmod": true}
	}
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return WaitResult{}, fileErr(op, a.Path, err)
	}
	t, err := s.locate(ctx, f, op, a.Path, false)
	if err != nil {
		return WaitResult{}, err
	}
	stat := func() (snap, bool, error) {
		resp, _, err := f.File(ctx, agent.OpResolve, agent.FileReq{Path: t.resolved, NoFollow: true})
		if err != nil {
			var ae *agent.Error
			if errors.As(err, &ae) && ae.Code == "ENOENT" {
				return snap{}, false, nil
			}
			return snap{}, false, fileErr(op, t.given, err)
		}
		if !resp.Exists || resp.Stat == nil {
			return snap{}, false, nil
		}
		return snap{size: resp.Stat.Size, mtime: resp.Stat.ModTime, mode: resp.Stat.Mode}, true, nil
	}
	prev, existed := snap{mode: t.stat.Mode, size: t.stat.Size, mtime: t.stat.ModTime}, t.exists
	deadline := time.Now().Add(time.Duration(timeout) * time.Second)
	tick := time.NewTicker(waitInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return WaitResult{}, fileErr(op, t.given, ctx.Err())
		case <-tick.C:
		}
		cur, exists, err := stat()
		if err != nil {
			return WaitResult{}, err
		}
		typ := ""
		switch {
		case !existed && exists:
			typ = "create"
		case existed && !exists:
			typ = "remove"
			if want["rename"] && !want["remove"] {
				typ = "rename"
			}
		case exists && (cur.size != prev.size || cur.mtime != prev.mtime):
			typ = "write"
		case exists && cur.mode != prev.mode:
			typ = "chmod"
		}
		if typ != "" && want[typ] {
			sn := cur
			if !exists {
				sn = prev
			}
			sn.mode |= prev.mode & uint32(fs.ModeDir)
			e := newEvent(typ, t.given, "", sn, time.Now())
			ev := &e
			return WaitResult{Path: t.given, Matched: true, Event: ev}, nil
		}
		prev, existed = cur, exists
		if time.Now().After(deadline) {
			return WaitResult{Path: t.given, TimedOut: true}, nil
		}
	}
}
