package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// spares keeps inits cloned ahead (agent.Spare): a cold create binds one
// to its new sandbox instead of cloning an init and waiting for its Go
// runtime to start. A spare holds a host id range (slot) that no sandbox
// has; the create that takes it gets that range. Nothing else of a
// sandbox exists before the create: its cgroups, workspace, network
// policy, limits and setup come at the bind, as for a fresh init.
//
// At most want spares exist (Config.SpareInits, SANDBOX_SPARE_INITS; 0
// none). One taken is replaced in the background once its create is done.
// They die with the server (each init's Pdeathsig), are killed by Close,
// and a restarted server starts new ones: a spare has no record, cgroup
// or workspace to reap.
type spares struct {
	m    *Manager
	want int

	// mu guards ready, closed, taken and missed.
	mu     sync.Mutex
	ready  []spareInit // oldest first
	closed bool
	// taken counts the cold creates that bound a spare, missed those
	// that could have and found none ready (status).
	taken, missed int64

	kick chan struct{}
	done chan struct{}
}

// spareInit is a spare, the slot it was cloned for and, on cgroup v1,
// the generic group it waits in (spareGroup).
type spareInit struct {
	sp   *agent.Spare
	slot int
	// group is the spare's own group (spare-<slot>, made before its
	// clone, the init moved into it once cloned), nil on v2 (its
	// cgroupfs cannot rename a group) or once bound. A create renames it
	// to the sandbox's id and writes the sandbox's limits
	// (Sandbox.bindSpareGroups): the init is then in its sandbox's groups
	// without a migration on the create's path.
	group cgroup.Group
	// placed: group is the sandbox's now, the init in it (set by the
	// bind; a fresh init that replaces an unusable spare is placed).
	placed bool
}

// kill ends an unbound spare and removes its group.
func (si *spareInit) kill() {
	si.sp.Kill()
	if si.group != nil {
		_ = si.group.Destroy()
		si.group = nil
	}
}

// spareGroupName is the group a spare of slot waits in; sandbox ids
// (newID: "sb" and hex) never look like it.
func spareGroupName(slot int) string { return "spare-" + strconv.Itoa(slot) }

// spareLimits are a spare's group's until its bind: what a fresh init
// is charged against before its Place (nothing of a sandbox runs in
// it), its threads bounded. The bind writes the sandbox's.
func (m *Manager) spareLimits() cgroup.Limits {
	return cgroup.Limits{MemoryBytes: m.cfg.Default.MemoryBytes, Pids: initPidsReserve}
}

func newSpares(m *Manager, want int) *spares {
	p := &spares{m: m, want: want, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if want > 0 {
		go p.fill()
		p.wake()
	} else {
		close(p.done)
	}
	return p
}

func (p *spares) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
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

func (p *spares) fill() {
	defer close(p.done)
	for {
		select {
		case <-p.m.stop:
			return
		case <-p.kick:
		}
		for {
			p.mu.Lock()
			need := !p.closed && len(p.ready) < p.want
			p.mu.Unlock()
			if !need {
				break
			}
			if err := p.add(); err != nil {
				p.m.log.Warn("spare init not cloned; creates clone their own", "err", err)
				select {
				case <-p.m.stop:
					return
				case <-time.After(poolRetry):
				}
			}
		}
	}
}

// add clones one spare: on cgroup v1 into a group of its own, made
// first and holding the user child every sandbox has (makeGroups), so
// that a create renames it instead of migrating the init (a v1
// migration waits for an RCU grace period: 0.6 ms on a quiet host,
// 7–10 ms under load; BENCHMARKS.md). The migration into the spare's
// group is paid here, off any create's path.
func (p *spares) add() error {
	slot, err := p.m.allocSlot()
	if err != nil {
		return err
	}
	si := spareInit{slot: slot}
	if p.m.cg.Info().Version == 1 {
		if si.group, err = p.m.spareGroup(slot); err != nil {
			p.m.freeSlot(slot)
			return err
		}
	}
	fail := func(err error) error {
		if si.group != nil {
			_ = si.group.Destroy()
		}
		p.m.freeSlot(slot)
		return err
	}
	if si.sp, err = agent.CloneSpare(context.Background(), p.m.spareSpec(slot)); err != nil {
		return fail(err)
	}
	if si.group != nil {
		if err := si.group.AddProc(si.sp.Pid()); err != nil {
			si.sp.Kill()
			return fail(fmt.Errorf("place a spare init in its group: %w", err))
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		si.kill()
		p.m.freeSlot(slot)
		return nil
	}
	p.ready = append(p.ready, si)
	p.mu.Unlock()
	return nil
}

// spareGroup makes a spare's group and its user child, as makeGroups
// makes a sandbox's but with spareLimits (a leftover of the name, from
// a spare whose kill failed to remove it, goes first).
func (m *Manager) spareGroup(slot int) (cgroup.Group, error) {
	name := spareGroupName(slot)
	g, err := m.cg.Create(name, m.spareLimits())
	if errors.Is(err, os.ErrExist) {
		if old, oerr := m.cg.Open(name); oerr == nil {
			_ = old.Destroy()
		}
		g, err = m.cg.Create(name, m.spareLimits())
	}
	if err != nil {
		return nil, fmt.Errorf("create a spare init's cgroup: %w", err)
	}
	if _, err := g.SubSharingLimits(userGroupName, cgroup.Limits{}); err != nil {
		_ = g.Destroy()
		return nil, fmt.Errorf("create a spare init's user cgroup: %w", err)
	}
	return g, nil
}

// take hands out the oldest spare for a new sandbox of spec, or false
// when there is none or spec needs what no spare has (the host's network:
// spares have a network namespace of their own). The caller owns the
// spare and its slot and calls refill once its start is done.
func (p *spares) take(spec Spec) (spareInit, bool) {
	if spec.Network.Mode == NetworkHost {
		return spareInit{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready) > 0 {
		si := p.ready[0]
		p.ready = p.ready[1:]
		select {
		case <-si.sp.Exited():
			// It died waiting (killed from outside, out of memory):
			// reaped already, its range is free again.
			p.m.log.Warn("a spare init ended before it was used", "pid", si.sp.Pid())
			si.kill()
			p.m.freeSlot(si.slot)
			p.wake()
			continue
		default:
		}
		p.taken++
		return si, true
	}
	if p.want > 0 {
		p.missed++
	}
	return spareInit{}, false
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

func (p *spares) status() SpareStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return SpareStatus{Ready: len(p.ready), Target: p.want, Taken: p.taken, Missed: p.missed}
}

// refill asks for a replacement of a taken spare.
func (p *spares) refill() {
	if p.want > 0 {
		p.wake()
	}
}

// spareRefillBound bounds how long the replacement of a spare waits for
// the first command of the sandbox that took it (refillAfterFirst): a
// create followed by no command soon has its spare replaced anyway. (A
// variable for tests.)
var spareRefillBound = 100 * time.Millisecond

// refillAfterFirst asks for the replacement of the spare s took once s's
// first command has ended (releaseSlot) or spareRefillBound has passed,
// whichever comes first: the replacement's clone, runtime start and
// group (≈ 9 ms of CPU) then do not run beside the command a cold create
// is made for, on a host with few CPUs.
func (p *spares) refillAfterFirst(s *Sandbox) {
	if p.want == 0 {
		return
	}
	var once sync.Once
	f := func() { once.Do(p.wake) }
	s.firstEnded.Store(&f)
	time.AfterFunc(spareRefillBound, f)
}

// firstCommandEnded runs what waits for the sandbox's first command to
// end (refillAfterFirst), once.
func (s *Sandbox) firstCommandEnded() {
	if f := s.firstEnded.Swap(nil); f != nil {
		(*f)()
	}
}

// close kills every spare and frees its range; a clone under way ends
// with the filler (add kills what it cloned after close).
func (p *spares) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	<-p.done
	for _, si := range ready {
		si.kill()
		p.m.freeSlot(si.slot)
	}
}

// launch starts the sandbox's init: from the spare it was given, else
// (none, one whose group could not be bound (spareOK false; it is gone
// then), or one that cannot be bound as this init would be cloned) a
// fresh one. A spare whose group became the sandbox's (placed) is in it
// already and is not placed again; a fresh init that replaces it is.
func (s *Sandbox) launch(ctx context.Context, spec agent.LaunchSpec, spareOK bool) (*agent.Instance, error) {
	si := s.spare
	s.spare = nil
	if si == nil || !spareOK {
		return agent.Launch(ctx, spec)
	}
	bind := spec
	if si.placed {
		bind.Place = nil
	}
	inst, err := si.sp.Bind(ctx, bind)
	if errors.Is(err, agent.ErrSpareUnusable) {
		s.m.log.Warn("spare init not used", "id", s.rec.ID, "err", err)
		return agent.Launch(ctx, spec)
	}
	return inst, err
}

// spareBindHook runs once a spare's group is renamed to its sandbox's,
// before its limits: a test's way to fail the bind there.
var spareBindHook = func() error { return nil }

// bindSpareGroups makes a spare's group the sandbox's: renamed to its
// id (no task moves), the sandbox's limits written, before anything of
// the sandbox runs. On failure (ok false) the spare is killed and its
// group removed: the start clones a fresh init. It runs beside the start
// (the create's cgroup step) and changes only si, which the start's
// launch reads once told ok.
func (s *Sandbox) bindSpareGroups(si *spareInit) (group, user cgroup.Group, ok bool) {
	fail := func(err error) (cgroup.Group, cgroup.Group, bool) {
		s.m.log.Warn("spare init's cgroup not bound; a fresh init starts the sandbox", "id", s.rec.ID, "err", err)
		si.kill()
		return nil, nil, false
	}
	group, err := s.m.cg.Rename(si.group.Name(), s.rec.ID)
	if errors.Is(err, os.ErrExist) {
		// A group of this name left over (as in makeGroups).
		if old, oerr := s.m.cg.Open(s.rec.ID); oerr == nil {
			_ = old.Destroy()
		}
		group, err = s.m.cg.Rename(si.group.Name(), s.rec.ID)
	}
	if err != nil {
		return fail(err) // si.group is still under the spare's name
	}
	si.group = group // from here on the sandbox's name
	if err = spareBindHook(); err != nil {
		return fail(err)
	}
	if user, err = group.OpenSub(userGroupName); err == nil {
		if err = group.SetLimits(s.cgLimits()); err == nil {
			err = user.SetLimits(s.userLimits())
		}
	}
	if err != nil {
		return fail(err)
	}
	si.group, si.placed = nil, true
	return group, user, true
}
