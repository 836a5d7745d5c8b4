// Package spareinit keeps inits cloned ahead (agent.Spare): a cold create
// binds one to its new sandbox instead of cloning an init and waiting for
// its Go runtime to start. A spare holds a host id range (slot) that no
// sandbox has; the create that takes it gets that range. Nothing else of a
// sandbox exists before the create: its cgroups, workspace, network
// policy, limits and setup come at the bind, as for a fresh init
// (internal/sandbox, spares.go).
//
// At most Want spares exist (SANDBOX_SPARE_INITS; 0 none). One taken is
// replaced in the background once its create is done. They die with the
// server (each init's Pdeathsig), are killed by Close, and a restarted
// server starts new ones: a spare has no record, cgroup or workspace to
// reap.
package spareinit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// Config is what the spares need of the manager.
type Config struct {
	// Want is how many spares are kept ready; 0 none.
	Want int
	// Alloc reserves a host id range (a slot); Free gives one back.
	Alloc func() (int, error)
	Free  func(slot int)
	// Spec is what the spare of slot is cloned with.
	Spec func(slot int) agent.LaunchSpec
	// CG makes the spares' groups (cgroup v1 only; see add), with Limits
	// until their bind and a child UserGroup, as a sandbox's group has.
	CG        cgroup.Manager
	Limits    cgroup.Limits
	UserGroup string
	// Retry is the pause after a failed clone.
	Retry time.Duration
	Log   *slog.Logger
	// Stop ends the filler.
	Stop <-chan struct{}
}

// Spares are the spare inits of a manager.
type Spares struct {
	cfg Config

	// mu guards ready, closed, taken and missed.
	mu     sync.Mutex
	ready  []Init // oldest first
	closed bool
	// taken counts the cold creates that bound a spare, missed those
	// that could have and found none ready (Status).
	taken, missed int64

	kick chan struct{}
	done chan struct{}
}

// Init is a spare, the slot it was cloned for and, on cgroup v1, the
// group it waits in.
type Init struct {
	Spare *agent.Spare
	Slot  int
	// Group is the spare's own group (GroupName(Slot), made before its
	// clone, the init moved into it once cloned), nil on v2 (its
	// cgroupfs cannot rename a group) or once bound. A create renames it
	// to the sandbox's id and writes the sandbox's limits: the init is
	// then in its sandbox's groups without a migration on the create's
	// path.
	Group cgroup.Group
	// Placed: Group is the sandbox's now, the init in it (set by the
	// bind; a fresh init that replaces an unusable spare is placed).
	Placed bool
}

// Kill ends an unbound spare and removes its group.
func (si *Init) Kill() {
	si.Spare.Kill()
	if si.Group != nil {
		_ = si.Group.Destroy()
		si.Group = nil
	}
}

// GroupName is the group a spare of slot waits in; sandbox ids ("sb" and
// hex) never look like it.
func GroupName(slot int) string { return "spare-" + strconv.Itoa(slot) }

// New starts keeping cfg.Want spares.
func New(cfg Config) *Spares {
	p := &Spares{cfg: cfg, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if cfg.Want > 0 {
		go p.fill()
		p.wake()
	} else {
		close(p.done)
	}
	return p
}

func (p *Spares) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *Spares) fill() {
	defer close(p.done)
	for {
		select {
		case <-p.cfg.Stop:
			return
		case <-p.kick:
		}
		for {
			p.mu.Lock()
			need := !p.closed && len(p.ready) < p.cfg.Want
			p.mu.Unlock()
			if !need {
				break
			}
			if err := p.add(); err != nil {
				p.cfg.Log.Warn("spare init not cloned; creates clone their own", "err", err)
				select {
				case <-p.cfg.Stop:
					return
				case <-time.After(p.cfg.Retry):
				}
			}
		}
	}
}

// add clones one spare: on cgroup v1 into a group of its own, made
// first and holding the user child every sandbox has, so that a create
// renames it instead of migrating the init (a v1 migration waits for an
// RCU grace period: 0.6 ms on a quiet host, 7–10 ms under load;
// BENCHMARKS.md). The migration into the spare's group is paid here, off
// any create's path.
func (p *Spares) add() error {
	slot, err := p.cfg.Alloc()
	if err != nil {
		return err
	}
	si := Init{Slot: slot}
	if p.cfg.CG.Info().Version == 1 {
		if si.Group, err = p.group(slot); err != nil {
			p.cfg.Free(slot)
			return err
		}
	}
	fail := func(err error) error {
		if si.Group != nil {
			_ = si.Group.Destroy()
		}
		p.cfg.Free(slot)
		return err
	}
	if si.Spare, err = agent.CloneSpare(context.Background(), p.cfg.Spec(slot)); err != nil {
		return fail(err)
	}
	if si.Group != nil {
		if err := si.Group.AddProc(si.Spare.Pid()); err != nil {
			si.Spare.Kill()
			return fail(fmt.Errorf("place a spare init in its group: %w", err))
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		si.Kill()
		p.cfg.Free(slot)
		return nil
	}
	p.ready = append(p.ready, si)
	p.mu.Unlock()
	return nil
}

// group makes a spare's group and its user child, as a sandbox's are
// made but with cfg.Limits (a leftover of the name, from a spare whose
// kill failed to remove it, goes first).
func (p *Spares) group(slot int) (cgroup.Group, error) {
	name := GroupName(slot)
	g, err := p.cfg.CG.Create(name, p.cfg.Limits)
	if errors.Is(err, os.ErrExist) {
		if old, oerr := p.cfg.CG.Open(name); oerr == nil {
			_ = old.Destroy()
		}
		g, err = p.cfg.CG.Create(name, p.cfg.Limits)
	}
	if err != nil {
		return nil, fmt.Errorf("create a spare init's cgroup: %w", err)
	}
	if _, err := g.SubSharingLimits(p.cfg.UserGroup, cgroup.Limits{}); err != nil {
		_ = g.Destroy()
		return nil, fmt.Errorf("create a spare init's user cgroup: %w", err)
	}
	return g, nil
}

// Take hands out the oldest spare, or false when there is none. The
// caller owns the spare and its slot and calls Refill (or
// RefillAfterFirst) once its start is done. A create that cannot use a
// spare at all does not call it: it counts as neither taken nor missed.
func (p *Spares) Take() (Init, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready) > 0 {
		si := p.ready[0]
		p.ready = p.ready[1:]
		select {
		case <-si.Spare.Exited():
			// It died waiting (killed from outside, out of memory):
			// reaped already, its range is free again.
			p.cfg.Log.Warn("a spare init ended before it was used", "pid", si.Spare.Pid())
			si.Kill()
			p.cfg.Free(si.Slot)
			p.wake()
			continue
		default:
		}
		p.taken++
		return si, true
	}
	if p.cfg.Want > 0 {
		p.missed++
	}
	return Init{}, false
}

// Status is how many spares are ready of the target, and how many takes
// found one (Taken) or none (Missed) since the start.
type Status struct {
	Ready  int
	Target int
	Taken  int64
	Missed int64
}

// Status reports the spares.
func (p *Spares) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Status{Ready: len(p.ready), Target: p.cfg.Want, Taken: p.taken, Missed: p.missed}
}

// Ready are the spares waiting now, oldest first.
func (p *Spares) Ready() []*agent.Spare {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*agent.Spare, 0, len(p.ready))
	for _, si := range p.ready {
		out = append(out, si.Spare)
	}
	return out
}

// Refill asks for a replacement of a taken spare.
func (p *Spares) Refill() {
	if p.cfg.Want > 0 {
		p.wake()
	}
}

// RefillAfterFirst asks for the replacement of a taken spare once the
// returned func is called (at the end of its sandbox's first command) or
// bound has passed, whichever comes first: the replacement's clone,
// runtime start and group (≈ 9 ms of CPU) then do not run beside the
// command a cold create is made for, on a host with few CPUs. It returns
// nil when no spares are kept.
func (p *Spares) RefillAfterFirst(bound time.Duration) (first func()) {
	if p.cfg.Want == 0 {
		return nil
	}
	var once sync.Once
	f := func() { once.Do(p.wake) }
	time.AfterFunc(bound, f)
	return f
}

// Close kills every spare and frees its range; a clone under way ends
// with the filler (add kills what it cloned after Close).
func (p *Spares) Close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	<-p.done
	for _, si := range ready {
		si.Kill()
		p.cfg.Free(si.Slot)
	}
}
