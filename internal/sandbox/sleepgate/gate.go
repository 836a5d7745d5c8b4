// Package sleepgate holds idle sleeps back while sandboxes are being
// created.
//
// An init idle for its quiet period (SANDBOX_IDLE_SLEEP) asks the server
// for leave to sleep in its keeper (agent.EventSleep). Going to sleep
// costs the host a few milliseconds of CPU (the keeper's exec, the old
// address space torn down), and a burst of creates reaches the end of
// the first sandboxes' quiet period while it is still creating the last:
// those sleeps would land on the last creates. So the gate grants a
// sleep at once only while no create is under way and none ended within
// createQuiet; otherwise it holds the leave and, once creates have been
// quiet that long, grants the held ones in order, one per grantGap, and
// stops again when a create begins. A leave is never held longer than
// maxHold: a server that never stops creating still lets its idle inits
// sleep, late. Holding a leave only keeps an idle init awake a little
// longer; it changes nothing of what the init or the sandbox may do.
package sleepgate

import (
	"sync"
	"time"
)

// Gate is the manager's gate on its inits' sleeps (see the package).
type Gate struct {
	stop <-chan struct{}

	// mu guards the fields below.
	mu       sync.Mutex
	creating int       // creates under way
	ended    time.Time // when the last one ended
	held     []heldSleep
	kick     chan struct{}
}

// heldSleep is a leave held back, and when its init asked.
type heldSleep struct {
	grant func()
	at    time.Time
}

const (
	// createQuiet is how long after the last create ended sleeps are
	// still held.
	createQuiet = time.Second
	// grantGap spaces the held sleeps granted after a burst, so they
	// do not all land on the next create.
	grantGap = 5 * time.Millisecond
	// maxHold bounds how long a leave is held.
	maxHold = 2 * time.Minute
)

// New starts a gate, running until stop is closed.
func New(stop <-chan struct{}) *Gate {
	g := &Gate{stop: stop, kick: make(chan struct{}, 1)}
	go g.run()
	return g
}

// Ask is an init's question (agent.LaunchSpec.SleepGate): grant runs at
// once or later, exactly once, on another goroutine than the caller's.
// A manager without a gate (a test's) grants at once.
func (g *Gate) Ask(grant func()) {
	if g == nil {
		go grant()
		return
	}
	g.mu.Lock()
	if g.creating == 0 && len(g.held) == 0 && time.Since(g.ended) >= createQuiet {
		g.mu.Unlock()
		go grant()
		return
	}
	g.held = append(g.held, heldSleep{grant: grant, at: time.Now()})
	g.mu.Unlock()
	g.wake()
}

// Creates marks a create under way until the function it returns runs.
func (g *Gate) Creates() func() {
	if g == nil {
		return func() {}
	}
	g.mu.Lock()
	g.creating++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.creating--
		g.ended = time.Now()
		g.mu.Unlock()
		g.wake()
	}
}

func (g *Gate) wake() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// next is the leave to grant now, if any, and else how long to wait
// before looking again (0: until kicked).
func (g *Gate) next(now time.Time) (func(), time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) == 0 {
		return nil, 0
	}
	first := g.held[0]
	quietAt := g.ended.Add(createQuiet)
	if (g.creating == 0 && !now.Before(quietAt)) || now.Sub(first.at) >= maxHold {
		g.held[0] = heldSleep{}
		g.held = g.held[1:]
		return first.grant, 0
	}
	wait := first.at.Add(maxHold).Sub(now)
	if g.creating == 0 {
		wait = min(wait, quietAt.Sub(now))
	}
	return nil, max(wait, time.Millisecond)
}

// run grants the held leaves as next allows, until the manager stops
// (what it holds then is dropped: the inits end with the manager).
func (g *Gate) run() {
	for {
		grant, wait := g.next(time.Now())
		if grant != nil {
			go grant() // a send on the init's socket; never waited on here
			wait = grantGap
		}
		var timer <-chan time.Time
		if wait > 0 {
			timer = time.After(wait)
		}
		select {
		case <-g.stop:
			return
		case <-timer:
		case <-g.kick:
			if grant != nil {
				// A kick says nothing about the gap: keep it.
				select {
				case <-g.stop:
					return
				case <-timer:
				}
			}
		}
	}
}

// Held is how many leaves the gate holds now.
func (g *Gate) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

// AfterMs is the quiet period (SANDBOX_IDLE_SLEEP) as the init's setting
// (agent.Setup.SleepAfterMs): 0 the init's default, below 0 never, else
// whole milliseconds (at least 1).
func AfterMs(d time.Duration) int {
	switch {
	case d < 0:
		return -1
	case d == 0:
		return 0
	}
	return int(max(d.Milliseconds(), 1))
}
