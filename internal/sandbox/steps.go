package sandbox

import (
	"log/slog"
	"time"
)

// stepClock times the steps of one init start (workspace image, loop and
// mount, cgroups, the init's clone and exec, its setup) so that a cold
// create can be broken down in one run: the manager logs them at debug
// level, and the create benchmark sums them. A nil clock records nothing.
type stepClock struct {
	last  time.Time
	steps []step
}

type step struct {
	name string
	d    time.Duration
}

func newStepClock() *stepClock { return &stepClock{last: time.Now()} }

// mark ends the step under way, naming it, and starts the next.
func (c *stepClock) mark(name string) {
	if c == nil {
		return
	}
	now := time.Now()
	c.steps = append(c.steps, step{name: name, d: now.Sub(c.last)})
	c.last = now
}

// add records a step timed elsewhere (one that ran beside the others).
func (c *stepClock) add(name string, d time.Duration) {
	if c == nil {
		return
	}
	c.steps = append(c.steps, step{name: name, d: d})
}

// attrs are the steps as log attributes, in microseconds.
func (c *stepClock) attrs() []any {
	if c == nil {
		return nil
	}
	out := make([]any, 0, len(c.steps))
	for _, s := range c.steps {
		out = append(out, slog.Int64(s.name+"_us", s.d.Microseconds()))
	}
	return out
}

// Mark is mark, for package volume's steps (volume.Clock).
func (c *stepClock) Mark(name string) { c.mark(name) }
