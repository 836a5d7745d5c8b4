package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/isolate/rootfs"
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
	"github.com/sandhold/sandhold/internal/sandbox/execgroup"
	"github.com/sandhold/sandhold/internal/sandbox/execrun"
	"github.com/sandhold/sandhold/internal/sandbox/loopback"
	"github.com/sandhold/sandhold/internal/sandbox/sleepgate"
	"github.com/sandhold/sandhold/internal/sandbox/spareinit"
	"github.com/sandhold/sandhold/internal/sandbox/startsteps"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
	"github.com/sandhold/sandhold/internal/template"
)

// Sandbox is one sandbox.
type Sandbox struct {
	m   *Manager
	rec Record

	// mu guards the fields below and serialises start, stop, pause.
	mu    sync.Mutex
	inst  *agent.Instance
	group cgroup.Group
	// user is the child of group that holds every execution and spawned
	// process; the sandbox's pids limit is its limit, so the init's own
	// threads (in group) never spend the user's process budget.
	user     cgroup.Group
	state    State
	lastUsed time.Time
	// execs are its executions, long-lived processes and execution
	// groups (exec.go); it holds the init's groups too while one runs.
	execs *execrun.Table
	// vol is the mounted workspace file system (quota_linux.go), kept
	// across init restarts until the sandbox is deleted.
	vol *os.File
	// lower is set while vol is a fork's upper layer (forklower.go).
	lower *forkMount
	// clamp is set while the disk guard stops vol's growth (diskguard.go).
	clamp *diskbudget.Clamp
	// relay are the connections relayed into the sandbox's loopback
	// (reach.go); pause and shutdown close them.
	relay loopback.Relays
	// extraPids is the pids allowance granted to companions the server
	// runs in the sandbox (allowance.go), on top of the spec's limit.
	extraPids int64
	// hibernating is set while Hibernate runs: nothing starts the
	// sandbox meanwhile (snapshot.go).
	hibernating bool
	// spare, if set, is the init its first start binds (spares.go).
	spare *spareinit.Init
	// firstEnded, if set, runs when its first command ends (spares.go,
	// refillAfterFirst).
	firstEnded atomic.Pointer[func()]
}

func newSandbox(m *Manager, rec Record) *Sandbox {
	state := Stopped
	if rec.Restore != nil && rec.Restore.Hibernated {
		state = Hibernated
	}
	s := &Sandbox{
		m:        m,
		rec:      rec,
		state:    state,
		lastUsed: time.Now(),
	}
	s.execs = newExecs(s)
	return s
}

// ID is the sandbox's id.
func (s *Sandbox) ID() string { return s.rec.ID }

// Owner is the id of the key that created it.
func (s *Sandbox) Owner() string { return s.rec.Owner }

// Record returns the stored record.
func (s *Sandbox) Record() Record { return s.rec }

func (s *Sandbox) workspaceDir() string {
	return filepath.Join(s.m.workspaceRoot(), s.rec.ID)
}

// State reports the sandbox's state.
func (s *Sandbox) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Info is the client view.
func (s *Sandbox) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := Info{
		ID: s.rec.ID, Name: s.rec.Name, Owner: s.rec.Owner, Default: s.rec.Default,
		State: s.state, Created: s.rec.Created, LastUsed: s.lastUsed.UTC(),
		Limits: s.rec.Spec.Limits, Network: s.rec.Spec.Network, Workspace: "/workspace",
		Node: s.m.cfg.Node,
	}
	in.Template, in.TemplateDigest = template.SplitRecorded(s.rec.Spec.Template)
	if in.Snapshot = s.rec.Spec.Snapshot; in.Snapshot != "" {
		in.ProcessesRestored = new(bool)
	}
	if s.rec.Spec.TTL > 0 {
		in.TTL = s.rec.Spec.TTL.String()
		exp := s.rec.Created.Add(s.rec.Spec.TTL)
		in.Expires = &exp
	}
	in.Labels = maps.Clone(s.rec.Spec.Labels)
	return in
}

func (s *Sandbox) cgroupGroup() cgroup.Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.group
}

func (s *Sandbox) userGroup() cgroup.Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.user
}

func (s *Sandbox) idleSince(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != Running || s.execs.Busy() {
		return 0
	}
	return now.Sub(s.lastUsed)
}

// initPidsReserve is what the sandbox group allows on top of the user's
// pids limit: the init's own threads (the Go runtime of the init grows to
// a dozen or two under load, one per blocking call) live in the sandbox
// group beside the user group, not in it. It bounds the init, which is
// trusted code, only as a backstop.
const initPidsReserve = 64

// userGroupName names the child group of every execution (see Sandbox.user).
const userGroupName = "user"

// cgLimits are the sandbox group's limits: memory and CPU for everything in
// the sandbox, the init included; pids with the init's reserve on top.
func (s *Sandbox) cgLimits() cgroup.Limits {
	l := s.rec.Spec.Limits
	pids := l.Pids
	if pids > 0 {
		pids += initPidsReserve + s.extraPids
	}
	return cgroup.Limits{MemoryBytes: l.MemoryBytes, Pids: pids, CPUMilli: l.CPUMilli}
}

// userLimits are the user group's: the sandbox's pids limit, counting every
// command, background job, interpreter and session shell, and nothing of
// the init.
func (s *Sandbox) userLimits() cgroup.Limits {
	pids := s.rec.Spec.Limits.Pids
	if pids > 0 {
		pids += s.extraPids
	}
	return cgroup.Limits{Pids: pids}
}

// start launches the init. Callers hold no lock; start takes s.mu.
func (s *Sandbox) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked(ctx)
}

func (s *Sandbox) startLocked(ctx context.Context) error {
	if s.inst != nil {
		return nil
	}
	if s.hibernating {
		return fault.New(fault.Conflict, "sandbox is hibernating; try again once it is hibernated")
	}
	if err := s.m.checkStart(s.rec.Spec.Network); err != nil {
		return err
	}
	// From here on every slot of the earlier init is stale; a kill or
	// destroy of one that is under way ends first (execrun.Table.NextGen).
	gen := s.execs.NextGen()
	clk := startsteps.New()
	base := hostBase(s.rec.Slot)
	// A template sandbox's root: its layers, user and writable layer
	// (template.go); nil for the host template.
	root, err := s.rootPlan()
	if err != nil {
		return err
	}
	if root != nil {
		defer root.Close()
	}
	// The init is cloned at once and starts (its runtime, its own
	// settings) while the server makes what it needs: the workspace, which
	// goes to it with the setup request, and the cgroups, which Place
	// needs; the first command's execution group comes after them, beside
	// the rest of the start. None of them needs another but the execution
	// group its parents. An init runs none of the sandbox's code before
	// Place and setup (agent.Launch), so nothing runs outside them.
	var group, user cgroup.Group
	// The first execution group is what every sandbox keeps after its
	// first command anyway: a directory in the pids, cpuacct and freezer
	// hierarchies, no memory cgroup (makeGroups;
	// TestStartedSandboxHoldsOneExecutionGroup). A failure to make it only
	// costs speed: the first command makes its own.
	var first *execgroup.Group
	// A new workspace image is made durable (fsync, rename, directory
	// fsync) beside the rest of the start; the start waits for it before
	// it reports success, and every way out waits too, so that a failed
	// start's cleanup never races the rename.
	wsClk := startsteps.New()
	var ws *os.File
	waitDurable := startsteps.Beside(nil)
	waitWS := startsteps.Beside(func() error {
		w, durable, err := s.prepareWorkspace(base, root, wsClk)
		if err != nil {
			return err
		}
		ws, waitDurable = w, startsteps.Beside(durable)
		return nil
	})
	// The cgroups: a spare init's group becomes the sandbox's, its limits
	// written (bindSpareGroups), before the init is given anything of the
	// sandbox; the launch waits for that answer (spareOK) and, if the bind
	// failed, the spare is gone and a fresh init is cloned and placed in
	// groups made for it. Then the first execution group.
	spareOK := make(chan bool, 1)
	var bindTook time.Duration
	waitFirst := startsteps.Beside(nil)
	waitGroups := startsteps.Beside(func() (err error) {
		if si := s.spare; si != nil && si.Group != nil {
			t0 := time.Now()
			var ok bool
			group, user, ok = s.bindSpareGroups(si)
			bindTook = time.Since(t0)
			spareOK <- ok
		} else {
			spareOK <- true
		}
		if group == nil {
			if group, user, err = s.makeGroups(); err != nil {
				return err
			}
		}
		waitFirst = startsteps.Beside(func() (err error) {
			first, err = s.execs.MakeSlot(user, 1, gen)
			return err
		})
		return nil
	})
	var wsErr, cgErr error
	// The init's start and setup have launchTimeout from the moment its
	// workspace and cgroups are ready: making the workspace (a template
	// copy, or a format while the template is being built) is not charged
	// to the init, whose setup otherwise ran out of time behind a slow
	// disk and was reported as its own failure.
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	setupTimer := time.AfterFunc(launchTimeout, func() { cancel(errInitSetupTimeout) })
	defer setupTimer.Stop()
	await := func() (*os.File, error) {
		clk.Mark("init_clone_exec")
		var wsTook, cgTook time.Duration
		wsTook, wsErr = waitWS()
		cgTook, cgErr = waitGroups()
		setupTimer.Reset(launchTimeout)
		clk.Mark("workspace_cgroups_wait")
		for _, st := range wsClk.Steps() {
			clk.Add(st.Name+"_beside", st.D)
		}
		clk.Add("workspace_beside", wsTook)
		clk.Add("cgroups_beside", cgTook)
		if bindTook > 0 {
			clk.Add("spare_cgroups_bind_beside", bindTook)
		}
		if wsErr != nil {
			return nil, wsErr
		}
		return ws, cgErr
	}
	// cleanup undoes a start that failed, once what ran beside it ended.
	cleanup := func() {
		_, _ = waitWS()
		if ws != nil {
			_ = ws.Close()
		}
		if _, derr := waitDurable(); derr != nil {
			// The image never reached its name: the next start makes it again.
			s.closeVolumeLocked()
		}
		_, _ = waitGroups()
		// Waited for before the group goes: no mkdir may race the removal.
		_, _ = waitFirst()
		if first != nil {
			first.Close()
		}
		if group != nil {
			_ = group.Destroy()
		}
	}
	cfg := s.m.cfg
	spec := agent.LaunchSpec{
		Exe:            cfg.InitExe,
		Args:           cfg.InitArgs,
		ExeFile:        cfg.InitFile,
		Launcher:       cfg.Launcher,
		HostUID:        base,
		HostGID:        base,
		AwaitWorkspace: await,
		Place: func(pid int) error {
			err := group.AddProc(pid)
			clk.Mark("init_place")
			return err
		},
		Setup: agent.Setup{
			Hostname:      "sandbox",
			UID:           sandboxUID,
			GID:           sandboxUID,
			AllowRoot:     cfg.AllowSudo,
			TmpBytes:      cfg.TmpBytes,
			ShmBytes:      min(cfg.TmpBytes, 64<<20),
			MaxPTYs:       cfg.MaxPTYs,
			Kernel:        cfg.KernelLimits,
			CgroupVersion: s.m.cg.Info().Version,
			Insecure:      cfg.Insecure,
			LoopbackPorts: cfg.LoopbackPorts,
			SleepAfterMs:  sleepgate.AfterMs(cfg.IdleSleep),
		},
		Log:       &initLog{m: s.m, id: s.rec.ID},
		SleepGate: s.m.sleeps.Ask,
	}
	if root != nil {
		root.Apply(&spec, s.rootFiles)
	}
	s.m.netLaunch(&spec, s.rec.ID, s.rec.Spec.Network)
	inst, err := s.launch(lctx, spec, <-spareOK)
	if err != nil {
		cleanup()
		// What failed beside the start says more than the init's end.
		if wsErr != nil {
			return wsErr
		}
		if cgErr != nil {
			return cgErr
		}
		if cause := context.Cause(lctx); errors.Is(cause, errInitSetupTimeout) {
			err = fmt.Errorf("%w (%w)", cause, err)
		}
		return fault.Wrap(fault.Unavailable, err, "the sandbox could not be started")
	}
	clk.Mark("init_setup")
	// The init holds its own clone of the workspace mount now.
	_ = ws.Close()
	home, err := group.OpenThreadAttach()
	if err != nil {
		inst.Kill()
		cleanup()
		return fmt.Errorf("open sandbox cgroup: %w", err)
	}
	took, derr := waitDurable()
	clk.Mark("image_durable_wait")
	clk.Add("image_durable_beside", took)
	if derr != nil {
		inst.Kill()
		execgroup.CloseFiles(home)
		cleanup()
		// The image never reached its name: the next start makes it again.
		s.closeVolumeLocked()
		return fmt.Errorf("workspace image: %w", derr)
	}
	firstTook, ferr := waitFirst()
	clk.Mark("exec_group_wait")
	clk.Add("exec_group_beside", firstTook)
	s.inst, s.group, s.user, s.state = inst, group, user, Running
	if ferr != nil {
		s.m.log.Warn("first execution cgroup not made ahead; the first command makes it", "id", s.rec.ID, "err", ferr)
		first = nil
	}
	s.execs.Start(group, user, home, first)
	s.lastUsed = time.Now()
	s.m.layers.Note(inst.Ready.Layers)
	go s.watch(inst)
	clk.Mark("attach_files")
	s.m.log.Debug("sandbox init started", append([]any{"id", s.rec.ID}, clk.Attrs()...)...)
	if s.m.onStart != nil {
		s.m.onStart(clk.Steps())
	}
	return nil
}

// errInitSetupTimeout ends an init's start that took launchTimeout after
// its workspace was ready.
var errInitSetupTimeout = fmt.Errorf("the sandbox's init did not finish its setup within %s of its workspace being ready", launchTimeout)

// makeGroups makes the sandbox's cgroup and its user child.
func (s *Sandbox) makeGroups() (group, user cgroup.Group, err error) {
	group, err = s.m.cg.Create(s.rec.ID, s.cgLimits())
	if errors.Is(err, os.ErrExist) {
		// A group of this name left over (a crash between reap and now):
		// destroy it and start clean.
		if old, oerr := s.m.cg.Open(s.rec.ID); oerr == nil {
			_ = old.Destroy()
		}
		group, err = s.m.cg.Create(s.rec.ID, s.cgLimits())
	}
	if err != nil {
		return nil, nil, fmt.Errorf("create cgroup: %w", err)
	}
	// user exists for the pids limit (and holds the execution groups):
	// on v1 it shares the sandbox group's memory and CPU groups, which
	// limit, account and OOM-kill every process of the sandbox anyway, and
	// so costs no memory cgroup and no CPU task group of its own; its
	// execution groups share them too and keep their own CPU time
	// (cpuacct) and kill (cgroup.Group.SubSharingLimits;
	// TestUserGroupSharesTheSandboxMemoryGroup).
	user, err = group.SubSharingLimits(userGroupName, s.userLimits())
	if err != nil {
		_ = group.Destroy()
		return nil, nil, fmt.Errorf("create user cgroup: %w", err)
	}
	return group, user, nil
}

// watch notices an init that died on its own (OOM of the init, a crash)
// and marks the sandbox stopped; the next use starts it again.
func (s *Sandbox) watch(inst *agent.Instance) {
	<-inst.Exited()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst != inst {
		return
	}
	s.m.log.Warn("sandbox init exited", "id", s.rec.ID)
	s.inst = nil
	s.state = Stopped
	if s.group != nil {
		_ = s.group.Destroy()
		s.group, s.user = nil, nil
	}
	s.execs.Stop()
}

// prepareWorkspace creates the persistent directory owned by the sandbox
// user's host id and opens it for the init. A new workspace image comes
// with durable, the step that makes it durable (workspaceVolume).
func (s *Sandbox) prepareWorkspace(base uint32, root *templateroot.Plan, clk *startsteps.Clock) (ws *os.File, durable func() error, err error) {
	dir := s.workspaceDir()
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, nil, fmt.Errorf("create workspace: %w", err)
	}
	uid := int(base) + sandboxUID
	if root != nil {
		uid = int(base) + root.UID
	}
	if s.diskBytes() > 0 {
		// The quota is a file system of its own (quota_linux.go).
		ws, durable, err := s.workspaceVolume(dir, uid, root, clk)
		if err == nil || !s.m.cfg.Insecure || root != nil {
			return ws, durable, err
		}
		s.m.log.Warn("INSECURE: workspace quota unavailable; the workspace is a plain directory without a disk limit", "id", s.rec.ID, "err", err)
	}
	if err := os.Lchown(dir, uid, uid); err != nil {
		return nil, nil, fmt.Errorf("own workspace: %w", err)
	}
	ws, err = rootfs.DetachedMount(dir)
	return ws, nil, err
}

// applyLimits sets the cgroup limits from the record (a pool sandbox gets
// its owner's limits when claimed).
func (s *Sandbox) applyLimits() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.group == nil {
		return nil
	}
	if err := s.group.SetLimits(s.cgLimits()); err != nil {
		return fmt.Errorf("set limits: %w", err)
	}
	if err := s.user.SetLimits(s.userLimits()); err != nil {
		return fmt.Errorf("set user limits: %w", err)
	}
	return nil
}

// ensure returns the running init. A stopped sandbox is started only by a
// call of its own: ensure dispatches sandbox.start for the caller of the
// call ctx belongs to (implicit.go), so HALT, policy, the rate limit and
// the audit see the restart; outside a dispatched call it is refused.
func (s *Sandbox) ensure(ctx context.Context) (*agent.Instance, error) {
	for started := false; ; started = true {
		s.mu.Lock()
		state, inst := s.state, s.inst
		if state == Running {
			s.lastUsed = time.Now()
		}
		s.mu.Unlock()
		switch {
		case state == Paused:
			return nil, fault.New(fault.Conflict, "sandbox is paused; resume it first")
		case state == Running:
			return inst, nil
		case started:
			// Stopped again between its start and this use (a delete,
			// a revocation): not started twice for one call.
			return nil, fault.New(fault.Conflict, "sandbox was stopped while it started; try again")
		}
		if err := s.m.startImplicitly(ctx, s); err != nil {
			return nil, err
		}
	}
}

// startIfStopped starts the sandbox when it is stopped (sandbox.start's
// run; nothing else starts a stopped sandbox).
func (s *Sandbox) startIfStopped(ctx context.Context) error {
	s.mu.Lock()
	var hib *Restore
	switch s.state {
	case Paused:
		s.mu.Unlock()
		return fault.New(fault.Conflict, "sandbox is paused; resume it first")
	case Stopped, Hibernated:
		hib = s.rec.Restore
		if err := s.startLocked(ctx); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.lastUsed = time.Now()
	if hib != nil && hib.Hibernated {
		s.rec.Restore = nil
	}
	s.mu.Unlock()
	if hib != nil && hib.Hibernated {
		s.m.resumed(ctx, s, hib)
	}
	return nil
}

// shutdown kills the init and destroys the cgroup. Running executions and
// spawned processes end as killed; the workspace stays.
func (s *Sandbox) shutdown() {
	// A paused sandbox is thawed first: v1 cannot kill inside a frozen
	// parent, and the executions must end as killed, not hang.
	if g := s.cgroupGroup(); g != nil {
		_ = g.Thaw()
	}
	s.execs.KillAll("sandbox stopped")
	s.relay.CloseAll()
	s.mu.Lock()
	inst, group := s.inst, s.group
	s.inst, s.group, s.user, s.state = nil, nil, nil, Stopped
	gen := s.execs.Stop()
	s.mu.Unlock()
	if inst != nil {
		inst.Kill()
	}
	if group != nil {
		// A start that came meanwhile destroyed this group itself
		// (makeGroups) and made one of the same name: not this one to
		// destroy.
		s.execs.InGen(gen, func() {
			if err := group.Destroy(); err != nil {
				s.m.log.Error("destroy sandbox cgroup", "id", s.rec.ID, "err", err)
			}
		})
	}
}

// stopIdle stops an idle sandbox; it reports whether it did.
func (s *Sandbox) stopIdle() bool {
	s.mu.Lock()
	idle := s.state == Running && !s.execs.Busy()
	s.mu.Unlock()
	if !idle {
		return false
	}
	s.m.beforeStop(s, "idle") // sandbox hooks (stophook.go)
	s.shutdown()
	return true
}

func (s *Sandbox) pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case Paused:
		return nil
	case Stopped:
		return fault.New(fault.Conflict, "sandbox is not running")
	}
	if err := s.group.Freeze(); err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	s.state = Paused
	s.relay.CloseAll()
	return nil
}

func (s *Sandbox) resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != Paused {
		return nil
	}
	if err := s.group.Thaw(); err != nil {
		return fmt.Errorf("thaw: %w", err)
	}
	s.state = Running
	s.lastUsed = time.Now()
	return nil
}

// initLog passes the init's stderr to the server log, line by line.
type initLog struct {
	m  *Manager
	id string
}

func (l *initLog) Write(p []byte) (int, error) {
	l.m.log.Warn("sandbox init", "id", l.id, "msg", string(p))
	return len(p), nil
}
