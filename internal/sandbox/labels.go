package sandbox

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/speccheck"
)

// checkLabels validates a spec's labels and environment
// (speccheck.Labels) and what the end of its TTL does
// (speccheck.OnExpire).
func checkLabels(c Caller, spec Spec) error {
	if err := speccheck.Labels(spec.Labels, spec.Env, c.Admin); err != nil {
		return err
	}
	return speccheck.OnExpire(spec.OnExpire)
}

// What the end of a sandbox's TTL does (Spec.OnExpire).
const (
	ExpireDelete    = speccheck.ExpireDelete
	ExpireHibernate = speccheck.ExpireHibernate
)

// expireOne ends s, whose TTL is over: deleted, or — on_expire
// hibernate — hibernated (E2B's pause at the timeout). A hibernated one
// waits for a call to resume it; resumed without its TTL moved, it
// hibernates again here. A sandbox that cannot hibernate (no workspace
// image) is deleted, as its TTL said, and the failure logged. Both are the
// system's acts, audited as such (as every expiry is).
func (m *Manager) expireOne(s *Sandbox, ttl time.Duration) {
	ctx := context.Background()
	s.mu.Lock()
	hibernate := s.rec.Spec.OnExpire == ExpireHibernate
	s.mu.Unlock()
	if hibernate {
		if s.State() == Hibernated {
			return
		}
		_, err := m.Hibernate(ctx, Caller{Admin: true}, s.rec.ID)
		if err == nil {
			m.audit(ctx, Event{Actor: "system", Action: ToolHibernate.Name(), Sandbox: s.rec.ID, Verdict: "allowed", Detail: map[string]any{"reason": "ttl", "ttl": ttl.String()}})
			return
		}
		m.log.Warn("hibernate at the end of the TTL failed: deleting the sandbox", "id", s.rec.ID, "err", err)
	}
	if err := m.Delete(ctx, Caller{Admin: true}, s.rec.ID); err == nil {
		m.audit(ctx, Event{Actor: "system", Action: "sandbox.expire", Sandbox: s.rec.ID, Verdict: "allowed", Detail: map[string]any{"ttl": ttl.String()}})
	}
}

// Labels are the sandbox's labels (a copy).
func (s *Sandbox) Labels() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.rec.Spec.Labels)
}

// ttl is the sandbox's lifetime from its creation (0: none).
func (s *Sandbox) ttl() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.Spec.TTL
}

// SetTTL makes a sandbox end ttl after its creation (0: never). A TTL
// already past deletes it at the janitor's next round.
func (m *Manager) SetTTL(ctx context.Context, c Caller, id string, ttl time.Duration) (Info, error) {
	if ttl < 0 {
		return Info{}, fault.InvalidField("ttl", "ttl must not be negative")
	}
	s, err := m.Lookup(ctx, c, id)
	if err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	s.rec.Spec.TTL = ttl
	rec := s.rec
	s.mu.Unlock()
	if err := m.records.PutSandbox(ctx, rec); err != nil {
		return Info{}, fmt.Errorf("save sandbox: %w", err)
	}
	return s.Info(), nil
}
