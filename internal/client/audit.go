package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sandhold/sandhold/internal/audit"
)

// AuditRecord is one record of the server's audit log, as the server
// stores and serves it.
type AuditRecord = audit.Record

// AuditFilter selects records (GET /v1/audit).
type AuditFilter struct {
	Since   string
	After   int64
	Actor   string
	Action  string
	Sandbox string
	Limit   int
	// Newest asks for the newest records first.
	Newest bool
}

// Audit queries the audit log (agents see only their own records).
func (c *Client) Audit(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("since", f.Since)
	set("actor", f.Actor)
	set("action", f.Action)
	set("sandbox", f.Sandbox)
	if f.After > 0 {
		q.Set("after", strconv.FormatInt(f.After, 10))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Newest {
		q.Set("order", "desc")
	}
	var page struct {
		Records []AuditRecord `json:"records"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/audit", q, nil, &page)
	return page.Records, err
}

// AuditVerification is the chain's state as the server verified it.
type AuditVerification audit.Result

// AuditVerify asks the server to verify its hash chain (admin, viewer).
func (c *Client) AuditVerify(ctx context.Context) (AuditVerification, error) {
	var v AuditVerification
	err := c.call(ctx, http.MethodGet, "/v1/audit/verify", nil, nil, &v)
	return v, err
}

// AuditJSON renders a record as one JSON line whose every character is
// printable (audit.JSONLine): the strings exactly as the server stored
// them, with JSON's lossless escaping.
func AuditJSON(r AuditRecord) (string, error) { return audit.JSONLine(r) }

// Escape shows s for a person: backslashes doubled and every character
// audit.Visible escapes written as an escape (audit.Escape), so an escape
// and the characters a user typed never look alike on the terminal. Text
// from the server (audit records, error messages) cannot drive it.
func Escape(s string) string { return audit.Escape(s) }
