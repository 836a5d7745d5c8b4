// Package control holds the operator's emergency stop, HALT: while the
// server is halted the dispatcher refuses every tool that is not Safe (and
// every tool that runs code) at every nesting level, running executions are
// killed and sandboxes frozen. It implements dispatch.Halt.
//
// What it stops: an agent that keeps acting while the operator looks into
// it. The state is stored before anything is frozen, so a HALT survives a
// server restart (and a crash in the middle of halting); at start a halted
// server freezes whatever runs again. Only the admin-only control.halt and
// control.unhalt tools change it.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/store"
)

// SettingKey is where the state is stored.
const SettingKey = "control"

// maxReason caps the operator's reason (it is shown in every refusal).
const maxReason = 512

// State is the server's HALT state.
type State struct {
	Halted bool      `json:"halted"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty" doc:"key id of the admin who halted"`
	Since  time.Time `json:"since,omitzero"`
	// Frozen are the sandboxes this HALT froze; unhalt thaws them.
	Frozen []string `json:"frozen,omitempty"`
}

// Freezer is the sandbox manager's side of HALT (sandbox.Manager).
type Freezer interface {
	HaltFreeze(reason string) []string
	HaltThaw(ids []string) int
}

// Settings is the part of the store HALT uses.
type Settings interface {
	GetSetting(ctx context.Context, key string) ([]byte, error)
	PutSetting(ctx context.Context, key string, value []byte) error
}

// Control is the live HALT state. Safe for concurrent use.
type Control struct {
	st      Settings
	freezer Freezer
	now     func() time.Time

	// mu guards state and serialises halt and unhalt.
	mu    sync.Mutex
	state State
}

var _ dispatch.Halt = (*Control)(nil)

// Load reads the stored state. A halted server freezes what runs again
// (the sandboxes a previous run left are re-adopted frozen). A state that
// cannot be read fails the start: better no server than an unhalted one.
func Load(ctx context.Context, st Settings, f Freezer) (*Control, error) {
	c := &Control{st: st, freezer: f, now: time.Now}
	b, err := st.GetSetting(ctx, SettingKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return c, nil
	case err != nil:
		return nil, fmt.Errorf("read halt state: %w", err)
	}
	if err := json.Unmarshal(b, &c.state); err != nil {
		return nil, fmt.Errorf("stored halt state: %w", err)
	}
	if c.state.Halted && f != nil {
		c.state.Frozen = union(c.state.Frozen, f.HaltFreeze(c.state.Reason))
		if err := c.saveLocked(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Halted implements dispatch.Halt.
func (c *Control) Halted() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Halted, c.state.Reason
}

// State returns the current state.
func (c *Control) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state
	s.Frozen = slices.Clone(s.Frozen)
	return s
}

// Halt stops the server's work: it stores the state first, then kills and
// freezes. Halting a halted server updates the reason and freezes again
// (a sandbox started in between is frozen too).
func (c *Control) Halt(ctx context.Context, by, reason string) (State, error) {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	if reason == "" {
		reason = "no reason given"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.state
	c.state.Halted, c.state.Reason, c.state.By = true, reason, by
	if !prev.Halted {
		c.state.Since = c.now().UTC()
	}
	if err := c.saveLocked(ctx); err != nil {
		c.state = prev
		return prev, err
	}
	if c.freezer != nil {
		c.state.Frozen = union(c.state.Frozen, c.freezer.HaltFreeze(reason))
		if err := c.saveLocked(ctx); err != nil {
			return c.state, err
		}
	}
	return c.state, nil
}

// Unhalt lifts a HALT and thaws the sandboxes it froze.
func (c *Control) Unhalt(ctx context.Context) (State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.state
	if !prev.Halted {
		return prev, nil
	}
	c.state = State{}
	if err := c.saveLocked(ctx); err != nil {
		c.state = prev
		return prev, err
	}
	if c.freezer != nil {
		c.freezer.HaltThaw(prev.Frozen)
	}
	return c.state, nil
}

// Refresh applies the state another node stored (the nodes of a cluster
// share the setting): a HALT stored elsewhere freezes this node's sandboxes,
// an unhalt stored elsewhere thaws the ones this node froze. It writes
// nothing back, so nodes refreshing at once do not overwrite each other;
// Frozen stays this node's own list. A state that cannot be read is an
// error and changes nothing.
func (c *Control) Refresh(ctx context.Context) error {
	b, err := c.st.GetSetting(ctx, SettingKey)
	var stored State
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read halt state: %w", err)
	default:
		if err := json.Unmarshal(b, &stored); err != nil {
			return fmt.Errorf("stored halt state: %w", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.state
	switch {
	case stored.Halted:
		c.state.Halted, c.state.Reason, c.state.By, c.state.Since = true, stored.Reason, stored.By, stored.Since
		if !prev.Halted && c.freezer != nil {
			c.state.Frozen = union(c.state.Frozen, c.freezer.HaltFreeze(stored.Reason))
		}
	case prev.Halted:
		c.state = State{}
		if c.freezer != nil {
			c.freezer.HaltThaw(prev.Frozen)
		}
	}
	return nil
}

func (c *Control) saveLocked(ctx context.Context) error {
	b, err := json.Marshal(c.state)
	if err != nil {
		return fmt.Errorf("encode halt state: %w", err)
	}
	if err := c.st.PutSetting(context.WithoutCancel(ctx), SettingKey, b); err != nil {
		return fmt.Errorf("store halt state: %w", err)
	}
	return nil
}

// maxFrozen bounds the remembered ids (a sandbox per key, thousands at
// most; beyond that unhalt leaves the rest for their owners to resume).
const maxFrozen = 100_000

func union(a, b []string) []string {
	seen := make(map[string]bool, len(a)+len(b))
	out := make([]string, 0, len(a)+len(b))
	for _, id := range slices.Concat(a, b) {
		if !seen[id] && len(out) < maxFrozen {
			seen[id] = true
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
