// Package audittools declares the audit log's tools (audit.query,
// audit.verify) for the dispatcher. They live above both packages, not in
// audit, because the dispatcher itself writes to the audit log: package
// audit cannot import dispatch.
package audittools

import (
	"context"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// The audit log's tools.
var (
	ToolQuery  = dispatch.Ref[audit.QueryArgs, []audit.Record]("audit.query")
	ToolVerify = dispatch.Ref[struct{}, audit.Result]("audit.verify")
)

// Tools are audit.query (every role; agents see only their own records)
// and audit.verify (admin, viewer; one verification at a time, since it
// reads the whole log).
func Tools(l *audit.Log) []dispatch.Tool {
	var verifyMu sync.Mutex
	return []dispatch.Tool{
		dispatch.Define(ToolQuery, dispatch.Spec{Description: "Query audit records (agents see only their own)", Risk: guard.Safe,
			Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}},
			func(ctx context.Context, c auth.Caller, a audit.QueryArgs) ([]audit.Record, error) {
				f, err := a.Filter(time.Now())
				if err != nil {
					return nil, err
				}
				if c.Role == auth.RoleAgent {
					// Agents see only their own records, whatever they asked for.
					if f.Actor != "" && f.Actor != c.KeyID {
						return nil, fault.New(fault.Forbidden, "agents may read only their own audit records")
					}
					f.Actor = c.KeyID
				}
				recs, err := l.Query(ctx, f)
				if err != nil {
					return nil, fault.Wrap(fault.Internal, err, "could not read the audit log")
				}
				if recs == nil {
					recs = []audit.Record{}
				}
				// The stored strings, exactly: JSON's escaping is
				// lossless. Renderers for people escape them
				// (audit.Escape, audit.JSONLine, the console).
				return recs, nil
			},
			dispatch.Hooks[audit.QueryArgs, []audit.Record]{}),
		dispatch.Define(ToolVerify, dispatch.Spec{Description: "Verify the audit hash chain", Risk: guard.Safe,
			Roles: []auth.Role{auth.RoleAdmin, auth.RoleViewer}},
			func(ctx context.Context, _ auth.Caller, _ struct{}) (audit.Result, error) {
				if !verifyMu.TryLock() {
					return audit.Result{}, fault.WithRetryAfter(fault.RateLimited, 1, "a verification is already running")
				}
				defer verifyMu.Unlock()
				res, err := l.Verify(ctx)
				if err != nil {
					return audit.Result{}, fault.Wrap(fault.Internal, err, "could not verify the audit log")
				}
				return res, nil
			},
			dispatch.Hooks[struct{}, audit.Result]{}),
	}
}
