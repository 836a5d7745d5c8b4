// Package warmpool keeps pre-built sandboxes so that creating one is a
// hand-over, not an init start: a pool sandbox has its id range,
// workspace (empty), cgroup and running init; the create that takes it
// applies the owner's limits and writes its record (internal/sandbox,
// pool.go, which makes and throws away the members and keeps their
// quotas' count).
//
// A pool is of one template: Name (SANDBOX_WARM_POOL's name:tag=N), ""
// for the host's. Ref is what the name resolved to at the last refill
// (name:tag@digest); a create takes from the pool only for the same ref,
// and when the name moves, the pool's members are replaced.
package warmpool

import (
	"log/slog"
	"sync"
	"time"
)

// Config is what a pool needs of the manager. The pool calls Unpool and
// Keep under its own lock, so a member's quota moves between the pool's
// count and the manager's in the same step as the member enters or
// leaves the pool.
type Config[S any] struct {
	// Size is how many members are kept ready; 0 none.
	Size int
	// Name is the template the members are made from ("" the host's).
	Name string
	// Resolve is the ref Name stands for now.
	Resolve func() (ref string, err error)
	// Make makes a ready member of ref. Until keep (the member is in the
	// pool) or drop (it is not), the member's quota is reserved.
	Make func(ref string) (s S, keep, drop func(), err error)
	// Unpool takes a member's quota out of the pool's count: to the
	// manager's pending count (pending set, a create took it; release
	// ends that), or to nowhere (it is thrown away).
	Unpool func(s S, pending bool) (release func())
	// Alive tells whether a member can still be handed out.
	Alive func(s S) bool
	// Discard throws a member away (outside the pool's lock).
	Discard func(s S)
	// Refilled sees the end of every refill attempt (nil: a member was
	// added).
	Refilled func(error)
	// Retry is the pause after a failed refill, so a broken host does
	// not spin launching inits.
	Retry time.Duration
	Log   *slog.Logger
	// Stop ends the refills.
	Stop <-chan struct{}
}

// Pool is one warm pool.
type Pool[S any] struct {
	cfg Config[S]

	// mu guards ready, ref, recheck and closed.
	mu    sync.Mutex
	ready []S
	ref   string
	// recheck asks the refill to resolve Name again (a create named it
	// at another ref).
	recheck bool
	closed  bool

	kick chan struct{}
	done chan struct{}
}

// New starts a pool of cfg.Size members.
func New[S any](cfg Config[S]) *Pool[S] {
	p := &Pool[S]{cfg: cfg, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if cfg.Size > 0 {
		go p.fill()
		p.wake()
	} else {
		close(p.done)
	}
	return p
}

// Name is the template the pool's members are made from ("" the host's).
func (p *Pool[S]) Name() string { return p.cfg.Name }

func (p *Pool[S]) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *Pool[S]) fill() {
	defer close(p.done)
	for {
		select {
		case <-p.cfg.Stop:
			return
		case <-p.kick:
		}
		for {
			p.mu.Lock()
			need := !p.closed && (len(p.ready) < p.cfg.Size || p.recheck)
			p.recheck = false
			p.mu.Unlock()
			if !need {
				break
			}
			ref, err := p.resolve()
			if err == nil {
				p.mu.Lock()
				full := len(p.ready) >= p.cfg.Size
				p.mu.Unlock()
				if full {
					continue // a recheck that found the name where it was
				}
			}
			var s S
			var keep, drop func()
			if err == nil {
				s, keep, drop, err = p.cfg.Make(ref)
			}
			if err != nil {
				p.cfg.Refilled(err)
				p.cfg.Log.Error("warm pool refill", "template", p.cfg.Name, "err", err)
				select {
				case <-p.cfg.Stop:
					return
				case <-time.After(p.cfg.Retry):
				}
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				drop()
				p.cfg.Discard(s)
				return
			}
			p.ready = append(p.ready, s)
			// Under p.mu: the reservation becomes the pool's count in
			// one step, before any take can see s.
			keep()
			p.mu.Unlock()
			p.cfg.Refilled(nil)
		}
	}
}

// resolve is the ref of a new member: what the name stands for now (the
// members made for an earlier ref are dropped).
func (p *Pool[S]) resolve() (string, error) {
	ref, err := p.cfg.Resolve()
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	var stale []S
	if p.ref != ref {
		stale, p.ready, p.ref = p.ready, nil, ref
		for _, s := range stale {
			p.cfg.Unpool(s, false)
		}
	}
	p.mu.Unlock()
	for _, s := range stale {
		p.cfg.Discard(s)
	}
	return ref, nil
}

// Take hands out a ready member of ref and the release of its quota
// (Unpool's), or false. When ref is not the pool's but names the same
// template (nameMoved), the refill resolves the name again.
func (p *Pool[S]) Take(ref string, nameMoved bool) (s S, release func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ref != p.ref {
		if nameMoved {
			p.recheck = true
			p.wake()
		}
		return s, nil, false
	}
	for len(p.ready) > 0 {
		s = p.ready[0]
		p.ready = p.ready[1:]
		p.wake()
		if p.cfg.Alive(s) {
			return s, p.cfg.Unpool(s, true), true
		}
		// It died while waiting; throw it away.
		p.cfg.Unpool(s, false)
		go p.cfg.Discard(s)
	}
	var none S
	return none, nil, false
}

// Ref is what the pool's name resolved to at the last refill.
func (p *Pool[S]) Ref() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ref
}

// Each calls f with the ready members, under the pool's lock: f sees
// them as one moment's, and must not call into the pool.
func (p *Pool[S]) Each(f func(ready []S)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p.ready)
}

// Status is the pool's size and how many members wait in it.
func (p *Pool[S]) Status() (size, ready int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Size, len(p.ready)
}

// Close throws away every member; a refill under way ends first.
func (p *Pool[S]) Close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	for _, s := range ready {
		p.cfg.Unpool(s, false)
	}
	p.mu.Unlock()
	<-p.done
	for _, s := range ready {
		p.cfg.Discard(s)
	}
}
