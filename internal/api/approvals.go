package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/approvals"
	"github.com/sandhold/sandhold/internal/dispatch"
)

// ApprovalWaitHeader (or the query parameter approval_wait) is how many
// seconds a request that needs an operator's approval may wait for the
// decision before it answers 202; the server bounds it
// (approvals.DefaultMaxWait). On approval the call runs and answers as if
// no approval had been needed.
const ApprovalWaitHeader = "X-Approval-Wait"

// maxWaitParam bounds what is parsed; the approvals service bounds again.
const maxWaitParam = 3600

// withApprovalWait puts the requested wait in the request context.
func withApprovalWait(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(ApprovalWaitHeader)
		if v == "" {
			v = r.URL.Query().Get("approval_wait")
		}
		if v != "" {
			if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= maxWaitParam {
				r = r.WithContext(dispatch.WithApprovalWait(r.Context(), time.Duration(n)*time.Second))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// ApprovalListInput filters GET /v1/approvals.
type ApprovalListInput struct {
	Status string `query:"status" enum:"pending,approved,denied,expired,used,void" doc:"only approvals in this state"`
}

// ApprovalListOutput is GET /v1/approvals.
type ApprovalListOutput struct {
	Body Envelope[[]approvals.Approval]
}

// ApprovalIDInput names an approval.
type ApprovalIDInput struct {
	ID string `path:"id" maxLength:"64"`
}

// ApprovalDecideInput is POST /v1/approvals/{id}/approve|deny.
type ApprovalDecideInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body *struct {
		Note string `json:"note,omitempty" maxLength:"512" doc:"shown to the caller"`
	} `required:"false"`
}

// ApprovalOutput is one approval.
type ApprovalOutput struct {
	Body Envelope[approvals.Approval]
}

// ApprovalRoutes mounts /v1/approvals (list and decide: admin; get: the
// caller's own, or any for an admin). Every handler calls the dispatcher.
func (s *Server) ApprovalRoutes() {
	tag := []string{"approvals"}
	huma.Register(s.api, huma.Operation{OperationID: "list-approvals", Method: http.MethodGet, Path: "/v1/approvals", Tags: tag,
		Summary: "List approvals (admin)", Security: Security},
		func(ctx context.Context, in *ApprovalListInput) (*ApprovalListOutput, error) {
			list, err := call(ctx, s.disp, approvals.ToolList, approvals.ListArgs{Status: approvals.Status(in.Status)})
			if err != nil {
				return nil, err
			}
			return &ApprovalListOutput{Body: OK(list)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "get-approval", Method: http.MethodGet, Path: "/v1/approvals/{id}", Tags: tag,
		Summary: "Read an approval (agents: their own, to poll for the decision)", Security: Security},
		func(ctx context.Context, in *ApprovalIDInput) (*ApprovalOutput, error) {
			ap, err := call(ctx, s.disp, approvals.ToolGet, approvals.IDArgs{ID: in.ID})
			if err != nil {
				return nil, err
			}
			return &ApprovalOutput{Body: OK(ap)}, nil
		})
	decide := func(op, path string, tool dispatch.Ref[approvals.IDArgs, approvals.Approval], msg string) {
		huma.Register(s.api, huma.Operation{OperationID: op, Method: http.MethodPost, Path: path, Tags: tag,
			Summary: msg + " (admin)", Security: Security, MaxBodyBytes: s.MaxBody()},
			func(ctx context.Context, in *ApprovalDecideInput) (*ApprovalOutput, error) {
				args := approvals.IDArgs{ID: in.ID}
				if in.Body != nil {
					args.Note = in.Body.Note
				}
				ap, err := call(ctx, s.disp, tool, args)
				if err != nil {
					return nil, err
				}
				return &ApprovalOutput{Body: OK(ap)}, nil
			})
	}
	decide("approve-approval", "/v1/approvals/{id}/approve", approvals.ToolApprove, "Approve a pending call; the identical call then runs once")
	decide("deny-approval", "/v1/approvals/{id}/deny", approvals.ToolDeny, "Deny a pending call")
}
