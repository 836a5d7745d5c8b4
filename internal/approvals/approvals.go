// Package approvals holds the calls that wait for an operator: the policy
// said NeedsApproval, the caller got 202 and an approval id, the operator
// approves or denies, and an approved call runs exactly once when the same
// caller submits the identical call again (or at once, for a caller that
// chose to wait). It implements dispatch.Approvals.
//
// What it stops: an approval being stretched to cover something else. An
// approval is bound to the caller's key, the tool, a canonical hash of the
// typed arguments (Hash) and, for a tool whose behaviour is data (a custom
// tool), the digest of its definition: a redefinition voids it (Void, and
// the dispatcher checks the digest again before the call runs). It shows
// the operator what will run, step by step. It is single use; it expires,
// pending or unused (an expired approval counts as denied). Memory is bounded: pending
// approvals per key and in all are capped, and decided ones are forgotten
// after a retention time.
//
// On one host the approvals live in memory. The nodes of a cluster share
// them through the store (Options.Shared, PostgreSQL): every step reads and
// writes them under one database lock, so an operator may decide on any
// node, the caller may retry on any node, and a grant is still used once.
package approvals

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/store"
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
	// Void: the tool was redefined (or deleted) before the call ran; what
	// was shown is no longer what would run.
	Void Status = "void"
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
	ID       string   `json:"id"`
	Status   Status   `json:"status"`
	Actor    string   `json:"actor" doc:"key id of the caller"`
	Role     string   `json:"role"`
	Tool     string   `json:"tool"`
	Target   string   `json:"target,omitempty" doc:"what the call touches (the command line for exec)"`
	Sandbox  string   `json:"sandbox,omitempty"`
	Risk     string   `json:"risk"`
	Rules    []string `json:"rules,omitempty" doc:"the command guard's matched rules"`
	Reasons  []string `json:"reasons,omitempty" doc:"the guard's findings and the policy's reason"`
	ArgsHash string   `json:"args_hash" doc:"the approval is bound to these exact arguments"`
	Digest   string   `json:"digest,omitempty" doc:"for a custom tool: the digest of the definition approved (its steps, templates and the custom tools it calls); a redefinition voids the approval"`
	// Steps are what the call will run (a custom tool's rendered steps).
	Steps     []dispatch.PlannedStep `json:"steps,omitempty" doc:"what the call will run: each step's tool, its target (the rendered command line of exec) and rendered arguments"`
	CreatedAt time.Time              `json:"created_at"`
	ExpiresAt time.Time              `json:"expires_at"`
	DecidedBy string                 `json:"decided_by,omitempty"`
	DecidedAt time.Time              `json:"decided_at,omitzero"`
	Note      string                 `json:"note,omitempty"`

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
	// Shared, when set, holds the approvals instead of memory (the nodes
	// of a cluster share them); a waiting caller polls it every PollEvery.
	Shared    Shared
	PollEvery time.Duration
}

// Shared is the store's side of shared approvals (store.Postgres).
type Shared interface {
	UpdateApprovals(ctx context.Context, fn func(rows []store.ApprovalRow) (put []store.ApprovalRow, del []string, err error)) error
}

// sharedTimeout bounds one step on the shared store for the methods that
// have no context of their own.
const sharedTimeout = 10 * time.Second

// defaultPollEvery: how often a waiting caller looks for a decision made
// on another node.
const defaultPollEvery = 200 * time.Millisecond

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
	if o.PollEvery <= 0 {
		o.PollEvery = defaultPollEvery
	}
	return &Service{o: o, byID: make(map[string]*Approval)}
}

// with runs fn with the approvals in s.byID, serialised: in memory under
// s.mu; with a shared store also under the store's lock, loaded before fn
// and what fn changed written back after it. An error from fn (or the
// store) leaves the approvals as they were.
func (s *Service) with(ctx context.Context, fn func(now time.Time) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.o.Shared == nil {
		return fn(s.o.Now())
	}
	var fnErr error
	err := s.o.Shared.UpdateApprovals(ctx, func(rows []store.ApprovalRow) ([]store.ApprovalRow, []string, error) {
		before := make(map[string][]byte, len(rows))
		s.byID = make(map[string]*Approval, len(rows))
		for _, r := range rows {
			ap := &Approval{}
			if err := json.Unmarshal(r.Doc, ap); err != nil || ap.ID != r.ID {
				return nil, nil, fmt.Errorf("approvals: stored approval %q is unreadable", r.ID)
			}
			ap.done = make(chan struct{})
			s.byID[r.ID], before[r.ID] = ap, r.Doc
		}
		if fnErr = fn(s.o.Now()); fnErr != nil {
			return nil, nil, fnErr
		}
		var put []store.ApprovalRow
		for id, ap := range s.byID {
			doc, err := json.Marshal(ap)
			if err != nil {
				return nil, nil, fmt.Errorf("approvals: encode: %w", err)
			}
			if !bytes.Equal(doc, before[id]) {
				put = append(put, store.ApprovalRow{ID: id, Doc: doc})
			}
		}
		var del []string
		for id := range before {
			if _, ok := s.byID[id]; !ok {
				del = append(del, id)
			}
		}
		return put, del, nil
	})
	s.byID = nil // the store holds them; nothing is read from memory
	if fnErr != nil && errors.Is(err, fnErr) {
		return fnErr
	}
	if err != nil {
		// The store failed: refuse (fail closed), without its detail.
		return fault.Wrap(fault.Unavailable, err, "approvals are unavailable: the shared store did not answer")
	}
	return nil
}

// withTimeout is with for the methods that have no context.
func (s *Service) withTimeout(fn func(now time.Time) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	return s.with(ctx, fn)
}

// MaxWait is the longest a caller may wait for a decision.
func (s *Service) MaxWait() time.Duration { return s.o.MaxWait }

// Request implements dispatch.Approvals.
func (s *Service) Request(ctx context.Context, c auth.Caller, t *dispatch.Tool, a dispatch.Assessment, args any) error {
	hash := Hash(t.Name, args)
	var id string
	var done chan struct{}
	used := false
	err := s.with(ctx, func(now time.Time) error {
		s.expireLocked(now)
		var pending, refused *Approval
		for _, ap := range s.byID {
			if ap.Actor != c.KeyID || ap.Tool != t.Name || ap.ArgsHash != hash || ap.Digest != a.Digest {
				continue
			}
			switch ap.Status {
			case Approved:
				ap.Status = Used
				used = true
				return nil
			case Pending:
				pending = ap
			case Denied:
				if now.Sub(ap.DecidedAt) > retention {
					continue // forgotten at the next eviction
				}
				if refused == nil || ap.DecidedAt.After(refused.DecidedAt) {
					refused = ap
				}
			}
		}
		if pending == nil && refused != nil {
			// The operator said no to this very call: the caller hears
			// that, and the note, rather than queueing it again (for as
			// long as the denial is kept, retention).
			return denied(refused)
		}
		if pending == nil {
			var err error
			if pending, err = s.addLocked(now, c, t, a, args, hash); err != nil {
				return err
			}
		}
		id, done = pending.ID, pending.done
		return nil
	})
	if err != nil || used {
		return err
	}

	if wait := min(dispatch.ApprovalWait(ctx), s.o.MaxWait); wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		var poll <-chan time.Time
		if s.o.Shared != nil { // decided on any node: look again and again
			tick := time.NewTicker(s.o.PollEvery)
			defer tick.Stop()
			poll, done = tick.C, nil
		}
		for {
			select {
			case <-done:
				return s.afterWait(ctx, id)
			case <-poll:
				if decided, err := s.decided(ctx, id); err != nil || decided {
					if err != nil {
						return err
					}
					return s.afterWait(ctx, id)
				}
				continue
			case <-timer.C:
			case <-ctx.Done():
			}
			break
		}
	}
	return &dispatch.ApprovalRequired{ID: id}
}

// decided reports whether approval id is no longer pending.
func (s *Service) decided(ctx context.Context, id string) (bool, error) {
	var st Status
	err := s.with(ctx, func(now time.Time) error {
		s.expireLocked(now)
		if ap := s.byID[id]; ap != nil {
			st = ap.Status
		}
		return nil
	})
	return st != Pending, err
}

// afterWait turns the decision a waiting caller saw into its answer.
func (s *Service) afterWait(ctx context.Context, id string) error {
	var answer error
	err := s.with(context.WithoutCancel(ctx), func(now time.Time) error {
		s.expireLocked(now)
		ap := s.byID[id]
		switch {
		case ap == nil:
			answer = fault.New(fault.Forbidden, "the approval expired")
		case ap.Status == Approved:
			ap.Status = Used
		case ap.Status == Denied:
			answer = denied(ap)
		case ap.Status == Expired:
			answer = fault.Errorf(fault.Forbidden, "approval %s expired without a decision", ap.ID)
		case ap.Status == Void:
			answer = voided(ap)
		default:
			answer = &dispatch.ApprovalRequired{ID: id}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return answer
}

// DeniedError is the cause of a refusal by an operator's decision (wrapped
// in a Forbidden fault): the edge names the approval, so a caller tells it
// from a refusal by role or policy.
type DeniedError struct {
	ID   string
	Note string
}

func (d *DeniedError) Error() string { return "approval " + d.ID + " denied" }

func voided(ap *Approval) error {
	return fault.Errorf(fault.Conflict, "approval %s is void: %s was redefined after it was asked for; call again to ask for a new one", ap.ID, ap.Tool)
}

func denied(ap *Approval) error {
	msg := fmt.Sprintf("an operator denied approval %s", ap.ID)
	if ap.Note != "" {
		msg += ": " + ap.Note
	}
	return &fault.Error{Kind: fault.Forbidden, Msg: msg, Err: &DeniedError{ID: ap.ID, Note: ap.Note}}
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
		Risk: a.Risk.String(), Rules: a.Rules, Reasons: a.Reasons, ArgsHash: hash, Digest: a.Digest, Steps: a.Plan,
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

// Void ends every pending and granted approval of the named tools (a
// custom tool was redefined or deleted, or one it calls was): what the
// operator was or would be shown is no longer what would run. A caller
// waiting for one of them is answered at once. It returns how many it
// voided.
func (s *Service) Void(tools ...string) (int, error) {
	n := 0
	err := s.withTimeout(func(now time.Time) error {
		s.expireLocked(now)
		for _, ap := range s.byID {
			if (ap.Status != Pending && ap.Status != Approved) || !slices.Contains(tools, ap.Tool) {
				continue
			}
			if ap.Status == Pending {
				close(ap.done)
			}
			ap.Status = Void
			n++
		}
		return nil
	})
	return n, err
}

// Decide approves or denies a pending approval.
func (s *Service) Decide(by auth.Caller, id string, approve bool, note string) (Approval, error) {
	if len(note) > 512 {
		note = note[:512]
	}
	var out Approval
	err := s.withTimeout(func(now time.Time) error {
		s.expireLocked(now)
		ap := s.byID[id]
		if ap == nil {
			return fault.New(fault.NotFound, "approval not found")
		}
		if ap.Status != Pending {
			out = ap.copy()
			if ap.Status == Void {
				return voided(ap)
			}
			return fault.Errorf(fault.Conflict, "approval %s is already %s", id, ap.Status)
		}
		ap.DecidedBy, ap.DecidedAt, ap.Note = by.KeyID, now.UTC(), note
		if approve {
			ap.Status = Approved
			ap.ExpiresAt = now.Add(s.o.GrantTTL).UTC()
		} else {
			ap.Status = Denied
		}
		close(ap.done)
		out = ap.copy()
		return nil
	})
	return out, err
}

// Get returns one approval: admins see every approval, other keys their
// own (for polling); anything else is not found.
func (s *Service) Get(c auth.Caller, id string) (Approval, error) {
	var out Approval
	err := s.withTimeout(func(now time.Time) error {
		s.expireLocked(now)
		ap := s.byID[id]
		if ap == nil || (!c.IsAdmin() && ap.Actor != c.KeyID) {
			return fault.New(fault.NotFound, "approval not found")
		}
		out = ap.copy()
		return nil
	})
	return out, err
}

// List returns approvals, newest first, optionally of one status. With a
// shared store that does not answer it returns none (and logs nothing:
// the operator's next call reports the store's failure).
func (s *Service) List(status Status) []Approval {
	out := []Approval{}
	_ = s.withTimeout(func(now time.Time) error {
		s.expireLocked(now)
		for _, ap := range s.byID {
			if status == "" || ap.Status == status {
				out = append(out, ap.copy())
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out
}

func (ap *Approval) copy() Approval {
	c := *ap
	c.done = nil
	return c
}
