package dispatch

import (
	"context"
	"fmt"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Decision is the policy's answer.
type Decision int

// Decisions.
const (
	Allow Decision = iota
	NeedsApproval
	Deny
)

// Policy decides whether a caller may run a tool at an assessed risk.
type Policy interface {
	Decide(ctx context.Context, c auth.Caller, t *Tool, a Assessment, args any) (Decision, string)
}

// Halt reports whether an operator has halted the server.
type Halt interface {
	Halted() (bool, string)
}

// Approvals turns a NeedsApproval decision into a pending approval; it
// returns the error the caller sees (an ApprovalRequired, or a refusal).
// It returns nil when an operator has approved this identical call (same
// caller, tool and arguments) and the approval is used up by this call:
// the dispatcher then runs it.
type Approvals interface {
	Request(ctx context.Context, c auth.Caller, t *Tool, a Assessment, args any) error
}

// RateRules returns the per-role and per-key rate-limit overrides for a
// caller (the policy's rate_limits); the limiter resolves them over its base
// rules.
type RateRules func(c auth.Caller) ratelimit.Rules

// Observer sees every call that reaches the dispatcher, before any step
// (tests prove that every route goes through it).
type Observer func(ctx context.Context, c auth.Caller, name string)

// ApprovalRequired is returned when a call waits for an operator.
type ApprovalRequired struct {
	ID string
}

func (e *ApprovalRequired) Error() string { return "approval required: " + e.ID }

// RateLimited is the cause inside the fault returned when a limit refuses
// a call; it carries what a 429 needs (Retry-After, X-RateLimit-*).
type RateLimited struct {
	Category ratelimit.Category
	Decision ratelimit.Decision
}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("rate limit for %s exceeded; retry in %ds", e.Category, e.Decision.RetryAfterSeconds())
}

// SetPolicy installs the policy step (the daemon builds the policy after
// the dispatcher).
func (d *Dispatcher) SetPolicy(p Policy) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.policy = p
}

// SetHalt installs the HALT step.
func (d *Dispatcher) SetHalt(h Halt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.halt = h
}

// SetApprovals installs the approvals step.
func (d *Dispatcher) SetApprovals(a Approvals) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.approvals = a
}

// SetRateRules installs the per-role/per-key rate-limit overrides.
func (d *Dispatcher) SetRateRules(r RateRules) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rates = r
}

// Limiter is the rate limiter the dispatcher counts with (nil: none), for
// the X-RateLimit-* headers of allowed calls.
func (d *Dispatcher) Limiter() *ratelimit.Limiter { return d.limiter }

// Observe adds fn to the observers that see every call first.
func (d *Dispatcher) Observe(fn Observer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.observers = append(d.observers, fn)
}

type steps struct {
	policy    Policy
	halt      Halt
	approvals Approvals
	rates     RateRules
	observers []Observer
}

func (d *Dispatcher) steps() steps {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return steps{policy: d.policy, halt: d.halt, approvals: d.approvals, rates: d.rates, observers: d.observers}
}
