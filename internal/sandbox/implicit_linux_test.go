package sandbox

import (
	"context"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// records is an audit log in memory.
type records struct {
	mu      sync.Mutex
	entries []audit.Entry
}

func (r *records) Append(_ context.Context, e audit.Entry) (audit.Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, e)
	return audit.Record{}, nil
}

func (r *records) actions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.entries {
		out = append(out, e.Action+":"+e.Verdict)
	}
	return out
}

type haltSwitch struct{ on bool }

func (h *haltSwitch) Halted() (bool, string) { return h.on, "test" }

type denyTools []string

func (d denyTools) Decide(_ context.Context, _ auth.Caller, t *dispatch.Tool, _ dispatch.Assessment, _ any) (dispatch.Decision, string) {
	for _, n := range d {
		if n == t.Name {
			return dispatch.Deny, "test policy"
		}
	}
	return dispatch.Allow, ""
}

// callOpts are what a test dispatcher is built with.
type callOpts struct {
	audit  *records
	halt   *haltSwitch
	policy dispatch.Policy
	// as is the caller (default: owner, an agent).
	as *auth.Caller
}

// inCall runs fn inside a dispatched call of owner's (the context a tool's
// run gets), on a dispatcher with the sandbox tools.
func inCall(t *testing.T, m *Manager, o callOpts, fn func(ctx context.Context) error) error {
	t.Helper()
	opts := dispatch.Options{Policy: o.policy}
	if o.audit != nil {
		opts.Audit = o.audit
	}
	if o.halt != nil {
		opts.Halt = o.halt
	}
	d := dispatch.New(opts)
	for _, tl := range Tools(m, guard.New(guard.Config{})) {
		d.MustRegister(tl)
	}
	d.MustRegister(dispatch.Tool{Name: "control.get", Risk: guard.Safe, Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}, // exempt from HALT: the outer call runs
		Run: func(ctx context.Context, _ auth.Caller, _ any) (any, error) { return nil, fn(ctx) }})
	c := auth.Caller{KeyID: owner.KeyID, Role: auth.RoleAgent}
	if o.as != nil {
		c = *o.as
	}
	_, err := d.Dispatch(context.Background(), c, "control.get", nil)
	return err
}

// callCtx is a context inside a dispatched call of owner's that lets every
// implicit act run.
func callCtx(t *testing.T, m *Manager) context.Context {
	t.Helper()
	var out context.Context
	if err := inCall(t, m, callOpts{}, func(ctx context.Context) error { out = ctx; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStoppedSandboxStartsOnlyByADispatchedCall: using a stopped sandbox
// starts it through sandbox.start, which HALT and the policy refuse and
// the audit records; outside a dispatched call nothing starts it. Before,
// ensure started it for whatever asked (a server started halted restarted
// a stopped sandbox on a convert call).
func TestStoppedSandboxStartsOnlyByADispatchedCall(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	s.shutdown()
	exec := func(ctx context.Context) error {
		_, err := s.Exec(ctx, ExecRequest{Command: "true"})
		return err
	}
	if err := exec(context.Background()); !fault.Is(err, fault.Conflict) || s.State() != Stopped {
		t.Fatalf("outside a call: %v, state %s", err, s.State())
	}
	for _, tc := range []struct {
		name string
		opts callOpts
		want fault.Kind
	}{
		{"halted", callOpts{halt: &haltSwitch{on: true}}, fault.Conflict},
		{"policy denies sandbox.start", callOpts{policy: denyTools{ToolStart.Name()}}, fault.Forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.audit = &records{}
			err := inCall(t, m, tc.opts, exec)
			if !fault.Is(err, tc.want) || s.State() != Stopped {
				t.Fatalf("err %v, state %s; want %s and still stopped", err, s.State(), tc.want)
			}
			if got := tc.opts.audit.actions(); len(got) == 0 || got[0] != ToolStart.Name()+":denied" {
				t.Fatalf("audit %v: want sandbox.start denied first", got)
			}
		})
	}
	au := &records{}
	if err := inCall(t, m, callOpts{audit: au}, exec); err != nil || s.State() != Running {
		t.Fatalf("allowed: %v, state %s", err, s.State())
	}
	if got := au.actions(); len(got) != 2 || got[0] != ToolStart.Name()+":allowed" {
		t.Fatalf("audit %v: want sandbox.start allowed, then the outer call", got)
	}
}

// TestDefaultSandboxIsADispatchedCall: the default sandbox is made by
// sandbox.create_default, which the policy can deny by name and HALT
// refuses; nothing makes one outside a call. Before, Resolve made it
// for any caller (a key whose policy denied sandbox.* got one).
func TestDefaultSandboxIsADispatchedCall(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	c := auth.Caller{KeyID: owner.KeyID, Role: auth.RoleAgent}
	resolve := func(ctx context.Context) error { _, err := m.Resolve(ctx, c, ""); return err }
	if err := resolve(context.Background()); !fault.Is(err, fault.NotFound) {
		t.Fatalf("outside a call: %v", err)
	}
	for _, tc := range []struct {
		name string
		opts callOpts
		want fault.Kind
	}{
		{"halted", callOpts{halt: &haltSwitch{on: true}}, fault.Conflict},
		{"policy denies it", callOpts{policy: denyTools{ToolCreateDefault.Name()}}, fault.Forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := inCall(t, m, tc.opts, resolve); !fault.Is(err, tc.want) {
				t.Fatalf("err %v, want %s", err, tc.want)
			}
		})
	}
	if n := len(m.List(owner)); n != 0 {
		t.Fatalf("%d sandboxes made by refused calls", n)
	}
	au := &records{}
	if err := inCall(t, m, callOpts{audit: au}, resolve); err != nil {
		t.Fatal(err)
	}
	if err := inCall(t, m, callOpts{audit: au}, resolve); err != nil {
		t.Fatal(err)
	}
	if n := len(m.List(owner)); n != 1 {
		t.Fatalf("%d sandboxes, want the one default", n)
	}
	if got := au.actions(); len(got) != 3 || got[0] != ToolCreateDefault.Name()+":allowed" {
		t.Fatalf("audit %v: one create_default, then the two outer calls", got)
	}
}
