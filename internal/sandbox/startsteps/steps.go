// Package startsteps times the steps of one init start (workspace image,
// loop and mount, cgroups, the init's clone and exec, its setup) so that a
// cold create can be broken down in one run: the manager logs them at
// debug level, and the create benchmark sums them (internal/sandbox,
// sandbox.go). Beside runs a step on a goroutine of its own, timed.
package startsteps

import (
	"log/slog"
	"time"
)

// Clock times the steps of one start. A nil clock records nothing.
type Clock struct {
	last  time.Time
	steps []Step
}

// Step is one timed step.
type Step struct {
	Name string
	D    time.Duration
}

// New starts a clock.
func New() *Clock { return &Clock{last: time.Now()} }

// Mark ends the step under way, naming it, and starts the next (and is
// package volume's volume.Clock).
func (c *Clock) Mark(name string) {
	if c == nil {
		return
	}
	now := time.Now()
	c.steps = append(c.steps, Step{Name: name, D: now.Sub(c.last)})
	c.last = now
}

// Add records a step timed elsewhere (one that ran beside the others).
func (c *Clock) Add(name string, d time.Duration) {
	if c == nil {
		return
	}
	c.steps = append(c.steps, Step{Name: name, D: d})
}

// Steps are the steps recorded, in order.
func (c *Clock) Steps() []Step {
	if c == nil {
		return nil
	}
	return c.steps
}

// Attrs are the steps as log attributes, in microseconds.
func (c *Clock) Attrs() []any {
	if c == nil {
		return nil
	}
	out := make([]any, 0, len(c.steps))
	for _, s := range c.steps {
		out = append(out, slog.Int64(s.Name+"_us", s.D.Microseconds()))
	}
	return out
}

// Beside runs fn on its own goroutine; the returned wait gives its
// duration and error (the first call waits, later calls return 0, nil).
func Beside(fn func() error) (wait func() (time.Duration, error)) {
	if fn == nil {
		return func() (time.Duration, error) { return 0, nil }
	}
	done := make(chan struct{})
	var ferr error
	var took time.Duration
	go func() {
		t0 := time.Now()
		ferr = fn()
		took = time.Since(t0)
		close(done)
	}()
	waited := false
	return func() (time.Duration, error) {
		<-done
		if waited {
			return 0, nil
		}
		waited = true
		return took, ferr
	}
}
