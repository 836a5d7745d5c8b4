package customtool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/store/storetest"
)

// memSettings is the in-memory settings table shared by unit tests.
type memSettings = storetest.Settings

var (
	admin  = auth.Caller{KeyID: "k-admin", Role: auth.RoleAdmin}
	agent  = auth.Caller{KeyID: "k-agent", Role: auth.RoleAgent}
	agent2 = auth.Caller{KeyID: "k-agent2", Role: auth.RoleAgent}
	ctx    = context.Background()
)

// recorder is a policy that allows everything and remembers each call's
// assessment, and a HALT switch.
type recorder struct {
	mu     sync.Mutex
	seen   map[string]dispatch.Assessment
	halted bool
}

func (r *recorder) Decide(_ context.Context, _ auth.Caller, t *dispatch.Tool, a dispatch.Assessment, _ any) (dispatch.Decision, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[t.Name] = a
	return dispatch.Allow, ""
}

func (r *recorder) Halted() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.halted, "test"
}

func (r *recorder) get(name string) dispatch.Assessment {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[name]
}

type execArgs struct {
	Command string `json:"command"`
}

type fixture struct {
	d    *dispatch.Dispatcher
	r    *Registry
	rec  *recorder
	st   *memSettings
	ran  []string // commands exec.run ran
	mu   sync.Mutex
	hook func(tool string) // called by every built-in before it returns
}

func builtins(f *fixture) {
	g := guard.New(guard.Config{})
	note := func(tool string) {
		if f.hook != nil {
			f.hook(tool)
		}
	}
	f.d.MustRegister(dispatch.Tool{Name: "exec.run", Risk: guard.Safe, Category: ratelimit.Exec,
		Decode: func(raw json.RawMessage) (any, error) {
			var a execArgs
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, fault.InvalidField("arguments", "bad")
			}
			return a, nil
		},
		Assess: func(args any) dispatch.Assessment {
			return dispatch.FromVerdict(g.Classify(args.(execArgs).Command))
		},
		Describe: func(args any) dispatch.Target { return dispatch.Target{Target: args.(execArgs).Command} },
		Run: func(_ context.Context, _ auth.Caller, args any) (any, error) {
			f.mu.Lock()
			f.ran = append(f.ran, args.(execArgs).Command)
			f.mu.Unlock()
			note("exec.run")
			return map[string]any{"stdout": "out:" + args.(execArgs).Command, "exit_code": 0}, nil
		}})
	f.d.MustRegister(dispatch.Tool{Name: "file.read", Risk: guard.Safe, Category: ratelimit.File,
		Run: func(_ context.Context, _ auth.Caller, args any) (any, error) {
			note("file.read")
			return map[string]any{"echo": args.(json.RawMessage)}, nil
		}})
	f.d.MustRegister(dispatch.Tool{Name: "file.write", Risk: guard.Medium,
		Run: func(context.Context, auth.Caller, any) (any, error) { note("file.write"); return "written", nil }})
	f.d.MustRegister(dispatch.Tool{Name: "keys.create", Risk: guard.Medium, Roles: []auth.Role{auth.RoleAdmin},
		Run: func(context.Context, auth.Caller, any) (any, error) { return nil, nil }})
}

func newFixture(t *testing.T, st *memSettings) *fixture {
	t.Helper()
	rec := &recorder{seen: map[string]dispatch.Assessment{}}
	f := &fixture{d: dispatch.New(dispatch.Options{Policy: rec, Halt: rec}), rec: rec, st: st}
	builtins(f)
	r, problems, err := Load(ctx, f.d, st)
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	for _, tl := range Tools(r) {
		f.d.MustRegister(tl)
	}
	f.r = r
	return f
}

func (f *fixture) define(t *testing.T, c auth.Caller, js string) error {
	t.Helper()
	_, err := f.d.Call(ctx, c, ToolDefine.Name(), json.RawMessage(js))
	return err
}

func (f *fixture) mustDefine(t *testing.T, c auth.Caller, js string) {
	t.Helper()
	if err := f.define(t, c, js); err != nil {
		t.Fatalf("define %s: %v", js, err)
	}
}

const cmdSchema = `{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}`

func TestCompositionRules(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"a","call":{"tool":"file.read"}}`)
	f.mustDefine(t, agent, `{"name":"b","call":{"tool":"a"}}`)
	// A chain c1 → … → c7 above a built-in is the tallest allowed.
	prev := "file.read"
	for i := 1; i <= maxHeight; i++ {
		f.mustDefine(t, agent, fmt.Sprintf(`{"name":"c%d","call":{"tool":%q}}`, i, prev))
		prev = fmt.Sprintf("c%d", i)
	}
	cases := []struct {
		name, def, field, msg string
	}{
		{"cycle A→B→A", `{"name":"a","call":{"tool":"b"}}`, "steps", "cycle"},
		{"self", `{"name":"s","call":{"tool":"s"}}`, "call.tool", "itself"},
		{"unknown tool", `{"name":"u","call":{"tool":"file.nope"}}`, "call.tool", "no tool named"},
		{"management tool", `{"name":"m","call":{"tool":"keys.create"}}`, "call.tool", "management"},
		{"management step", `{"name":"m","steps":[{"id":"x","tool":"tools.define"}]}`, "steps.0.tool", "management"},
		{"depth 9", fmt.Sprintf(`{"name":"c%d","call":{"tool":"c%d"}}`, maxHeight+1, maxHeight), "steps", "deep"},
		{"collision with a built-in", `{"name":"exec.run","call":{"tool":"file.read"}}`, "name", "built-in"},
		{"reserved namespace", `{"name":"policy.mine","call":{"tool":"file.read"}}`, "name", "reserved"},
		{"bad name", `{"name":"Bad Name","call":{"tool":"file.read"}}`, "name", "lower-case"},
		{"call and steps", `{"name":"x","call":{"tool":"file.read"},"steps":[{"id":"a","tool":"file.read"}]}`, "steps", "either"},
		{"neither", `{"name":"x"}`, "call", "needs"},
		{"duplicate step id", `{"name":"x","steps":[{"id":"a","tool":"file.read"},{"id":"a","tool":"file.read"}]}`, "steps.1.id", "unique"},
		{"unknown placeholder", `{"name":"x","inputSchema":` + cmdSchema + `,"call":{"tool":"exec.run","arguments":{"command":"ls {dir}"}}}`, "call.arguments", "{dir}"},
		{"later step referenced", `{"name":"x","steps":[{"id":"a","tool":"file.read","arguments":{"p":"{steps.b.x}"}},{"id":"b","tool":"file.read"}]}`, "steps.0.arguments", "earlier step"},
		{"schema with $ref", `{"name":"x","inputSchema":{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1/x"}}},"call":{"tool":"file.read"}}`, "inputSchema", "$ref"},
		{"schema not an object", `{"name":"x","inputSchema":{"type":"string"},"call":{"tool":"file.read"}}`, "inputSchema.type", "object"},
		{"invalid schema", `{"name":"x","inputSchema":{"type":"object","properties":{"a":{"type":"nope"}}},"call":{"tool":"file.read"}}`, "inputSchema", "valid schema"},
		{"bad risk", `{"name":"x","risk":"low","call":{"tool":"file.read"}}`, "risk", "risk"},
		{"agent publishing", `{"name":"x","published":true,"call":{"tool":"file.read"}}`, "", "admin"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := f.define(t, agent, tc.def)
			if err == nil {
				t.Fatal("accepted")
			}
			if fault.FieldOf(err) != tc.field || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v (field %q), want field %q and %q", err, fault.FieldOf(err), tc.field, tc.msg)
			}
			if k := fault.KindOf(err); k != fault.Invalid && k != fault.Forbidden {
				t.Fatalf("kind %s", k)
			}
		})
	}
	if err := f.define(t, agent2, `{"name":"a","call":{"tool":"file.write"}}`); fault.FieldOf(err) != "name" {
		t.Fatalf("another key redefined a's tool: %v", err)
	}
	// The refused cycle left a as it was.
	if def, _ := f.r.Def(agent, "a"); def.Call.Tool != "file.read" {
		t.Fatalf("a = %+v", def)
	}
	// Deleting a tool another tool calls is refused.
	if _, err := f.d.Call(ctx, agent, ToolDelete.Name(), json.RawMessage(`{"name":"a"}`)); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("deleted a referenced tool: %v", err)
	}
}

func TestArgumentsAndPlaceholders(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"typed","inputSchema":{"type":"object","properties":{"n":{"type":"integer","minimum":1},"tags":{"type":"array","items":{"type":"string"}},"s":{"type":"string"}},"required":["n"]},
		"call":{"tool":"file.read","arguments":{"n":"{n}","tags":"{tags}","text":"n={n} s={s} ${HOME}","nested":{"list":["{s}"]}}}}`)
	res, err := f.d.Call(ctx, agent, "typed", json.RawMessage(`{"n":3,"tags":["a","b"],"s":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	want := `{"echo":{"n":3,"nested":{"list":["x"]},"tags":["a","b"],"text":"n=3 s=x ${HOME}"}}`
	if string(b) != want {
		t.Fatalf("rendered\n%s\nwant\n%s", b, want)
	}
	for _, tc := range []struct{ name, args, field string }{
		{"missing required", `{}`, "arguments.n"},
		{"wrong type", `{"n":"three"}`, "arguments.n"},
		{"below minimum", `{"n":0}`, "arguments.n"},
		{"nested item", `{"n":1,"tags":["a",2]}`, "arguments.tags.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.d.Call(ctx, agent, "typed", json.RawMessage(tc.args))
			if fault.KindOf(err) != fault.Unprocessable || fault.FieldOf(err) != tc.field {
				t.Fatalf("err %v field %q, want 422 at %s", err, fault.FieldOf(err), tc.field)
			}
		})
	}
	// Steps feed later steps; the result holds every step.
	f.mustDefine(t, agent, `{"name":"chain","inputSchema":`+cmdSchema+`,"steps":[
		{"id":"first","tool":"exec.run","arguments":{"command":"{cmd}"}},
		{"id":"second","tool":"file.read","arguments":{"prev":"{steps.first.stdout}","code":"{steps.first.exit_code}"}}]}`)
	res, err = f.d.Call(ctx, agent, "chain", json.RawMessage(`{"cmd":"echo hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(res.(map[string]any)["result"])
	if string(b) != `{"echo":{"code":0,"prev":"out:echo hi"}}` {
		t.Fatalf("chain result %s", b)
	}
}

func TestRiskIsDerivedAtEveryCall(t *testing.T) {
	f := newFixture(t, &memSettings{})
	// Laundering: a wrapper declared safe around exec runs as dangerous.
	f.mustDefine(t, agent, `{"name":"safe_wrapper","risk":"safe","inputSchema":`+cmdSchema+`,"call":{"tool":"exec.run","arguments":{"command":"{cmd}"}}}`)
	if _, err := f.d.Call(ctx, agent, "safe_wrapper", json.RawMessage(`{"cmd":"ls"}`)); err != nil {
		t.Fatal(err)
	}
	if a := f.rec.get("safe_wrapper"); a.Risk != guard.Dangerous || a.Flagged() {
		t.Fatalf("safe wrapper of exec assessed %+v", a)
	}
	// What the rendered command is flagged for shows at the top level.
	if _, err := f.d.Call(ctx, agent, "safe_wrapper", json.RawMessage(`{"cmd":"rm -rf /"}`)); err != nil {
		t.Fatal(err)
	}
	if a := f.rec.get("safe_wrapper"); !a.Flagged() || a.Rules[0] != "rm-rf-root" || a.Names[0] != "rm" {
		t.Fatalf("rm -rf / through a wrapper assessed %+v", a)
	}
	// Redefining a referenced tool changes its callers' risk at once.
	f.mustDefine(t, agent, `{"name":"inner","call":{"tool":"file.read"}}`)
	f.mustDefine(t, agent, `{"name":"outer","risk":"safe","call":{"tool":"inner"}}`)
	if _, err := f.d.Call(ctx, agent, "outer", nil); err != nil {
		t.Fatal(err)
	}
	if a := f.rec.get("outer"); a.Risk != guard.Safe {
		t.Fatalf("outer before: %+v", a)
	}
	f.mustDefine(t, agent, `{"name":"inner","call":{"tool":"file.write"}}`)
	if _, err := f.d.Call(ctx, agent, "outer", nil); err != nil {
		t.Fatal(err)
	}
	if a := f.rec.get("outer"); a.Risk != guard.Medium {
		t.Fatalf("outer after redefining inner: %+v", a)
	}
	// A declared risk above the derived one stands.
	f.mustDefine(t, agent, `{"name":"careful","risk":"dangerous","call":{"tool":"file.read"}}`)
	if _, err := f.d.Call(ctx, agent, "careful", nil); err != nil {
		t.Fatal(err)
	}
	if a := f.rec.get("careful"); a.Risk != guard.Dangerous {
		t.Fatalf("declared dangerous: %+v", a)
	}
	for _, in := range f.r.List(agent) {
		if in.Name == "safe_wrapper" && in.Risk != "dangerous" {
			t.Fatalf("listed risk %s", in.Risk)
		}
	}
}

func TestHaltDuringANestedCall(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"two","steps":[{"id":"look","tool":"file.read"},{"id":"act","tool":"exec.run","arguments":{"command":"ls"}}]}`)
	// The operator halts while the first step runs.
	f.hook = func(tool string) {
		if tool == "file.read" {
			f.rec.mu.Lock()
			f.rec.halted = true
			f.rec.mu.Unlock()
		}
	}
	_, err := f.d.Call(ctx, agent, "two", nil)
	// The server was not halted when the top-level call started; the
	// nested exec is refused, at its own level.
	if fault.KindOf(err) != fault.Conflict || !strings.Contains(err.Error(), "step act") {
		t.Fatalf("err %v", err)
	}
	if len(f.ran) != 0 {
		t.Fatalf("exec ran while halted: %v", f.ran)
	}
	// While halted the custom tool itself is refused at the top.
	f.hook = nil
	if _, err := f.d.Call(ctx, agent, "two", nil); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("halted top-level: %v", err)
	}
}

func TestOwnershipPublishingAndPersistence(t *testing.T) {
	st := &memSettings{}
	f := newFixture(t, st)
	f.mustDefine(t, agent, `{"name":"mine","description":"d","call":{"tool":"file.read"}}`)
	f.mustDefine(t, agent, `{"name":"mine2","call":{"tool":"mine"}}`)
	if _, err := f.d.Call(ctx, agent2, "mine", nil); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("another key called an unpublished tool: %v", err)
	}
	for _, in := range f.r.List(agent2) {
		if in.Name == "mine" {
			t.Fatal("another key sees an unpublished tool")
		}
	}
	if _, err := f.d.Call(ctx, agent, ToolPublish.Name(), json.RawMessage(`{"name":"mine","published":true}`)); fault.KindOf(err) != fault.Forbidden {
		t.Fatalf("agent published: %v", err)
	}
	if _, err := f.d.Call(ctx, admin, ToolPublish.Name(), json.RawMessage(`{"name":"mine","published":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.d.Call(ctx, agent2, "mine", nil); err != nil {
		t.Fatalf("published tool: %v", err)
	}
	if _, err := f.d.Call(ctx, agent2, ToolDelete.Name(), json.RawMessage(`{"name":"mine"}`)); fault.KindOf(err) != fault.Forbidden {
		t.Fatalf("another key deleted a published tool: %v", err)
	}
	// Restart: a new dispatcher and registry over the same store.
	g := newFixture(t, st)
	if def, ok := g.r.Def(agent, "mine2"); !ok || def.Owner != agent.KeyID {
		t.Fatalf("after restart: %+v %v", def, ok)
	}
	if _, err := g.d.Call(ctx, agent2, "mine", nil); err != nil {
		t.Fatalf("published flag lost: %v", err)
	}
	if _, err := g.d.Call(ctx, agent2, "mine2", nil); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("unpublished after restart: %v", err)
	}
	if _, err := g.d.Call(ctx, agent, ToolDelete.Name(), json.RawMessage(`{"name":"mine2"}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.d.Tool("mine2"); ok {
		t.Fatal("deleted tool still registered")
	}
}

func FuzzRender(f *testing.F) {
	f.Add(`{"a":"{x}","b":"pre {x} {steps.s.f} ${y}"}`, `{"x":[1,{"z":null}]}`)
	f.Add(`"{x}{x}{x}"`, `{"x":"{x}"}`)
	f.Fuzz(func(t *testing.T, tmpl, args string) {
		var tv any
		var av map[string]any
		if json.Unmarshal([]byte(tmpl), &tv) != nil || json.Unmarshal([]byte(args), &av) != nil {
			return
		}
		out, err := render(tv, av, map[string]any{"s": map[string]any{"f": 1}})
		if err != nil {
			return
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("rendered value does not encode: %v", err)
		}
	})
}

func TestToolsRegisteredLaterLoadWhenTheyArrive(t *testing.T) {
	st := &memSettings{}
	_ = st.PutSetting(context.Background(), SettingKey, []byte(`[{"name":"uses_late","call":{"tool":"late.tool"},"owner":"k-agent"}]`))
	d := dispatch.New(dispatch.Options{})
	r, problems, err := Load(ctx, d, st)
	if err != nil || len(problems) != 1 {
		t.Fatalf("err %v problems %v", err, problems)
	}
	if _, ok := d.Tool("uses_late"); ok {
		t.Fatal("registered before what it calls")
	}
	d.MustRegister(dispatch.Tool{Name: "late.tool", Risk: guard.Safe, Run: func(context.Context, auth.Caller, any) (any, error) { return "late", nil }})
	for i := 0; ; i++ {
		if _, ok := d.Tool("uses_late"); ok {
			break
		}
		if i > 500 {
			t.Fatal("pending definition never loaded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res, err := d.Call(ctx, agent, "uses_late", nil); err != nil || res != "late" {
		t.Fatalf("%v %v", res, err)
	}
	if !r.IsCustom("uses_late") {
		t.Fatal("not custom")
	}
}

// A chain stored by hand (not through Define, which refuses it) still
// cannot nest deeper than the dispatcher allows: depth 8 is refused at run
// time, and the built-in at the bottom never runs.
func TestDepthIsCappedAtRunTime(t *testing.T) {
	var defs []Def
	prev := "exec.run"
	for i := 1; i <= dispatch.MaxDepth+1; i++ {
		name := fmt.Sprintf("deep%d", i)
		defs = append(defs, Def{Name: name, Owner: agent.KeyID, Call: &Step{Tool: prev, Arguments: json.RawMessage(`{"command":"echo bottom"}`)}})
		prev = name
	}
	b, _ := json.Marshal(defs)
	st := &memSettings{}
	_ = st.PutSetting(ctx, SettingKey, b)
	f := newFixture(t, st)
	if _, err := f.d.Call(ctx, agent, fmt.Sprintf("deep%d", dispatch.MaxDepth-1), nil); err != nil {
		t.Fatalf("a chain of %d runs: %v", dispatch.MaxDepth-1, err)
	}
	f.ran = nil
	_, err := f.d.Call(ctx, agent, fmt.Sprintf("deep%d", dispatch.MaxDepth), nil)
	if fault.KindOf(err) != fault.Invalid || !strings.Contains(err.Error(), "nested") || len(f.ran) != 0 {
		t.Fatalf("depth %d: err %v, ran %v", dispatch.MaxDepth, err, f.ran)
	}
}

func TestRunTimeArgumentsToExecAreFlagged(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"pipe","steps":[{"id":"a","tool":"file.read"},{"id":"b","tool":"exec.run","arguments":{"command":"{steps.a.echo}"}}]}`)
	f.mustDefine(t, agent, `{"name":"calm","steps":[{"id":"a","tool":"exec.run","arguments":{"command":"ls"}},{"id":"b","tool":"file.read","arguments":{"x":"{steps.a.stdout}"}}]}`)
	// Whether the step then runs does not matter here (the fake exec
	// refuses an object as its command); the assessment does.
	_, _ = f.d.Call(ctx, agent, "pipe", nil)
	if a := f.rec.get("pipe"); !a.Dynamic || !a.Flagged() {
		t.Fatalf("exec fed by an earlier step: %+v", a)
	}
	if _, err := f.d.Call(ctx, agent, "calm", nil); err != nil {
		t.Fatal(err)
	}
	if a := f.rec.get("calm"); a.Dynamic {
		t.Fatalf("results fed into a non-assessing tool: %+v", a)
	}
}
