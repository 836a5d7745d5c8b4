package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
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

// maxSinceBack bounds a relative since so that parse results stay sane.
const maxSinceBack = 10 * 365 * 24 * time.Hour

func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(v, "-"))
	if err != nil || d < 0 || d > maxSinceBack {
		return time.Time{}, fault.InvalidField("query.since", "since must be an RFC 3339 time or a duration like 1h")
	}
	return now.Add(-d), nil
}

func (s *Server) listAudit(ctx context.Context, in *AuditInput) (*AuditOutput, error) {
	c, err := MustCaller(ctx)
	if err != nil {
		return nil, err
	}
	since, err := parseSince(in.Since, time.Now())
	if err != nil {
		return nil, err
	}
	f := audit.Filter{Since: since, AfterSeq: in.After, Actor: in.Actor, Action: in.Action,
		Sandbox: in.Sandbox, Limit: in.Limit, Descending: in.Order == "desc"}
	if c.Role == auth.RoleAgent {
		// Agents see only their own records, whatever they asked for.
		if f.Actor != "" && f.Actor != c.KeyID {
			return nil, s.auth.Require(ctx, c, "read other keys' audit records", auth.RoleAdmin, auth.RoleViewer)
		}
		f.Actor = c.KeyID
	}
	recs, err := s.audit.Query(ctx, f)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "could not read the audit log")
	}
	if recs == nil {
		recs = []audit.Record{}
	}
	return &AuditOutput{Body: OK(AuditPage{Records: recs, Count: len(recs)})}, nil
}

func (s *Server) verifyAudit(ctx context.Context, _ *struct{}) (*VerifyOutput, error) {
	c, err := MustCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.auth.Require(ctx, c, "verify the audit log", auth.RoleAdmin, auth.RoleViewer); err != nil {
		return nil, err
	}
	if !s.verifyMu.TryLock() {
		return nil, fault.WithRetryAfter(fault.RateLimited, 1, "a verification is already running")
	}
	defer s.verifyMu.Unlock()
	res, err := s.audit.Verify(ctx)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "could not verify the audit log")
	}
	out := &VerifyOutput{Body: OK(res)}
	if !res.OK {
		out.Body.Message = "audit chain is broken: " + res.Problem
	}
	return out, nil
}
