package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
	"github.com/sandhold/sandhold/internal/sandbox/hostids"
	"github.com/sandhold/sandhold/internal/sandbox/netmode"
	"github.com/sandhold/sandhold/internal/sandbox/selfcheck"
	"github.com/sandhold/sandhold/internal/sandbox/sleepgate"
	"github.com/sandhold/sandhold/internal/sandbox/snapkeep"
	"github.com/sandhold/sandhold/internal/sandbox/spareinit"
	"github.com/sandhold/sandhold/internal/sandbox/speccheck"
	"github.com/sandhold/sandhold/internal/sandbox/startsteps"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
	"github.com/sandhold/sandhold/internal/sandbox/warmpool"
	"github.com/sandhold/sandhold/internal/snapshot"
	"github.com/sandhold/sandhold/internal/template"
)

// Records persists sandbox records (the store implements it).
type Records interface {
	PutSandbox(ctx context.Context, r Record) error
	DeleteSandbox(ctx context.Context, id string) error
	ListSandboxes(ctx context.Context) ([]Record, error)
}

// ClusterRecords is Records shared by the nodes of a cluster: the per-key
// cap (MaxPerOwner) counts the key's sandboxes on the other nodes too.
type ClusterRecords interface {
	Records
	CountOwnedElsewhere(ctx context.Context, owner string) (int, error)
}

// Event is one audited action the manager takes on its own: expiry, idle
// stops, the end of a background execution. Calls made by clients are
// audited by the dispatcher.
type Event struct {
	Actor   string
	Action  string // sandbox.create, sandbox.delete, sandbox.pause, exec.run, …
	Sandbox string
	Verdict string // allowed, denied, error, completed, timed_out, killed
	Detail  map[string]any
}

// Config holds the manager's settings, taken from the server's Config.
type Config struct {
	DataDir string
	// Node names this node in a cluster (shown in each sandbox's Info).
	Node string
	// Max are the server's maxima; Default applies where a spec says 0.
	Max, Default Limits
	TmpBytes     int64
	// MaxPTYs caps each sandbox's terminals (its devpts max=); 0:
	// agent.DefaultMaxPTYs.
	MaxPTYs int
	// KernelLimits bound what the kernel counts per user of a sandbox
	// (agent.KernelLimits); zero fields take the agent's defaults.
	KernelLimits agent.KernelLimits
	// OutputBudget bounds the command output kept in server memory, per
	// sandbox owner and in all (outbuf.Budget); nil: each stream's own
	// cap only.
	OutputBudget *outbuf.Budget
	WarmPool     int
	// SpareInits is how many inits are cloned ahead for cold creates
	// (spares.go); 0 none.
	SpareInits int
	// WarmPools are pre-started sandboxes per public template, by its
	// name:tag.
	WarmPools map[string]int
	// IdleTTL stops (not deletes) a sandbox idle that long; 0 never.
	IdleTTL time.Duration
	// IdleSleep is the quiet period after which an idle init sleeps in
	// its keeper: 0 the init's default (30 s), below 0 never.
	IdleSleep          time.Duration
	MaxPerOwner        int
	MaxExecsPerSandbox int
	// DiskBudget bounds what the workspace images may hold on the host
	// (the guard, diskguard.go); DiskOvercommit times it caps the sum of
	// their quotas (disk.go; below 1: 1). 0: neither.
	DiskBudget     int64
	DiskOvercommit int
	// DiskFloor is the data dir's free space under which the guard stops
	// workspace growth; 0: none.
	DiskFloor int64
	AllowSudo bool
	Insecure  bool
	// LoopbackPorts are the ports inside a sandbox that its code may bind
	// and DialPort reaches (reach.go): LoopbackPorts(preview ports).
	LoopbackPorts []uint16
	// InitExe and InitArgs start the init; default: this binary, "init".
	InitExe  string
	InitArgs []string
	// InitFile, if set, is the lean init in a sealed memfd (package
	// initbin); it is run instead of InitExe. The caller owns it.
	InitFile *os.File
	// Launcher, if set, clones the inits (agent.Launcher) so this process
	// never forks its whole address space; the caller owns it.
	Launcher *agent.Launcher
	// Templates is the template store sandboxes may be made from
	// (template.go); nil: only the host template.
	Templates *template.Store
	// Snapshots keeps snapshots (snapshot.go); nil: none.
	Snapshots *snapshot.Store
	// SnapshotBudget bounds what one key's snapshots hold; 0: none
	// (the disk budget still counts them).
	SnapshotBudget int64
	Log            *slog.Logger
}

// Caps with their reasons.
const (
	// maxSlots bounds host id ranges: 1<<30 + slot*65536 must stay below
	// 2^31 so no range reaches ids that tools treat as negative.
	maxSlots = 16000
	// idBase is far above any host account or /etc/subuid range.
	idBase = 1 << 30
	// sandboxUID is the sandbox user inside.
	sandboxUID = 1000
	// launchTimeout bounds one init's start and setup, counted from when
	// its workspace is ready (Sandbox.startLocked).
	launchTimeout = 30 * time.Second
	// defaultExecsPerSandbox caps concurrent executions per sandbox when
	// the configuration names no cap: each holds an execution cgroup and
	// server goroutines.
	defaultExecsPerSandbox = 16
)

// Manager owns every sandbox of the server.
type Manager struct {
	cfg     Config
	records Records
	audit   func(context.Context, Event)
	cg      cgroup.Manager
	log     *slog.Logger

	pool *warmpool.Pool[*Sandbox]
	// pools are every warm pool: pool (the host template's) first, then
	// one per template of SANDBOX_WARM_POOL.
	pools []*warmpool.Pool[*Sandbox]
	// defaultMu serialises creating default sandboxes (one per key).
	defaultMu sync.Mutex
	// layers are the isolation layers the last init reported (Layers).
	layers selfcheck.Last
	// spares are inits cloned ahead for cold creates (spares.go).
	spares *spareinit.Spares
	net    netmode.Hub // egress wiring (network.go)
	obs    observers   // metrics hooks (observe.go)

	// wst holds pre-formatted workspace images (volume.Templates).
	wst volume.Templates
	// snaps keeps the snapshots and the lower layers of forks (snapshot.go).
	snaps *snapkeep.Keep

	// mu guards the maps; each sandbox has its own lock for its life.
	mu        sync.Mutex
	sandboxes map[string]*Sandbox
	idx       sandboxIndex // kept with sandboxes (index.go)
	slots     hostids.Slots
	closed    bool
	// disk counts the quotas promised, under its own lock: listed,
	// pooled and being made (disk.go).
	disk diskbudget.Ledger
	// guard stops workspace growth when the disk fills (diskguard.go).
	guard diskbudget.Guard
	// adoptMu serializes the take-overs of other nodes' hibernated
	// sandboxes (takeover.go).
	adoptMu sync.Mutex

	stop chan struct{}
	wg   sync.WaitGroup
	// sleeps holds idle inits' sleeps back while creating (sleepgate).
	sleeps *sleepgate.Gate

	// onStart, set by benchmarks before any sandbox starts, receives the
	// timed steps of every init start (internal/sandbox/startsteps).
	onStart func([]startsteps.Step)
}

// New starts the manager: it reaps what a previous run left behind (cgroups
// and the processes in them, workspaces of pool sandboxes never claimed),
// loads the records of persistent sandboxes (stopped until used) and starts
// the warm pool and the idle reaper.
func New(ctx context.Context, cfg Config, records Records, audit func(context.Context, Event), cg cgroup.Manager) (*Manager, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxExecsPerSandbox <= 0 {
		cfg.MaxExecsPerSandbox = defaultExecsPerSandbox
	}
	if audit == nil {
		audit = func(context.Context, Event) {}
	}
	m := &Manager{
		cfg:       cfg,
		records:   records,
		audit:     audit,
		cg:        cg,
		log:       cfg.Log,
		sandboxes: make(map[string]*Sandbox),
		idx:       newSandboxIndex(),
		slots:     hostids.NewSlots(maxSlots),
		stop:      make(chan struct{}),
	}
	m.snaps = newKeep(m)
	if err := checkHostIDs(hostIDFiles); err != nil && !cfg.Insecure {
		return nil, err
	}
	for _, d := range []string{m.workspaceRoot()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	reaped, err := cgroup.Reap(cg, func(string) bool { return false })
	if err != nil {
		return nil, fmt.Errorf("reap cgroups of a previous run: %w", err)
	}
	if len(reaped) > 0 {
		m.log.Warn("reaped sandbox cgroups left by a previous run", "count", len(reaped), "groups", reaped)
	}
	volume.ReapLeft(m.workspaceRoot(), m.log)
	recs, err := records.ListSandboxes(ctx)
	if err != nil {
		return nil, fmt.Errorf("load sandboxes: %w", err)
	}
	known := make(map[string]bool)
	for _, r := range recs {
		m.listLocked(newSandbox(m, r))
		m.slots.Mark(r.Slot)
		known[r.ID] = true
	}
	if err := m.reapWorkspaces(known); err != nil {
		return nil, err
	}
	m.sleeps = sleepgate.New(m.stop)
	// Before the pools: their refills create cold sandboxes too.
	m.spares = newSpares(m, cfg.SpareInits)
	m.pool = newPool(m, cfg.WarmPool, "")
	m.pools = []*warmpool.Pool[*Sandbox]{m.pool}
	for _, name := range slices.Sorted(maps.Keys(cfg.WarmPools)) {
		if n := cfg.WarmPools[name]; n > 0 {
			m.pools = append(m.pools, newPool(m, n, name))
		}
	}
	m.snaps.StartSeals()
	m.wg.Add(1)
	go m.janitor()
	if cfg.DiskBudget > 0 || cfg.DiskFloor > 0 {
		m.checkDisk()
		m.wg.Add(1)
		go m.watchDisk()
	}
	return m, nil
}

// Close stops every sandbox's init (workspaces and records persist) and
// destroys their cgroups.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	all := make([]*Sandbox, 0, len(m.sandboxes))
	for _, s := range m.sandboxes {
		all = append(all, s)
	}
	m.mu.Unlock()
	close(m.stop)
	for _, p := range m.pools {
		p.Close()
	}
	m.spares.Close()
	for _, s := range all {
		s.shutdown()
		s.releaseVolume()
	}
	if st := m.cfg.Snapshots; st != nil {
		st.Close() // seals under way resume at the next start
	}
	m.wg.Wait()
}

func (m *Manager) workspaceRoot() string { return filepath.Join(m.cfg.DataDir, "workspaces") }

// reapWorkspaces removes workspace directories that belong to no record:
// pool sandboxes that were never claimed before a restart.
func (m *Manager) reapWorkspaces(known map[string]bool) error {
	entries, err := os.ReadDir(m.workspaceRoot())
	if err != nil {
		return fmt.Errorf("list workspaces: %w", err)
	}
	for _, e := range entries {
		if known[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(m.workspaceRoot(), e.Name())); err != nil {
			return fmt.Errorf("remove unclaimed workspace: %w", err)
		}
		m.log.Info("removed workspace of an unclaimed pool sandbox", "id", e.Name())
	}
	return nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "sb" + hex.EncodeToString(b[:])
}

// allocSlot reserves a host id range. Callers must release it with
// freeSlot if the sandbox is not kept.
func (m *Manager) allocSlot() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.slots.Alloc()
}

func (m *Manager) freeSlot(i int) {
	m.mu.Lock()
	m.slots.Release(i)
	m.mu.Unlock()
}

// hostBase is the first host id of a slot's range; slots are below
// maxSlots, so the result stays below 2^31.
func hostBase(slot int) uint32 {
	return uint32(idBase + slot*agent.IDRange) //nolint:gosec // G115: bounded by maxSlots, see above
}

// Caller is who asks: the key's id, and whether it is an admin (who sees
// every sandbox).
type Caller struct {
	KeyID string
	Admin bool
}

// Create makes a new sandbox for the caller.
func (m *Manager) Create(ctx context.Context, c Caller, spec Spec) (Info, error) {
	return m.create(ctx, c, spec, false)
}

func (m *Manager) create(ctx context.Context, c Caller, spec Spec, dflt bool) (Info, error) {
	defer m.sleeps.Creates()()
	var restore *Restore
	if spec.Snapshot != "" {
		var err error
		if restore, err = m.fromSnapshot(c, &spec); err != nil {
			return Info{}, err
		}
	}
	spec, err := m.resolve(c, spec)
	if err != nil {
		return Info{}, err
	}
	elsewhere := 0
	if cr, ok := m.records.(ClusterRecords); ok && m.cfg.MaxPerOwner > 0 && !c.Admin {
		if elsewhere, err = cr.CountOwnedElsewhere(ctx, c.KeyID); err != nil {
			return Info{}, fault.Wrap(fault.Unavailable, err, "cannot count this key's sandboxes on the other nodes")
		}
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Info{}, fault.New(fault.Unavailable, "server is shutting down")
	}
	if m.cfg.MaxPerOwner > 0 && !c.Admin && m.countOwned(c.KeyID)+elsewhere >= m.cfg.MaxPerOwner {
		m.mu.Unlock()
		return Info{}, dispatch.CapRefusal(ratelimit.Sandboxes, m.cfg.MaxPerOwner, sandboxCapRetry, fmt.Sprintf("at most %d sandboxes per key", m.cfg.MaxPerOwner))
	}
	m.mu.Unlock()

	start := time.Now()
	var s *Sandbox
	var w *Sandbox
	var release func()
	if restore == nil { // a restore needs its own image, never a pool's
		w, release = m.takePooled(spec)
	}
	if w != nil {
		// Its quota is pending from the take on, released once listed.
		defer release()
		takenHook()
		s = w
		s.rec.Owner, s.rec.Name, s.rec.Spec, s.rec.Default = c.KeyID, spec.Name, spec, dflt
		if err := s.applyLimits(); err != nil {
			s.shutdown()
			m.discard(s)
			return Info{}, err
		}
	} else {
		need := spec.Limits.DiskBytes
		if need == 0 {
			need = m.cfg.Default.DiskBytes
		}
		release, err := m.reserveDisk(need)
		if err != nil {
			return Info{}, err
		}
		// Released once the sandbox is listed below (or on failure).
		defer release()
		s, err = m.cold(ctx, Record{ID: newID(), Owner: c.KeyID, Name: spec.Name, Spec: spec, Default: dflt, Restore: restore})
		if err != nil {
			return Info{}, err
		}
	}
	s.rec.Created = time.Now().UTC()
	s.touch()
	if s.rec.Name == "" {
		s.rec.Name = s.rec.ID
	}
	if err := m.records.PutSandbox(ctx, s.rec); err != nil {
		s.shutdown()
		m.discard(s)
		return Info{}, fmt.Errorf("save sandbox: %w", err)
	}
	if err := m.netAttach(s.rec.ID, spec.Network); err != nil {
		// The sandbox stays without a policy: its proxy denies everything.
		m.log.Error("egress policy", "id", s.rec.ID, "err", err)
	}
	m.mu.Lock()
	m.listLocked(s)
	m.mu.Unlock()
	m.log.Debug("sandbox created", "id", s.rec.ID, "ms", time.Since(start).Milliseconds())
	if h := m.createHook(); h.After != nil {
		if err := h.After(ctx, c, s); err != nil {
			if derr := m.Delete(context.WithoutCancel(ctx), Caller{Admin: true}, s.rec.ID); derr != nil {
				m.log.Error("delete sandbox after a failed create hook", "id", s.rec.ID, "err", derr)
			}
			return Info{}, err
		}
	}
	return s.Info(), nil
}

// takenHook runs after a create took a pool sandbox and before it is
// listed: a test's window into the race with the pool's refill.
var takenHook = func() {}

// countOwned counts the caller's sandboxes. Callers hold mu.
func (m *Manager) countOwned(owner string) int { return m.idx.owned[owner] }

// cold builds a sandbox from scratch: id range, workspace, cgroup, init.
// A spare init (spares.go) gives it its id range and its init.
func (m *Manager) cold(ctx context.Context, rec Record) (*Sandbox, error) {
	si, spare := m.takeSpare(rec.Spec)
	slot := si.Slot
	if !spare {
		var err error
		if slot, err = m.allocSlot(); err != nil {
			return nil, err
		}
	}
	rec.Slot = slot
	s := newSandbox(m, rec)
	if spare {
		s.spare = &si
	}
	err := s.start(ctx)
	if spare {
		if s.spare != nil {
			// The start failed before its launch: the spare goes too.
			s.spare.Kill()
			s.spare = nil
		}
		if err != nil {
			m.spares.Refill()
		} else {
			m.refillAfterFirst(s)
		}
	}
	if err != nil {
		// The workspace volume, if it was mounted, goes with the
		// directory (its loop device detaches once closed).
		s.releaseVolume()
		m.freeSlot(slot)
		_ = os.RemoveAll(s.workspaceDir())
		return nil, err
	}
	return s, nil
}

// discard removes every trace of a sandbox that was never recorded.
func (m *Manager) discard(s *Sandbox) {
	s.releaseVolume()
	_ = os.RemoveAll(s.workspaceDir())
	m.freeSlot(s.rec.Slot)
}

// resolve fills defaults and checks the spec against the server's maxima:
// a limit above the maximum is refused, never silently lowered.
func (m *Manager) resolve(c Caller, spec Spec) (Spec, error) {
	if len(spec.Name) > 128 {
		return spec, fault.InvalidField("name", "name longer than 128 characters")
	}
	if err := m.resolveTemplate(c, &spec); err != nil {
		return spec, err
	}
	if h := m.createHook(); h.Prepare != nil {
		if err := h.Prepare(&spec, m.cfg.Default, m.cfg.Max); err != nil {
			return spec, err
		}
	}
	l := &spec.Limits
	if err := speccheck.Limits([]speccheck.Limit{
		{Field: "limits.memory", V: &l.MemoryBytes, Def: m.cfg.Default.MemoryBytes, Max: m.cfg.Max.MemoryBytes, Show: speccheck.Bytes, Setting: "SANDBOX_MAX_MEMORY"},
		{Field: "limits.cpu", V: &l.CPUMilli, Def: m.cfg.Default.CPUMilli, Max: m.cfg.Max.CPUMilli, Show: speccheck.CPUs, Setting: "the host's CPUs"},
		{Field: "limits.pids", V: &l.Pids, Def: m.cfg.Default.Pids, Max: m.cfg.Max.Pids, Show: speccheck.Count, Setting: "SANDBOX_MAX_PROCESSES"},
		{Field: "limits.disk", V: &l.DiskBytes, Def: m.cfg.Default.DiskBytes, Max: m.cfg.Max.DiskBytes, Show: speccheck.Bytes, Setting: "SANDBOX_MAX_DISK"},
	}); err != nil {
		return spec, err
	}
	if l.MemoryBytes > 0 && l.MemoryBytes < 16<<20 {
		return spec, fault.InvalidField("limits.memory", "limits.memory must be at least 16 MiB")
	}
	if l.Pids > 0 && l.Pids < 4 {
		return spec, fault.InvalidField("limits.pids", "limits.pids must be at least 4")
	}
	if l.CPUMilli > 0 && l.CPUMilli < 10 {
		return spec, fault.InvalidField("limits.cpu", "limits.cpu must be at least 10 milli-CPUs")
	}
	switch {
	case l.CPUTime < 0:
		return spec, fault.InvalidField("limits.cpu_time", "limits.cpu_time must not be negative")
	case l.CPUTime == 0:
		l.CPUTime = m.cfg.Default.CPUTime
	case m.cfg.Max.CPUTime > 0 && l.CPUTime > m.cfg.Max.CPUTime:
		return spec, fault.InvalidField("limits.cpu_time", fmt.Sprintf("limits.cpu_time %s exceeds the server maximum of %s (SANDBOX_MAX_CPU_TIME)", l.CPUTime, m.cfg.Max.CPUTime))
	}
	if spec.TTL < 0 {
		return spec, fault.InvalidField("ttl", "ttl must not be negative")
	}
	if err := checkLabels(c, spec); err != nil {
		return spec, err
	}
	if err := m.checkNetwork(c, &spec.Network); err != nil {
		return spec, err
	}
	return spec, nil
}

// ErrNoSandbox is the cause of Get's NotFound: the edge answers a route
// whose sandbox is missing (or another key's) with a real 404, where a
// tool's own "not found" on an AIO route is a tool-level failure.
var ErrNoSandbox = errors.New("no such sandbox for this caller")

// Get returns a sandbox the caller may see; anything else is NotFound, so
// other keys' sandboxes are invisible.
func (m *Manager) Get(c Caller, id string) (*Sandbox, error) {
	m.mu.Lock()
	s := m.sandboxes[id]
	m.mu.Unlock()
	if s == nil || (!c.Admin && s.rec.Owner != c.KeyID) {
		return nil, errNoSuchSandbox()
	}
	return s, nil
}

// errNoSuchSandbox is Get's NotFound: another key's sandbox is not there.
func errNoSuchSandbox() error { return fault.Wrap(fault.NotFound, ErrNoSandbox, "sandbox not found") }

// List returns the caller's sandboxes (an admin's: all), oldest first.
func (m *Manager) List(c Caller) []Info {
	m.mu.Lock()
	var out []*Sandbox
	for _, s := range m.sandboxes {
		if c.Admin || s.rec.Owner == c.KeyID {
			out = append(out, s)
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].rec.Created.Before(out[j].rec.Created) })
	infos := make([]Info, len(out))
	for i, s := range out {
		infos[i] = s.Info()
	}
	return infos
}

// All returns every sandbox (for monitoring and HALT).
func (m *Manager) All() []*Sandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Sandbox, 0, len(m.sandboxes))
	for _, s := range m.sandboxes {
		out = append(out, s)
	}
	return out
}

// defaultOf is the key's default sandbox, nil before its first use.
func (m *Manager) defaultOf(owner string) *Sandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.idx.defaults[owner]
}

// createDefault returns the caller's default sandbox, creating it if it
// has none: sandbox.create_default's run (implicit.go), which Resolve
// dispatches — nothing else creates one.
func (m *Manager) createDefault(ctx context.Context, c Caller) (*Sandbox, error) {
	if s := m.defaultOf(c.KeyID); s != nil {
		return s, nil
	}
	// Two first requests at once must not make two defaults.
	m.defaultMu.Lock()
	defer m.defaultMu.Unlock()
	if s := m.defaultOf(c.KeyID); s != nil {
		return s, nil
	}
	info, err := m.create(ctx, c, Spec{Name: "default"}, true)
	if err != nil {
		return nil, err
	}
	return m.Get(c, info.ID)
}

// Delete removes a sandbox: its processes, cgroups, record and workspace.
func (m *Manager) Delete(ctx context.Context, c Caller, id string) error {
	s, err := m.Lookup(ctx, c, id)
	if err != nil {
		return err
	}
	m.beforeStop(s, "delete") // sandbox hooks (stophook.go)
	m.mu.Lock()
	m.unlistLocked(id)
	m.mu.Unlock()
	m.netDetach(id)
	s.shutdown()
	s.releaseVolume()
	if err := m.records.DeleteSandbox(ctx, id); err != nil {
		m.log.Error("delete sandbox record", "id", id, "err", err)
	}
	if r := s.rec.Restore; r != nil && r.Hibernated {
		m.snaps.Drop(r.Snapshot)
	}
	if err := os.RemoveAll(s.workspaceDir()); err != nil {
		m.log.Error("remove workspace", "id", id, "err", err)
	}
	m.freeSlot(s.rec.Slot)
	return nil
}

// Pause freezes every process of the sandbox.
func (m *Manager) Pause(ctx context.Context, c Caller, id string) error {
	s, err := m.Lookup(ctx, c, id)
	if err != nil {
		return err
	}
	return s.pause()
}

// Resume thaws a paused sandbox, or restores a hibernated one.
func (m *Manager) Resume(ctx context.Context, c Caller, id string) error {
	s, err := m.Lookup(ctx, c, id)
	if err != nil {
		return err
	}
	if s.State() == Hibernated {
		return s.startIfStopped(ctx)
	}
	return s.resume()
}

// janitor stops idle sandboxes and deletes expired ones.
func (m *Manager) janitor() { m.every(15*time.Second, func() { m.expire(time.Now()) }) }

// every runs f each period until the manager stops (a background loop of
// the manager's, counted in wg by the caller).
func (m *Manager) every(period time.Duration, f func()) {
	defer m.wg.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			f()
		}
	}
}

func (m *Manager) expire(now time.Time) {
	for _, s := range m.All() {
		ttl := s.ttl()
		if ttl > 0 && now.Sub(s.rec.Created) > ttl {
			m.expireOne(s, ttl)
			continue
		}
		if m.cfg.IdleTTL > 0 && s.idleSince(now) > m.cfg.IdleTTL {
			if s.stopIdle() {
				m.audit(context.Background(), Event{Actor: "system", Action: "sandbox.stop", Sandbox: s.rec.ID, Verdict: "allowed", Detail: map[string]any{"reason": "idle"}})
			}
		}
	}
}

// Layers returns the isolation layers the most recent init reported, or
// nil if no sandbox has started yet.
func (m *Manager) Layers() []agent.Layer {
	return m.layers.Get()
}

// PoolStatus reports the warm pool and the spare inits.
func (m *Manager) PoolStatus() PoolStatus {
	size, ready := m.pool.Status()
	return PoolStatus{Size: size, Ready: ready, Spares: SpareStatus(m.spares.Status())}
}
