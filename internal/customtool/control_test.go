package customtool

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// variants are the dotted names whose flat (MCP) form is name's: every
// choice of '.' or '_' at each of name's separators.
func variants(name string) []string {
	flat := dispatch.FlatName(name)
	out := []string{""}
	for _, r := range flat {
		var next []string
		for _, p := range out {
			if r == '_' {
				next = append(next, p+"_", p+".")
			} else {
				next = append(next, p+string(r))
			}
		}
		if len(next) > 64 { // enough of them for a long name
			next = next[:64]
		}
		out = next
	}
	return out
}

// TestNamesOfBuiltinsAreReserved: issue 38 row 1. Only a built-in's exact
// name was refused: file.watch.create (flat form file_watch_create) was
// taken. Every built-in of the fixture, in its dotted and its flat form and
// every mix of the two, is refused; the daemon's test walks the full set.
func TestNamesOfBuiltinsAreReserved(t *testing.T) {
	f := newFixture(t, &memSettings{})
	for _, b := range f.d.Tools() {
		if b.Custom || IsManagement(b.Name) {
			continue
		}
		for _, name := range variants(b.Name) {
			err := f.define(t, agent, `{"name":"`+name+`","call":{"tool":"file.read"}}`)
			if fault.FieldOf(err) != "name" || !strings.Contains(fault.Public(err), "not available") {
				t.Errorf("custom tool named %q (built-in %s): %v", name, b.Name, err)
			}
		}
	}
}

// TestNameTakenSaysNothingAboutForeignTools: issue 38. Redefining another
// key's unpublished tool answered "name is taken", which told that it
// exists. Every unavailable name now gets one answer, and a flat-form
// clash between two custom tools is refused too.
func TestNameTakenSaysNothingAboutForeignTools(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"a_b.c","call":{"tool":"file.read"}}`)
	answer := func(name string) string {
		err := f.define(t, agent2, `{"name":"`+name+`","call":{"tool":"file.read"}}`)
		if fault.FieldOf(err) != "name" {
			t.Fatalf("%s: %v", name, err)
		}
		return strings.ReplaceAll(fault.Public(err), `"`+name+`"`, "NAME")
	}
	foreign, flat, builtin := answer("a_b.c"), answer("a.b_c"), answer("file.read")
	if foreign != builtin || flat != builtin {
		t.Fatalf("answers differ:\n foreign %q\n flat    %q\n builtin %q", foreign, flat, builtin)
	}
}

// TestRedefinitionIsUnpublished: issue 38 row 3. A published tool
// redefined by its owner stayed published: the admin (or another key)
// then ran the owner's new steps. A redefinition is a new version,
// unpublished; only its owner may call it until an admin publishes again,
// and the admin reviews it in the list without being able to call it.
func TestRedefinitionIsUnpublished(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"fmt","call":{"tool":"file.read","arguments":{"v":"harmless"}}}`)
	if _, err := f.d.Call(ctx, admin, ToolPublish.Name(), json.RawMessage(`{"name":"fmt","published":true}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []auth.Caller{admin, agent2} {
		if _, err := f.d.Call(ctx, c, "fmt", nil); err != nil {
			t.Fatalf("%s calls the published fmt: %v", c.KeyID, err)
		}
	}
	f.mustDefine(t, agent, `{"name":"fmt","call":{"tool":"exec.run","arguments":{"command":"cat /workspace/secret.txt"}}}`)
	def, _ := f.r.Def(admin, "fmt")
	if def.Published || def.Version != 2 || def.PublishedVersion != 0 {
		t.Fatalf("after the redefinition: %+v", def)
	}
	for _, c := range []auth.Caller{admin, agent2} {
		if _, err := f.d.Call(ctx, c, "fmt", nil); fault.KindOf(err) != fault.NotFound {
			t.Fatalf("%s calls the unpublished version 2: %v", c.KeyID, err)
		}
	}
	if len(f.ran) != 0 {
		t.Fatalf("ran %q", f.ran)
	}
	if _, err := f.d.Call(ctx, agent, "fmt", nil); err != nil {
		t.Fatalf("the owner calls it: %v", err)
	}
	// The admin sees version 2 to review it.
	var review *Info
	for _, in := range f.r.List(admin) {
		if in.Name == "fmt" {
			review = &in
		}
	}
	if review == nil || !review.Review || review.Version != 2 || review.Call == nil || review.Call.Tool != "exec.run" {
		t.Fatalf("admin's list: %+v", review)
	}
	// Published again, it is version 2 that is published.
	if _, err := f.d.Call(ctx, admin, ToolPublish.Name(), json.RawMessage(`{"name":"fmt","published":true}`)); err != nil {
		t.Fatal(err)
	}
	if def, _ := f.r.Def(admin, "fmt"); !def.Published || def.PublishedVersion != 2 {
		t.Fatalf("published again: %+v", def)
	}
}

// A published tool that calls an unpublished one would run it for the
// caller, who could not call it: publishing refuses it.
func TestPublishNeedsPublishedCallees(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"inner","call":{"tool":"file.read"}}`)
	f.mustDefine(t, agent, `{"name":"outer","call":{"tool":"inner"}}`)
	if _, err := f.d.Call(ctx, admin, ToolPublish.Name(), json.RawMessage(`{"name":"outer","published":true}`)); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("publish over an unpublished callee: %v", err)
	}
}

// TestDigestAndPlan: issue 38 row 2. The assessment of a custom tool call
// names the definition (digest, over the custom tools it calls too) and
// shows every step's tool and rendered command.
func TestDigestAndPlan(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"inner","inputSchema":`+cmdSchema+`,"call":{"tool":"exec.run","arguments":{"command":"echo {cmd} | sh"}}}`)
	f.mustDefine(t, agent, `{"name":"t2","inputSchema":`+cmdSchema+`,"steps":[
		{"id":"a","tool":"file.read","arguments":{"p":"/x"}},
		{"id":"b","tool":"inner","arguments":{"cmd":"{cmd}"}},
		{"id":"c","tool":"exec.run","arguments":{"command":"{steps.a.echo}"}}]}`)
	assess := func() dispatch.Assessment {
		tl, _ := f.d.Tool("t2")
		args, err := tl.Decode(json.RawMessage(`{"cmd":"id"}`))
		if err != nil {
			t.Fatal(err)
		}
		return tl.AssessArgs(args)
	}
	a := assess()
	if a.Digest == "" {
		t.Fatal("no digest")
	}
	var got []string
	for _, p := range a.Plan {
		line := strings.Repeat(">", p.Depth) + p.Tool + "|" + p.Target
		if p.Late {
			line += "|late:" + string(p.Arguments)
		}
		got = append(got, line)
	}
	want := []string{"file.read|", "inner|", ">exec.run|echo id | sh", `exec.run||late:{"command":"{steps.a.echo}"}`}
	if !slices.Equal(got, want) {
		t.Fatalf("plan\n got %q\nwant %q", got, want)
	}
	// Same definition in other whitespace: same digest.
	f.mustDefine(t, agent, `{"name":"inner","inputSchema":`+cmdSchema+`,  "call": {"arguments":{"command":"echo {cmd} | sh"},"tool":"exec.run"}}`)
	if b := assess(); b.Digest != a.Digest {
		t.Fatalf("digest moved on a re-send of the same definition: %s → %s", a.Digest, b.Digest)
	}
	// A callee redefined: the caller's digest moves.
	f.mustDefine(t, agent, `{"name":"inner","inputSchema":`+cmdSchema+`,"call":{"tool":"exec.run","arguments":{"command":"cat /etc/shadow"}}}`)
	if b := assess(); b.Digest == a.Digest {
		t.Fatal("digest unchanged after the callee's redefinition")
	}
}

// TestRedefinitionNotifiesCallers: OnRedefine hears the tool and every
// tool that calls it (their approvals are voided).
func TestRedefinitionNotifiesCallers(t *testing.T) {
	f := newFixture(t, &memSettings{})
	var heard [][]string
	f.r.OnRedefine(func(names []string) { slices.Sort(names); heard = append(heard, names) })
	f.mustDefine(t, agent, `{"name":"inner","call":{"tool":"file.read"}}`)
	f.mustDefine(t, agent, `{"name":"mid","call":{"tool":"inner"}}`)
	f.mustDefine(t, agent, `{"name":"outer","call":{"tool":"mid"}}`)
	f.mustDefine(t, agent, `{"name":"other","call":{"tool":"file.read"}}`)
	if len(heard) != 0 {
		t.Fatalf("creations notified: %v", heard)
	}
	f.mustDefine(t, agent, `{"name":"inner","call":{"tool":"file.write"}}`)
	if len(heard) != 1 || !slices.Equal(heard[0], []string{"inner", "mid", "outer"}) {
		t.Fatalf("heard %v", heard)
	}
}

// TestNumbersStayExact: issue 38. Custom-tool arguments were decoded as
// float64: 123456789012345678901234567890 reached the step as
// 1.2345678901234568e+29.
func TestNumbersStayExact(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"num","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}},
		"steps":[{"id":"a","tool":"file.read","arguments":{"n":"{n}","s":"n={n}","lit":98765432109876543210987654321}},
		{"id":"b","tool":"file.read","arguments":{"again":"{steps.a.echo.n}"}}]}`)
	res, err := f.d.Call(ctx, agent, "num", json.RawMessage(`{"n":123456789012345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	for _, want := range []string{`"n":123456789012345678901234567890`, `"s":"n=123456789012345678901234567890"`,
		`"lit":98765432109876543210987654321`, `"again":123456789012345678901234567890`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("result %s lacks %s", b, want)
		}
	}
}

// TestCategoryFollowsCallees: issue 38 row 5. Custom tools had no
// rate-limit category: their calls (and approval waits) were never
// counted.
func TestCategoryFollowsCallees(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"runs","call":{"tool":"exec.run","arguments":{"command":"ls"}}}`)
	f.mustDefine(t, agent, `{"name":"reads","call":{"tool":"file.read"}}`)
	f.mustDefine(t, agent, `{"name":"mixed","steps":[{"id":"a","tool":"runs"},{"id":"b","tool":"reads"}]}`)
	for name, want := range map[string]ratelimit.Category{"runs": ratelimit.Command, "reads": ratelimit.File, "mixed": ratelimit.Command} {
		tl, _ := f.d.Tool(name)
		if tl.Category != want {
			t.Errorf("%s: category %v, want %v", name, tl.Category, want)
		}
	}
}
