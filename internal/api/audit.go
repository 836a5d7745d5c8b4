package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/dispatch/audittools"
)

// AuditInput is GET /v1/audit's filter.
type AuditInput struct {
	Since   string `query:"since" doc:"RFC 3339 time, or a duration back from now (1h)" example:"1h"`
	After   int64  `query:"after" minimum:"0" doc:"only records with seq greater than this"`
	Actor   string `query:"actor" maxLength:"64" doc:"key id"`
	Action  string `query:"action" maxLength:"64" doc:"exact action, or a dotted prefix (auth matches auth.*)"`
	Sandbox string `query:"sandbox" maxLength:"64"`
	Limit   int    `query:"limit" minimum:"0" maximum:"1000" doc:"at most this many (default and cap 1000)"`
	Order   string `query:"order" enum:"asc,desc" default:"asc"`
	Except  string `query:"except" maxLength:"1024" doc:"comma-separated exact actions to leave out (the console hides its own polling reads: sandbox.list,sandbox.resources,control.get)"`
}

// AuditPage is the answer of GET /v1/audit.
type AuditPage struct {
	Records []audit.Record `json:"records"`
	Count   int            `json:"count"`
}

// AuditOutput wraps AuditPage.
type AuditOutput struct {
	Body Envelope[AuditPage]
}

// VerifyOutput is GET /v1/audit/verify.
type VerifyOutput struct {
	Body Envelope[audit.Result]
}

func (s *Server) auditRoutes() {
	huma.Register(s.api, huma.Operation{
		OperationID: "list-audit", Method: http.MethodGet, Path: "/v1/audit", Tags: []string{"audit"},
		Summary: "Query audit records (agents see only their own)", Security: Security,
	}, s.listAudit)
	huma.Register(s.api, huma.Operation{
		OperationID: "verify-audit", Method: http.MethodGet, Path: "/v1/audit/verify", Tags: []string{"audit"},
		Summary: "Verify the audit hash chain (admin, viewer)", Security: Security,
	}, s.verifyAudit)
}

func (s *Server) listAudit(ctx context.Context, in *AuditInput) (*AuditOutput, error) {
	recs, err := call(ctx, s.disp, audittools.ToolQuery, audit.QueryArgs{Since: in.Since, After: in.After,
		Actor: in.Actor, Action: in.Action, Sandbox: in.Sandbox, Limit: in.Limit, Order: in.Order, Except: in.Except})
	if err != nil {
		return nil, err
	}
	return &AuditOutput{Body: OK(AuditPage{Records: recs, Count: len(recs)})}, nil
}

func (s *Server) verifyAudit(ctx context.Context, _ *struct{}) (*VerifyOutput, error) {
	r, err := call(ctx, s.disp, audittools.ToolVerify, struct{}{})
	if err != nil {
		return nil, err
	}
	out := &VerifyOutput{Body: OK(r)}
	if !r.OK {
		out.Body.Message = "audit chain is broken: " + r.Problem
	}
	return out, nil
}
