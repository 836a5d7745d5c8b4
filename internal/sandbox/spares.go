package sandbox

import (
	"context"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/sandbox/spareinit"
)

// Spare inits (internal/sandbox/spareinit) are cloned ahead for cold
// creates: this file wires them to the manager (their slots, their launch
// spec, their groups' limits) and binds one to the sandbox a create
// starts.

// newSpares starts keeping want spare inits for m.
func newSpares(m *Manager, want int) *spareinit.Spares {
	return spareinit.New(spareinit.Config{
		Want: want, Alloc: m.allocSlot, Free: m.freeSlot, Spec: m.spareSpec,
		// A spare's group's limits until its bind: what a fresh init is
		// charged against before its Place (nothing of a sandbox runs
		// in it), its threads bounded. The bind writes the sandbox's.
		CG: m.cg, Limits: cgroup.Limits{MemoryBytes: m.cfg.Default.MemoryBytes, Pids: initPidsReserve}, UserGroup: userGroupName,
		Retry: poolRetry, Log: m.log, Stop: m.stop,
	})
}

// spareSpec is what a spare is cloned with: what every init of this
// manager is cloned with, and a slot's host ids.
func (m *Manager) spareSpec(slot int) agent.LaunchSpec {
	base := hostBase(slot)
	return agent.LaunchSpec{
		Exe: m.cfg.InitExe, Args: m.cfg.InitArgs, ExeFile: m.cfg.InitFile, Launcher: m.cfg.Launcher,
		HostUID: base, HostGID: base,
		Log: &initLog{m: m, id: "(spare)"},
	}
}

// takeSpare hands out the oldest spare for a new sandbox of spec, or
// false when there is none or spec needs what no spare has (the host's
// network: spares have a network namespace of their own), which counts
// as neither taken nor missed.
func (m *Manager) takeSpare(spec Spec) (spareinit.Init, bool) {
	if spec.Network.Mode == NetworkHost {
		return spareinit.Init{}, false
	}
	return m.spares.Take()
}

// SpareStatus is the spare inits (SANDBOX_SPARE_INITS): how many are
// ready of the target, and how many cold creates (the warm pool's
// refills included) bound one (Taken) or found none ready and cloned
// their own init (Missed) since the server started. A create on the
// host's network never takes one and counts in neither. The counts are
// every key's creates: the security report gives them to admins and
// viewers only (zero, and so left out, for others).
type SpareStatus struct {
	Ready  int   `json:"ready"`
	Target int   `json:"target"`
	Taken  int64 `json:"taken,omitempty"`
	Missed int64 `json:"missed,omitempty"`
}

// spareRefillBound bounds how long the replacement of a spare waits for
// the first command of the sandbox that took it (refillAfterFirst): a
// create followed by no command soon has its spare replaced anyway. (A
// variable for tests.)
var spareRefillBound = 100 * time.Millisecond

// refillAfterFirst asks for the replacement of the spare s took once s's
// first command has ended (execrun.Table.Release) or spareRefillBound has passed,
// whichever comes first: the replacement's clone, runtime start and
// group (≈ 9 ms of CPU) then do not run beside the command a cold create
// is made for, on a host with few CPUs.
func (m *Manager) refillAfterFirst(s *Sandbox) {
	if f := m.spares.RefillAfterFirst(spareRefillBound); f != nil {
		s.firstEnded.Store(&f)
	}
}

// firstCommandEnded runs what waits for the sandbox's first command to
// end (refillAfterFirst), once.
func (s *Sandbox) firstCommandEnded() {
	if f := s.firstEnded.Swap(nil); f != nil {
		(*f)()
	}
}

// launch starts the sandbox's init: from the spare it was given, else a
// fresh one (spareinit.Launch).
func (s *Sandbox) launch(ctx context.Context, spec agent.LaunchSpec, spareOK bool) (*agent.Instance, error) {
	si := s.spare
	s.spare = nil
	return spareinit.Launch(ctx, si, spec, spareOK, s.rec.ID, s.m.log)
}

// spareBindHook runs once a spare's group is renamed to its sandbox's,
// before its limits: a test's way to fail the bind there.
var spareBindHook = func() error { return nil }

// bindSpareGroups makes a spare's group the sandbox's, with the sandbox's
// limits (spareinit.Spares.Bind). On failure (ok false) the spare is gone
// and the start clones a fresh init.
func (s *Sandbox) bindSpareGroups(si *spareinit.Init) (group, user cgroup.Group, ok bool) {
	group, user, err := s.m.spares.Bind(si, s.rec.ID, s.cgLimits(), s.userLimits(), spareBindHook)
	if err != nil {
		s.m.log.Warn("spare init's cgroup not bound; a fresh init starts the sandbox", "id", s.rec.ID, "err", err)
		return nil, nil, false
	}
	return group, user, true
}
