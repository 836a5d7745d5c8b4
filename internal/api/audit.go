package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
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

// auditQueryArgs is audit.query's JSON argument shape (tools/call, MCP).
type auditQueryArgs struct {
	Since   string `json:"since"`
	After   int64  `json:"after"`
	Actor   string `json:"actor"`
	Action  string `json:"action"`
	Sandbox string `json:"sandbox"`
	Limit   int    `json:"limit"`
	Order   string `json:"order"`
}

func (s *Server) auditTools(d *dispatch.Dispatcher) {
	d.MustRegister(dispatch.Tool{
		Name: ToolAuditQuery, Description: "Query audit records (agents see only their own)", Risk: guard.Safe, Roles: allRoles,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"since":{"type":"string"},"after":{"type":"integer","minimum":0},"actor":{"type":"string"},"action":{"type":"string"},"sandbox":{"type":"string"},"limit":{"type":"integer","minimum":0,"maximum":1000},"order":{"type":"string","enum":["asc","desc"]}}}`),
		Decode: func(raw json.RawMessage) (any, error) {
			v, err := decodeArgs[auditQueryArgs](raw)
			if err != nil {
				return nil, err
			}
			a := v.(auditQueryArgs)
			since, err := parseSince(a.Since, time.Now())
			if err != nil {
				return nil, err
			}
			if a.Limit < 0 || a.Limit > 1000 || a.After < 0 {
				return nil, fault.InvalidField("limit", "limit is 0 to 1000, after is not negative")
			}
			return audit.Filter{Since: since, AfterSeq: a.After, Actor: a.Actor, Action: a.Action, Sandbox: a.Sandbox,
				Limit: a.Limit, Descending: a.Order == "desc"}, nil
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			f := args.(audit.Filter)
			if c.Role == auth.RoleAgent {
				// Agents see only their own records, whatever they asked for.
				if f.Actor != "" && f.Actor != c.KeyID {
					return nil, fault.New(fault.Forbidden, "agents may read only their own audit records")
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
			// Every rendering escapes control and bidi characters; the
			// stored bytes stay as they were (audit.Display).
			for i := range recs {
				recs[i] = recs[i].Display()
			}
			return recs, nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolAuditVerify, Description: "Verify the audit hash chain", Risk: guard.Safe,
		Roles: []auth.Role{auth.RoleAdmin, auth.RoleViewer},
		Run: func(ctx context.Context, _ auth.Caller, _ any) (any, error) {
			if !s.verifyMu.TryLock() {
				return nil, fault.WithRetryAfter(fault.RateLimited, 1, "a verification is already running")
			}
			defer s.verifyMu.Unlock()
			res, err := s.audit.Verify(ctx)
			if err != nil {
				return nil, fault.Wrap(fault.Internal, err, "could not verify the audit log")
			}
			return res, nil
		},
	})
}

func (s *Server) listAudit(ctx context.Context, in *AuditInput) (*AuditOutput, error) {
	since, err := parseSince(in.Since, time.Now())
	if err != nil {
		return nil, err
	}
	f := audit.Filter{Since: since, AfterSeq: in.After, Actor: in.Actor, Action: in.Action,
		Sandbox: in.Sandbox, Limit: in.Limit, Descending: in.Order == "desc"}
	res, err := s.call(ctx, ToolAuditQuery, f)
	if err != nil {
		return nil, err
	}
	recs := res.([]audit.Record)
	return &AuditOutput{Body: OK(AuditPage{Records: recs, Count: len(recs)})}, nil
}

func (s *Server) verifyAudit(ctx context.Context, _ *struct{}) (*VerifyOutput, error) {
	res, err := s.call(ctx, ToolAuditVerify, nil)
	if err != nil {
		return nil, err
	}
	r := res.(audit.Result)
	out := &VerifyOutput{Body: OK(r)}
	if !r.OK {
		out.Body.Message = "audit chain is broken: " + r.Problem
	}
	return out, nil
}
