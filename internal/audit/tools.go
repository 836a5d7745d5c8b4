package audit

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
)

// MaxQueryLimit is the most records one query returns (and the default).
const MaxQueryLimit = 1000

// maxSinceBack bounds a relative since so that parse results stay sane.
const maxSinceBack = 10 * 365 * 24 * time.Hour

// QueryArgs are audit.query's arguments: GET /v1/audit's query string and
// the JSON arguments of tools/call and MCP alike.
type QueryArgs struct {
	Since   string `json:"since,omitempty" doc:"RFC 3339 time, or a duration back from now (1h)"`
	After   int64  `json:"after,omitempty" minimum:"0" doc:"only records with seq greater than this"`
	Actor   string `json:"actor,omitempty" doc:"key id"`
	Action  string `json:"action,omitempty" doc:"exact action, or a dotted prefix (auth matches auth.*)"`
	Sandbox string `json:"sandbox,omitempty"`
	Limit   int    `json:"limit,omitempty" minimum:"0" maximum:"1000" doc:"at most this many (default and cap 1000)"`
	Order   string `json:"order,omitempty" enum:"asc,desc"`
	Except  string `json:"except,omitempty" maxLength:"1024" doc:"comma-separated exact actions to leave out (the console hides its own polling reads: sandbox.list,sandbox.resources,control.get)"`
}

// maxExcept bounds the actions one query leaves out.
const maxExcept = 32

// Validate checks since, limit and after: the one place these rules live.
func (a QueryArgs) Validate() error {
	if _, err := ParseSince(a.Since, time.Now()); err != nil {
		return err
	}
	if a.Limit < 0 || a.Limit > MaxQueryLimit || a.After < 0 {
		return fault.InvalidField("limit", "limit is 0 to 1000, after is not negative")
	}
	if len(a.except()) > maxExcept {
		return fault.InvalidField("except", fmt.Sprintf("at most %d actions", maxExcept))
	}
	return nil
}

// Filter is the query a valid QueryArgs asks for, relative to now.
func (a QueryArgs) Filter(now time.Time) (Filter, error) {
	since, err := ParseSince(a.Since, now)
	if err != nil {
		return Filter{}, err
	}
	return Filter{Since: since, AfterSeq: a.After, Actor: a.Actor, Action: a.Action, Sandbox: a.Sandbox,
		Limit: a.Limit, Descending: a.Order == "desc", Except: a.except()}, nil
}

// except is Except's actions, blanks dropped.
func (a QueryArgs) except() []string {
	var out []string
	for _, s := range strings.Split(a.Except, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ParseSince reads since: an RFC 3339 time, or a duration back from now
// ("1h", "-1h"). Empty means no bound.
func ParseSince(v string, now time.Time) (time.Time, error) {
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
