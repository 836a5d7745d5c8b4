package sandbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
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

// spareInit is a spare and the slot it was cloned for.
type spareInit struct {
	sp   *agent.Spare
	slot int
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

// add clones one spare.
func (p *spares) add() error {
	slot, err := p.m.allocSlot()
	if err != nil {
		return err
	}
	sp, err := agent.CloneSpare(context.Background(), p.m.spareSpec(slot))
	if err != nil {
		p.m.freeSlot(slot)
		return err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		sp.Kill()
		p.m.freeSlot(slot)
		return nil
	}
	p.ready = append(p.ready, spareInit{sp: sp, slot: slot})
	p.mu.Unlock()
	return nil
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
		si.sp.Kill()
		p.m.freeSlot(si.slot)
	}
}

// launch starts the sandbox's init: from the spare it was given, else
// (none, or one that cannot be bound as this init would be cloned) a
// fresh one.
func (s *Sandbox) launch(ctx context.Context, spec agent.LaunchSpec) (*agent.Instance, error) {
	sp := s.spare
	s.spare = nil
	if sp == nil {
		return agent.Launch(ctx, spec)
	}
	inst, err := sp.Bind(ctx, spec)
	if errors.Is(err, agent.ErrSpareUnusable) {
		s.m.log.Warn("spare init not used", "id", s.rec.ID, "err", err)
		return agent.Launch(ctx, spec)
	}
	return inst, err
}
