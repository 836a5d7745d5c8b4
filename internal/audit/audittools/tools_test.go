package audittools_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/audit/audittools"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/store"
)

// TestQueryRulesLiveInTheArgumentType: a bad since or limit is refused by
// audit.QueryArgs.Validate (field query.since / limit) for every caller,
// an agent reads only its own records, and verify answers a typed Result.
func TestQueryRulesLiveInTheArgumentType(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	lg := audit.New(st, dir)
	for _, actor := range []string{"key_a", "key_b"} {
		if _, err := lg.Append(ctx, audit.Entry{Actor: actor, Action: "file.read", Verdict: audit.Allow}); err != nil {
			t.Fatal(err)
		}
	}
	d := dispatch.New(dispatch.Options{})
	for _, tl := range audittools.Tools(lg) {
		d.MustRegister(tl)
	}
	admin := auth.Caller{KeyID: "key_admin", Role: auth.RoleAdmin}
	agent := auth.Caller{KeyID: "key_a", Role: auth.RoleAgent}

	for _, c := range []struct{ args, field string }{
		{`{"since":"yesterday"}`, "query.since"},
		{`{"limit":5000}`, "limit"},
		{`{"after":-1}`, "limit"},
	} {
		_, err := d.Call(ctx, admin, audit.ToolQuery, json.RawMessage(c.args))
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Kind != fault.Invalid || fe.Field != c.field {
			t.Errorf("%s: %v, want invalid %s", c.args, err, c.field)
		}
	}
	recs, err := dispatch.Invoke[[]audit.Record](ctx, d, agent, audit.ToolQuery, audit.QueryArgs{Since: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("the agent sees none of its records")
	}
	for _, r := range recs {
		if r.Actor != agent.KeyID {
			t.Fatalf("agent saw %s's record", r.Actor)
		}
	}
	if _, err := dispatch.Invoke[[]audit.Record](ctx, d, agent, audit.ToolQuery, audit.QueryArgs{Actor: "key_b"}); fault.KindOf(err) != fault.Forbidden {
		t.Fatalf("agent asking for another key's records: %v, want forbidden", err)
	}
	res, err := dispatch.Invoke[audit.Result](ctx, d, admin, audit.ToolVerify, struct{}{})
	if err != nil || !res.OK || res.Records < 2 {
		t.Fatalf("verify: %+v, %v", res, err)
	}
}
