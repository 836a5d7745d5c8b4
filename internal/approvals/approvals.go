// Package approvals holds the calls that wait for an operator: the policy
// said NeedsApproval, the caller got 202 and an approval id, the operator
// approves or denies, and an approved call runs exactly once when the same
// caller submits the identical call again (or at once, for a caller that
// chose to wait). It implements dispatch.Approvals.
//
// What it stops: an approval being stretched to cover something else. An
// approval is bound to the caller's key, the tool and a canonical hash of
// the typed arguments (Hash); it is single use; it expires, pending or
// unused (an expired approval counts as denied). Memory is bounded: pending
// approvals per key and in all are capped, and decided ones are forgotten
// after a retention time.
package approvals

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
)

// Status of an approval.
type Status string

// Statuses.
const (
	Pending  Status = "pending"
	Approved Status = "approved" // granted, not yet used
	Denied   Status = "denied"
	Expired  Status = "expired" // never decided, or granted and never used
	Used     Status = "used"    // granted and run
)

// Defaults; Options override them.
const (
	// DefaultPendingTTL: how long an operator has to decide.
	DefaultPendingTTL = 15 * time.Minute
	// DefaultGrantTTL: how long a granted approval waits for its call.
	DefaultGrantTTL = 10 * time.Minute
	// DefaultMaxWait bounds a caller's wait for the decision (one HTTP
	// request held open).
	DefaultMaxWait = 60 * time.Second
	// DefaultMaxPerKey and DefaultMaxTotal cap pending approvals, so a
	// looping agent cannot fill memory or the operator's queue.
	DefaultMaxPerKey = 20
	DefaultMaxTotal  = 1000
	// retention: decided approvals stay readable (for polling) this long.
	retention = time.Hour
	// maxKept caps every approval held, decided ones included.
	maxKept = 4 * DefaultMaxTotal
)

// Approval is one call waiting for (or past) an operator's decision.
type Approval struct {
	ID        string    `json:"id"`
	Status    Status    `json:"status"`
	Actor     string    `json:"actor" doc:"key id of the caller"`
	Role      string    `json:"role"`
	Tool      string    `json:"tool"`
	Target    string    `json:"target,omitempty" doc:"what the call touches (the command line for exec)"`
	Sandbox   string    `json:"sandbox,omitempty"`
	Risk      string    `json:"risk"`
	Rules     []string  `json:"rules,omitempty" doc:"the command guard's matched rules"`
	Reasons   []string  `json:"reasons,omitempty" doc:"the guard's findings and the policy's reason"`
	ArgsHash  string    `json:"args_hash" doc:"the approval is bound to these exact arguments"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Note      string    `json:"note,omitempty"`

	done chan struct{} // closed on decision or expiry
}

// Options configures a Service; zero values take the defaults.
type Options struct {
	PendingTTL time.Duration
	GrantTTL   time.Duration
	MaxWait    time.Duration
	MaxPerKey  int
	MaxTotal   int
	Now        func() time.Time
}

// Service holds the approvals. Safe for concurrent use.
type Service struct {
	o Options

	// mu guards byID.
	mu   sync.Mutex
	byID map[string]*Approval
}

var _ dispatch.Approvals = (*Service)(nil)

// New returns an empty service.
func New(o Options) *Service {
	if o.PendingTTL <= 0 {
		o.PendingTTL = DefaultPendingTTL
	}
	if o.GrantTTL <= 0 {
		o.GrantTTL = DefaultGrantTTL
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.MaxPerKey <= 0 {
		o.MaxPerKey = DefaultMaxPerKey
	}
	if o.MaxTotal <= 0 {
		o.MaxTotal = DefaultMaxTotal
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{o: o, byID: make(map[string]*Approval)}
}

// MaxWait is the longest a caller may wait for a decision.
func (s *Service) MaxWait() time.Duration { return s.o.MaxWait }

// Request implements dispatch.Approvals.
func (s *Service) Request(ctx context.Context, c auth.Caller, t *dispatch.Tool, a dispatch.Assessment, args any) error {
	hash := Hash(t.Name, args)
	s.mu.Lock()
	now := s.o.Now()
	s.expireLocked(now)
	var pending *Approval
	for _, ap := range s.byID {
		if ap.Actor != c.KeyID || ap.Tool != t.Name || ap.ArgsHash != hash {
			continue
		}
		switch ap.Status {
		case Approved:
			ap.Status = Used
			s.mu.Unlock()
			return nil
		case Pending:
			pending = ap
		}
	}
	if pending == nil {
		var err error
		if pending, err = s.addLocked(now, c, t, a, args, hash); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	id, done := pending.ID, pending.done
	s.mu.Unlock()

	if wait := min(dispatch.ApprovalWait(ctx), s.o.MaxWait); wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-done:
			return s.afterWait(id)
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	return &dispatch.ApprovalRequired{ID: id}
}

// afterWait turns the decision a waiting caller saw into its answer.
func (s *Service) afterWait(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(s.o.Now())
	ap := s.byID[id]
	switch {
	case ap == nil:
		return fault.New(fault.Forbidden, "the approval expired")
	case ap.Status == Approved:
		ap.Status = Used
		return nil
	case ap.Status == Denied:
		return denied(ap)
	case ap.Status == Expired:
		return fault.Errorf(fault.Forbidden, "approval %s expired without a decision", ap.ID)
	}
	return &dispatch.ApprovalRequired{ID: id}
}

func denied(ap *Approval) error {
	msg := fmt.Sprintf("an operator denied approval %s", ap.ID)
	if ap.Note != "" {
		msg += ": " + ap.Note
	}
	return fault.New(fault.Forbidden, msg)
}

func (s *Service) addLocked(now time.Time, c auth.Caller, t *dispatch.Tool, a dispatch.Assessment, args any, hash string) (*Approval, error) {
	perKey, total := 0, 0
	for _, ap := range s.byID {
		if ap.Status == Pending {
			total++
			if ap.Actor == c.KeyID {
				perKey++
			}
		}
	}
	if perKey >= s.o.MaxPerKey {
		return nil, fault.WithRetryAfter(fault.RateLimited, 60, fmt.Sprintf("%d approvals of this key are already waiting for an operator", perKey))
	}
	if total >= s.o.MaxTotal {
		return nil, fault.WithRetryAfter(fault.RateLimited, 60, "too many approvals are waiting for an operator")
	}
	s.evictLocked(now)
	id, err := newID()
	if err != nil {
		return nil, err
	}
	ap := &Approval{
		ID: id, Status: Pending, Actor: c.KeyID, Role: string(c.Role), Tool: t.Name,
		Risk: a.Risk.String(), Rules: a.Rules, Reasons: a.Reasons, ArgsHash: hash,
		CreatedAt: now.UTC(), ExpiresAt: now.Add(s.o.PendingTTL).UTC(), done: make(chan struct{}),
	}
	if t.Describe != nil {
		tg := t.Describe(args)
		ap.Target, ap.Sandbox = tg.Target, tg.Sandbox
	}
	s.byID[id] = ap
	return ap, nil
}

// expireLocked moves approvals past their time to Expired.
func (s *Service) expireLocked(now time.Time) {
	for _, ap := range s.byID {
		if (ap.Status == Pending || ap.Status == Approved) && !now.Before(ap.ExpiresAt) {
			if ap.Status == Pending {
				close(ap.done)
			}
			ap.Status = Expired
		}
	}
}

// evictLocked forgets decided approvals older than the retention, and the
// oldest decided ones beyond maxKept.
func (s *Service) evictLocked(now time.Time) {
	var decided []*Approval
	for id, ap := range s.byID {
		if ap.Status == Pending || ap.Status == Approved {
			continue
		}
		if now.Sub(ap.ExpiresAt) > retention || (!ap.DecidedAt.IsZero() && now.Sub(ap.DecidedAt) > retention) {
			delete(s.byID, id)
			continue
		}
		decided = append(decided, ap)
	}
	if over := len(s.byID) - maxKept + 1; over > 0 {
		sort.Slice(decided, func(i, j int) bool { return decided[i].CreatedAt.Before(decided[j].CreatedAt) })
		for _, ap := range decided[:min(over, len(decided))] {
			delete(s.byID, ap.ID)
		}
	}
}

func newID() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("approval id: %w", err)
	}
	return "apr_" + hex.EncodeToString(b), nil
}

// Decide approves or denies a pending approval.
func (s *Service) Decide(by auth.Caller, id string, approve bool, note string) (Approval, error) {
	if len(note) > 512 {
		note = note[:512]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	s.expireLocked(now)
	ap := s.byID[id]
	if ap == nil {
		return Approval{}, fault.New(fault.NotFound, "approval not found")
	}
	if ap.Status != Pending {
		return ap.copy(), fault.Errorf(fault.Conflict, "approval %s is already %s", id, ap.Status)
	}
	ap.DecidedBy, ap.DecidedAt, ap.Note = by.KeyID, now.UTC(), note
	if approve {
		ap.Status = Approved
		ap.ExpiresAt = now.Add(s.o.GrantTTL).UTC()
	} else {
		ap.Status = Denied
	}
	close(ap.done)
	return ap.copy(), nil
}

// Get returns one approval: admins see every approval, other keys their
// own (for polling); anything else is not found.
func (s *Service) Get(c auth.Caller, id string) (Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(s.o.Now())
	ap := s.byID[id]
	if ap == nil || (!c.IsAdmin() && ap.Actor != c.KeyID) {
		return Approval{}, fault.New(fault.NotFound, "approval not found")
	}
	return ap.copy(), nil
}

// List returns approvals, newest first, optionally of one status.
func (s *Service) List(status Status) []Approval {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(s.o.Now())
	out := []Approval{}
	for _, ap := range s.byID {
		if status == "" || ap.Status == status {
			out = append(out, ap.copy())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out
}

func (ap *Approval) copy() Approval {
	c := *ap
	c.done = nil
	return c
}
