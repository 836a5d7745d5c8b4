package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/template"
)

// pool keeps pre-built sandboxes so that creating one is a hand-over, not a
// 20 ms init start. A pool sandbox has its id range, workspace (empty),
// cgroup and running init; claiming it applies the owner's limits and
// writes its record. Only specs the pool can serve take from it (network
// none); others are built cold.
type pool struct {
	m    *Manager
	size int
	// name is the public template the pool's sandboxes are made from
	// (SANDBOX_WARM_POOL's name:tag=N), "" for the host's; ref is what
	// it resolved to at the last refill (name:tag@digest). A create takes
	// from the pool only for the same ref: when the name moves, the
	// pool's sandboxes are replaced.
	name string
	ref  string
	// recheck asks the refill to resolve name again (a create named it at
	// another digest). Guarded by mu.
	recheck bool

	// defaultMu serialises creating default sandboxes (one per key).
	defaultMu sync.Mutex

	// mu guards ready, layers and closed.
	mu     sync.Mutex
	ready  []*Sandbox
	layers []agent.Layer
	closed bool

	kick chan struct{}
	done chan struct{}
}

// poolRetry is the pause after a failed refill, so a broken host does not
// spin launching inits.
const poolRetry = 5 * time.Second

func newPool(m *Manager, size int, name string) *pool {
	p := &pool{m: m, size: size, name: name, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if size > 0 {
		go p.fill()
		p.wake()
	} else {
		close(p.done)
	}
	return p
}

func (p *pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *pool) fill() {
	defer close(p.done)
	for {
		select {
		case <-p.m.stop:
			return
		case <-p.kick:
		}
		for {
			p.mu.Lock()
			need := !p.closed && (len(p.ready) < p.size || p.recheck)
			p.recheck = false
			p.mu.Unlock()
			if !need {
				break
			}
			rec, err := p.record()
			if err == nil {
				p.mu.Lock()
				full := len(p.ready) >= p.size
				p.mu.Unlock()
				if full {
					continue // a recheck that found the name where it was
				}
			}
			reserved := p.m.cfg.Default.DiskBytes
			release := func() {}
			if err == nil {
				release, err = p.m.reserveDisk(reserved)
			}
			var s *Sandbox
			if err == nil {
				s, err = p.m.cold(context.Background(), rec)
				if err == nil {
					err = warmUp(s)
				}
				if err != nil {
					release()
				}
			}
			if err != nil {
				refillHook(err)
				p.m.log.Error("warm pool refill", "template", p.name, "err", err)
				select {
				case <-p.m.stop:
					return
				case <-time.After(poolRetry):
				}
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				release()
				s.shutdown()
				p.m.discard(s)
				return
			}
			p.ready = append(p.ready, s)
			// Under p.mu: the reservation becomes the pool's count in
			// one step, before any take can see s.
			held := int64(0) // what reserveDisk put in pending
			if p.m.cfg.DiskBudget > 0 && reserved > 0 {
				held = reserved
			}
			p.m.diskIntoPool(held, s.diskBytes())
			p.mu.Unlock()
			refillHook(nil)
		}
	}
}

// record is the record of a new pool sandbox: for a template pool, of the
// template its name names now (the sandboxes made for an earlier digest
// are dropped).
func (p *pool) record() (Record, error) {
	rec := Record{ID: newID()}
	if p.name == "" {
		return rec, nil
	}
	if p.m.cfg.Templates == nil {
		return rec, errors.New("this server keeps no templates")
	}
	t, err := p.m.cfg.Templates.Resolve(template.Caller{Admin: true}, p.name)
	if err != nil {
		return rec, err
	}
	if t.Owner != "" {
		return rec, fmt.Errorf("template %s is not public (an admin's): no pool for it", p.name)
	}
	p.mu.Lock()
	var stale []*Sandbox
	if p.ref != t.Ref() {
		stale, p.ready, p.ref = p.ready, nil, t.Ref()
		for _, s := range stale {
			p.m.diskOutOfPool(s.diskBytes(), false)
		}
	}
	p.mu.Unlock()
	for _, s := range stale {
		s.shutdown()
		p.m.discard(s)
	}
	rec.Spec.Template = t.Ref()
	return rec, nil
}

// takePooled hands out a ready sandbox of the pool that serves spec, and
// the release of its quota (see take), or nil.
func (m *Manager) takePooled(spec Spec) (*Sandbox, func()) {
	for _, p := range m.pools {
		if s, release := p.take(spec); s != nil {
			return s, release
		}
	}
	return nil, nil
}

// refillHook sees the end of every refill attempt (nil: a sandbox was
// added): a test's window into the race of a refill and a take.
var refillHook = func(error) {}

// take hands out a ready sandbox for spec, or nil. Its quota moves from
// the pool's count to pending in the same step (disk.go); the caller
// calls release once the sandbox is listed, or thrown away.
func (p *pool) take(spec Spec) (s *Sandbox, release func()) {
	if spec.Network.Mode != NetworkNone || !p.m.poolDisk(spec) {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if spec.Template != p.ref {
		if name, _ := templateNames(spec.Template); p.name != "" && TemplateName(name) == TemplateName(p.name) {
			// The name moved: the refill resolves it again.
			p.recheck = true
			p.wake()
		}
		return nil, nil
	}
	for len(p.ready) > 0 {
		s := p.ready[0]
		p.ready = p.ready[1:]
		p.wake()
		if s.State() == Running {
			wakeInit(s)
			return s, p.m.diskOutOfPool(s.diskBytes(), true)
		}
		// Its init died while waiting; throw it away.
		p.m.diskOutOfPool(s.diskBytes(), false)
		go func() { s.shutdown(); p.m.discard(s) }()
	}
	return nil, nil
}

// wakeInit pings a pool sandbox's init as it is handed out, beside the
// rest of the create: an init idle for its quiet period sleeps in its
// keeper (internal/agent, sleep_linux.go), and the wake (a Go runtime
// start, ≈17 ms) should not fall on the owner's first command.
func wakeInit(s *Sandbox) {
	s.mu.Lock()
	inst := s.inst
	s.mu.Unlock()
	if inst == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = inst.Ping(ctx) // a dead init is the sandbox's own restart's business
	}()
}

// warmUp runs one command in a fresh pool sandbox, so its init has paged
// in the spawn path and an execution group is ready: the owner's first
// command then costs what every later one does.
func warmUp(s *Sandbox) error {
	e, err := s.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/true"}, Timeout: 10 * time.Second})
	if err != nil {
		s.shutdown()
		s.m.discard(s)
		return err
	}
	s.mu.Lock()
	delete(s.byID, e.ID)
	s.finished = nil
	s.execSeq = 0
	s.mu.Unlock()
	return nil
}

func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	for _, s := range ready {
		p.m.diskOutOfPool(s.diskBytes(), false)
	}
	p.mu.Unlock()
	<-p.done
	for _, s := range ready {
		s.shutdown()
		p.m.discard(s)
	}
}

func (p *pool) noteLayers(l []agent.Layer) {
	p.mu.Lock()
	p.layers = l
	p.mu.Unlock()
}

func (p *pool) lastLayers() []agent.Layer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]agent.Layer(nil), p.layers...)
}

// PoolStatus is the warm pool's size and how many sandboxes wait in it,
// and the spare inits cold creates bind (spares.go).
type PoolStatus struct {
	Size   int         `json:"size"`
	Ready  int         `json:"ready"`
	Spares SpareStatus `json:"spares"`
}

func (p *pool) status() PoolStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStatus{Size: p.size, Ready: len(p.ready)}
}
