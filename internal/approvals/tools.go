package approvals

import (
	"context"
	"fmt"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tool names.
var (
	ToolList    = dispatch.Ref[ListArgs, []Approval]("approvals.list")
	ToolGet     = dispatch.Ref[IDArgs, Approval]("approvals.get")
	ToolApprove = dispatch.Ref[IDArgs, Approval]("approvals.approve")
	ToolDeny    = dispatch.Ref[IDArgs, Approval]("approvals.deny")
)

// IDArgs name an approval; Note goes with a decision (Decide cuts it to
// 512 bytes).
type IDArgs struct {
	ID   string `json:"id" required:"true"`
	Note string `json:"note,omitempty" maxLength:"512" doc:"shown to the caller"`
}

// ListArgs filter approvals.list.
type ListArgs struct {
	Status Status `json:"status,omitempty" enum:"pending,approved,denied,expired,used,void" doc:"only approvals in this state"`
}

// Validate refuses a status that is none of the states.
func (a ListArgs) Validate() error {
	switch a.Status {
	case "", Pending, Approved, Denied, Expired, Used:
		return nil
	}
	return fault.InvalidField("status", fmt.Sprintf("unknown status %q", a.Status))
}

// Tools are the approval tools: list and decide (admin only), get (every
// role; non-admins see their own, for polling). All Safe: an operator
// decides while halted too.
func Tools(s *Service) []dispatch.Tool {
	admin := []auth.Role{auth.RoleAdmin}
	target := func(a IDArgs) dispatch.Target { return dispatch.Target{Target: a.ID} }
	tools := []dispatch.Tool{
		dispatch.Define(ToolList, dispatch.Spec{Description: "List approvals (pending first to decide)", Risk: guard.Safe, Roles: admin},
			func(_ context.Context, _ auth.Caller, a ListArgs) ([]Approval, error) { return s.List(a.Status), nil },
			dispatch.Hooks[ListArgs, []Approval]{}),
		dispatch.Define(ToolGet, dispatch.Spec{Description: "Read one approval (agents: their own)", Risk: guard.Safe,
			Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}},
			func(_ context.Context, c auth.Caller, a IDArgs) (Approval, error) { return s.Get(c, a.ID) },
			dispatch.Hooks[IDArgs, Approval]{Describe: target}),
	}
	for _, v := range []struct {
		name    dispatch.Ref[IDArgs, Approval]
		desc    string
		approve bool
	}{{ToolApprove, "Approve a pending call: the identical call then runs once", true}, {ToolDeny, "Deny a pending call", false}} {
		tools = append(tools, dispatch.Define(v.name, dispatch.Spec{Description: v.desc, Risk: guard.Safe, Roles: admin},
			func(_ context.Context, c auth.Caller, a IDArgs) (Approval, error) {
				return s.Decide(c, a.ID, v.approve, a.Note)
			},
			dispatch.Hooks[IDArgs, Approval]{
				Describe: target,
				Summarize: func(_ IDArgs, ap Approval) map[string]any {
					return map[string]any{"actor": ap.Actor, "tool": ap.Tool, "status": string(ap.Status), "call": ap.Target}
				},
			}))
	}
	return tools
}
