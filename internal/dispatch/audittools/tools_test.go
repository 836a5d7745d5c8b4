package audittools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/dispatch/audittools"
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
		_, err := d.Call(ctx, admin, audittools.ToolQuery.Name(), json.RawMessage(c.args))
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Kind != fault.Invalid || fe.Field != c.field {
			t.Errorf("%s: %v, want invalid %s", c.args, err, c.field)
		}
	}
	recs, err := audittools.ToolQuery.Call(ctx, d, agent, audit.QueryArgs{Since: "1h"})
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
	if _, err := audittools.ToolQuery.Call(ctx, d, agent, audit.QueryArgs{Actor: "key_b"}); fault.KindOf(err) != fault.Forbidden {
		t.Fatalf("agent asking for another key's records: %v, want forbidden", err)
	}
	res, err := audittools.ToolVerify.Call(ctx, d, admin, struct{}{})
	if err != nil || !res.OK || res.Records < 2 {
		t.Fatalf("verify: %+v, %v", res, err)
	}
}

// Issue 29 row 9: audit.query (GET /v1/audit, MCP, tools/call) answers the
// stored strings exactly; in its JSON a tab is \t and a typed backslash-t
// is \\t, so a client tells `echo a<TAB>b` from `echo "a\tb"`.
func TestQueryAnswersTheExactStrings(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	lg := audit.New(st, dir)
	targets := []string{"echo a\tb", `echo "a\tb"`, "clear\x1b[2J \u202eevil"}
	for _, tg := range targets {
		if _, err := lg.Append(ctx, audit.Entry{Actor: "key_a", Action: "exec.run", Target: tg, Verdict: audit.Allow,
			Detail: map[string]any{"command": tg}}); err != nil {
			t.Fatal(err)
		}
	}
	d := dispatch.New(dispatch.Options{})
	for _, tl := range audittools.Tools(lg) {
		d.MustRegister(tl)
	}
	out, err := d.Call(ctx, auth.Caller{KeyID: "key_admin", Role: auth.RoleAdmin}, audittools.ToolQuery.Name(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var recs []audit.Record
	if err := json.Unmarshal(b, &recs); err != nil || len(recs) != len(targets) {
		t.Fatalf("answer %s: %v", b, err)
	}
	for i, r := range recs {
		if r.Target != targets[i] || r.Detail["command"] != targets[i] {
			t.Errorf("record %d: target %q, command %q; want exactly %q", r.Seq, r.Target, r.Detail["command"], targets[i])
		}
	}
	for _, want := range []string{`"target":"echo a\tb"`, `"target":"echo \"a\\tb\""`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("answer lacks %s: %s", want, b)
		}
	}
}
