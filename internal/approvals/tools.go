package approvals

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tool names.
const (
	ToolList    = "approvals.list"
	ToolGet     = "approvals.get"
	ToolApprove = "approvals.approve"
	ToolDeny    = "approvals.deny"
)

// IDArgs name an approval; Note goes with a decision.
type IDArgs struct {
	ID   string `json:"id"`
	Note string `json:"note,omitempty"`
}

// ListArgs filter approvals.list.
type ListArgs struct {
	Status Status `json:"status,omitempty"`
}

func decode[T any](raw json.RawMessage) (any, error) {
	var v T
	if len(raw) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fault.InvalidField("arguments", "arguments do not match the tool's schema")
	}
	return v, nil
}

// RegisterTools adds the approval tools: list and decide (admin only), get
// (every role; non-admins see their own, for polling). All Safe: an
// operator decides while halted too.
func RegisterTools(d *dispatch.Dispatcher, s *Service) {
	admin := []auth.Role{auth.RoleAdmin}
	idSchema := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"note":{"type":"string","maxLength":512}},"required":["id"]}`)
	d.MustRegister(dispatch.Tool{
		Name: ToolList, Description: "List approvals (pending first to decide)", Risk: guard.Safe, Roles: admin,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"status":{"type":"string","enum":["pending","approved","denied","expired","used"]}}}`),
		Decode:      decode[ListArgs],
		Run: func(_ context.Context, _ auth.Caller, args any) (any, error) {
			st := args.(ListArgs).Status
			switch st {
			case "", Pending, Approved, Denied, Expired, Used:
			default:
				return nil, fault.InvalidField("status", fmt.Sprintf("unknown status %q", st))
			}
			return s.List(st), nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolGet, Description: "Read one approval (agents: their own)", Risk: guard.Safe,
		Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}, InputSchema: idSchema, Decode: decode[IDArgs],
		Describe: func(args any) dispatch.Target { return dispatch.Target{Target: args.(IDArgs).ID} },
		Run: func(_ context.Context, c auth.Caller, args any) (any, error) {
			return s.Get(c, args.(IDArgs).ID)
		},
	})
	for _, v := range []struct {
		name, desc string
		approve    bool
	}{{ToolApprove, "Approve a pending call: the identical call then runs once", true}, {ToolDeny, "Deny a pending call", false}} {
		d.MustRegister(dispatch.Tool{
			Name: v.name, Description: v.desc, Risk: guard.Safe, Roles: admin, InputSchema: idSchema, Decode: decode[IDArgs],
			Describe: func(args any) dispatch.Target { return dispatch.Target{Target: args.(IDArgs).ID} },
			Summarize: func(_, res any) map[string]any {
				ap := res.(Approval)
				return map[string]any{"actor": ap.Actor, "tool": ap.Tool, "status": string(ap.Status), "call": ap.Target}
			},
			Run: func(_ context.Context, c auth.Caller, args any) (any, error) {
				a := args.(IDArgs)
				return s.Decide(c, a.ID, v.approve, a.Note)
			},
		})
	}
}
