package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// TestHaltIsDenyByDefault: while halted only the exempt list runs, and only
// Safe calls of it. Before, a Safe tool without one of the halted
// categories (convert, observe, hooks, proxy) ran during a HALT.
func TestHaltIsDenyByDefault(t *testing.T) {
	admin := auth.Caller{KeyID: "k-admin", Role: auth.RoleAdmin}
	cases := []struct {
		name   string
		tool   Tool
		caller auth.Caller
		runs   bool
	}{
		{name: "safe tool without a category", tool: Tool{Name: "util.convert_to_markdown", Risk: guard.Safe}, caller: agent},
		{name: "safe read of a sandbox's hooks", tool: Tool{Name: "sandbox.hooks.list", Risk: guard.Safe}, caller: agent},
		{name: "safe command tool", tool: Tool{Name: "exec.run", Risk: guard.Safe, Category: ratelimit.Exec}, caller: agent},
		{name: "custom tool", tool: Tool{Name: "my.tool", Risk: guard.Safe}, caller: agent},
		{name: "admin is refused too", tool: Tool{Name: "sandbox.create", Risk: guard.Medium}, caller: admin},
		{name: "exempt: control.get", tool: Tool{Name: "control.get", Risk: guard.Safe}, caller: agent, runs: true},
		{name: "exempt: unhalt", tool: Tool{Name: "control.unhalt", Risk: guard.Safe}, caller: admin, runs: true},
		{name: "exempt: sandbox.list", tool: Tool{Name: "sandbox.list", Risk: guard.Safe}, caller: agent, runs: true},
		{name: "exempt name but not safe", tool: Tool{Name: "policy.set", Risk: guard.Medium}, caller: admin},
		{name: "exempt name assessed above safe", tool: Tool{Name: "keys.revoke", Risk: guard.Safe,
			Assess: func(any) Assessment { return Assessment{Risk: guard.Dangerous} }}, caller: admin},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			au := &memAudit{}
			d := New(Options{Audit: au, Halt: &halt{on: true}})
			ran := 0
			tc.tool.Run = func(context.Context, auth.Caller, any) (any, error) { ran++; return nil, nil }
			tc.tool.Roles = []auth.Role{auth.RoleAdmin, auth.RoleAgent}
			d.MustRegister(tc.tool)
			_, err := d.Dispatch(context.Background(), tc.caller, tc.tool.Name, nil)
			if tc.runs {
				if err != nil || ran != 1 {
					t.Fatalf("exempt tool refused while halted: %v (ran %d)", err, ran)
				}
				return
			}
			if fault.KindOf(err) != fault.Conflict || ran != 0 {
				t.Fatalf("ran while halted: err %v, ran %d", err, ran)
			}
			if e := au.last(); e.Verdict != "denied" || e.Detail["reason"] != "halted" {
				t.Fatalf("refusal not audited as halted: %+v", e)
			}
		})
	}
}

// TestHaltExemptListIsSmall guards the list's shape: every entry has a
// reason, and nothing that acts in a sandbox is on it.
func TestHaltExemptListIsSmall(t *testing.T) {
	for name, why := range HaltExempt() {
		if why == "" {
			t.Errorf("%s: no reason", name)
		}
		for _, p := range []string{"file.", "shell.", "bash.", "code.", "browser.", "exec.run", "sandbox.create", "sandbox.start", "tools."} {
			if len(name) >= len(p) && name[:len(p)] == p {
				t.Errorf("%s is exempt from HALT but acts in a sandbox", name)
			}
		}
	}
}

// TestWithinCarriesTheCall: a tool's run can dispatch an act of its own for
// its caller (Ref.CallWithin), which passes every step — here HALT after the
// outer call began; outside a run the act is refused.
func TestWithinCarriesTheCall(t *testing.T) {
	au := &memAudit{}
	h := &halt{}
	d := New(Options{Audit: au, Halt: h})
	refused := fault.New(fault.Conflict, "outside a call")
	d.MustRegister(Tool{Name: "sandbox.start", Risk: guard.Medium, Run: func(_ context.Context, c auth.Caller, _ any) (any, error) {
		return c.KeyID, nil
	}})
	d.MustRegister(Tool{Name: "exec.outer", Risk: guard.Safe, Run: func(ctx context.Context, _ auth.Caller, _ any) (any, error) {
		h.on = true // the operator halts while the outer call runs
		return Ref[any, string]("sandbox.start").CallWithin(ctx, nil, refused)
	}})
	_, err := d.Dispatch(context.Background(), agent, "exec.outer", nil)
	if fault.KindOf(err) != fault.Conflict {
		t.Fatalf("nested act ran while halted: %v", err)
	}
	e := au.entries[0]
	if e.Action != "sandbox.start" || e.Actor != agent.KeyID || e.Detail["reason"] != "halted" {
		t.Fatalf("nested act's record: %+v", e)
	}
	h.on = false
	d.MustRegister(Tool{Name: "exec.calm", Risk: guard.Safe, Run: func(ctx context.Context, _ auth.Caller, _ any) (any, error) {
		return Ref[any, string]("sandbox.start").CallWithin(ctx, nil, refused)
	}})
	got, err := d.Dispatch(context.Background(), agent, "exec.calm", nil)
	if err != nil || got != agent.KeyID {
		t.Fatalf("nested act: %v %v, want it run for the outer call's caller", got, err)
	}
	if e := au.entries[len(au.entries)-2]; e.Action != "sandbox.start" || e.Verdict != "allowed" || e.Detail["depth"] != 1 {
		t.Fatalf("nested act's record: %+v", e)
	}
	if _, err := Ref[any, string]("sandbox.start").CallWithin(context.Background(), nil, refused); !errors.Is(err, refused) {
		t.Fatalf("outside a call: %v", err)
	}
}

// TestUndecodableCallsAreRefusedInOrder: a call (MCP, /v1/tools/call)
// whose arguments do not decode was answered before any step, without
// an audit record. It now meets HALT and the role first, and is recorded.
func TestUndecodableCallsAreRefusedInOrder(t *testing.T) {
	type args struct {
		Path string `json:"path" required:"true"`
	}
	tool := Define("file.read", Spec{Risk: guard.Safe, Category: ratelimit.File},
		func(context.Context, auth.Caller, args) (string, error) { return "ran", nil },
		Hooks[args, string]{Describe: func(a args) Target { return Target{Target: a.Path} }})
	for _, tc := range []struct {
		name   string
		halted bool
		caller auth.Caller
		kind   fault.Kind
		reason string
	}{
		{"halted", true, agent, fault.Conflict, "halted"},
		{"viewer", false, viewer, fault.Forbidden, "role"},
		{"invalid", false, agent, fault.Invalid, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			au := &memAudit{}
			d := New(Options{Audit: au, Halt: &halt{on: tc.halted}})
			d.MustRegister(tool)
			_, err := d.Call(context.Background(), tc.caller, "file.read", json.RawMessage(`{"nope":1}`))
			if fault.KindOf(err) != tc.kind {
				t.Fatalf("err %v, want %s", err, tc.kind)
			}
			if len(au.entries) != 1 || au.last().Detail["reason"] != tc.reason {
				t.Fatalf("records %+v, want one with reason %s", au.entries, tc.reason)
			}
		})
	}
}
