package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
)

// pool keeps pre-built sandboxes so that creating one is a hand-over, not a
// 20 ms init start. A pool sandbox has its id range, workspace (empty),
// cgroup and running init; claiming it applies the owner's limits and
// writes its record. Only specs the pool can serve take from it (network
// none); others are built cold.
type pool struct {
	m    *Manager
	size int

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

func newPool(m *Manager, size int) *pool {
	p := &pool{m: m, size: size, kick: make(chan struct{}, 1), done: make(chan struct{})}
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
			need := !p.closed && len(p.ready) < p.size
			p.mu.Unlock()
			if !need {
				break
			}
			reserved := p.m.cfg.Default.DiskBytes
			release, err := p.m.reserveDisk(reserved)
			var s *Sandbox
			if err == nil {
				s, err = p.m.cold(context.Background(), Record{ID: newID()})
				if err == nil {
					err = warmUp(s)
				}
				if err != nil {
					release()
				}
			}
			if err != nil {
				refillHook(err)
				p.m.log.Error("warm pool refill", "err", err)
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

// refillHook sees the end of every refill attempt (nil: a sandbox was
// added): a test's window into the race of a refill and a take.
var refillHook = func(error) {}

// take hands out a ready sandbox for spec, or nil. Its quota moves from
// the pool's count to pending in the same step (disk.go); the caller
// calls release once the sandbox is listed, or thrown away.
func (p *pool) take(spec Spec) (s *Sandbox, release func()) {
	if spec.Network.Mode != NetworkNone || !p.m.poolDisk(spec) || spec.Template != "" {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
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

// PoolStatus is the warm pool's size and how many sandboxes wait in it.
type PoolStatus struct {
	Size  int `json:"size"`
	Ready int `json:"ready"`
}

func (p *pool) status() PoolStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStatus{Size: p.size, Ready: len(p.ready)}
}
