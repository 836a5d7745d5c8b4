package audit

import (
	"context"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// Filter selects records for Query. Zero fields do not filter.
type Filter struct {
	Since    time.Time
	AfterSeq int64
	Actor    string
	// Action matches exactly or as a dotted prefix: "auth" matches every
	// auth.* action.
	Action string
	// Except leaves out these exact actions.
	Except     []string
	Sandbox    string
	Limit      int // capped at store.MaxAuditPage
	Descending bool
}

// categories are the action filters that span several action prefixes:
// an operator asking for "exec" wants every way code ran, whatever route
// or tool started it.
var categories = map[string][]string{
	"auth":    {"auth", "authz"},
	"exec":    {"exec", "shell", "bash", "code", "jupyter"},
	"file":    {"file", "artifact"},
	"network": {"network"},
}

// Query returns matching records. Action matches exactly, as a dotted
// prefix, or as one of the categories above. Posted records still waiting
// for a commit are committed first (Flush): a reader sees the outcome of
// every call answered before it asked.
func (l *Log) Query(ctx context.Context, f Filter) ([]Record, error) {
	l.Flush()
	sf := store.AuditFilter{
		Since: f.Since, AfterSeq: f.AfterSeq, Actor: f.Actor, Action: f.Action,
		Sandbox: f.Sandbox, Limit: f.Limit, Descending: f.Descending, Except: f.Except,
	}
	if more, ok := categories[f.Action]; ok {
		sf.Action, sf.Actions = "", more
	}
	recs, err := l.st.QueryAudit(ctx, sf)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(recs))
	for _, r := range recs {
		out = append(out, fromStore(r))
	}
	return out, nil
}
