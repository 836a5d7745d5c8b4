package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

type echoArgs struct {
	Text  string `json:"text" required:"true" doc:"what to echo" maxLength:"10"`
	Times int    `json:"times,omitempty" minimum:"1" maximum:"3"`
	Mode  string `json:"mode,omitempty" enum:"loud,quiet"`
	Inner struct {
		Flag bool `json:"flag"`
	} `json:"inner"`
}

func (a echoArgs) Validate() error {
	if a.Times < 0 || a.Times > 3 {
		return fault.InvalidField("body.times", "times must be 0..3")
	}
	return nil
}

type echoResult struct{ Out string }

func echoTool(lenient bool, ran *int) Tool {
	return Define("test.echo", Spec{Risk: guard.Safe, Category: ratelimit.Category(0), Lenient: lenient},
		func(_ context.Context, _ auth.Caller, a echoArgs) (echoResult, error) {
			*ran++
			return echoResult{Out: strings.Repeat(a.Text, max(a.Times, 1))}, nil
		},
		Hooks[echoArgs, echoResult]{
			Describe:  func(a echoArgs) Target { return Target{Detail: map[string]any{"text": a.Text}} },
			Summarize: func(_ echoArgs, r echoResult) map[string]any { return map[string]any{"len": len(r.Out)} },
		})
}

func TestDefineDecodesStrictlyUnlessLenient(t *testing.T) {
	ran := 0
	strict, lenient := echoTool(false, &ran), echoTool(true, &ran)
	for _, tc := range []struct {
		raw          string
		strictOK, ok bool
	}{
		// No body: every default for the strict reader; the lenient one
		// (pydantic's rules) names the required field missing.
		{``, true, false},
		{`null`, true, false},
		{`{"text":"a"}`, true, true},
		{`{"text":"a","extra":1}`, false, true},
		// Lax integers (AIO's rows and the tools' lenient mode agree).
		{`{"text":"a","times":"2"}`, false, true},
		{`{"text":"a","times":2.0}`, false, true},
		{`{"text":"a","times":2.5}`, false, false},
		{`{"text":"a","times":true}`, false, false},
		{`{"text":"a","mode":"shout"}`, true, false},
		{`{"text":"a","mode":null}`, true, true},
		{`{"text":1}`, false, false},
		{`{"text":"a"} {}`, false, false},
		{`{"text":`, false, false},
	} {
		_, err := strict.Decode(json.RawMessage(tc.raw))
		if (err == nil) != tc.strictOK {
			t.Errorf("strict %q: err %v", tc.raw, err)
		}
		if err != nil && fault.KindOf(err) != fault.Invalid {
			t.Errorf("strict %q: kind %s", tc.raw, fault.KindOf(err))
		}
		if _, err := lenient.Decode(json.RawMessage(tc.raw)); (err == nil) != tc.ok {
			t.Errorf("lenient %q: err %v", tc.raw, err)
		}
	}
	_, err := strict.Decode(json.RawMessage(`{"text":1}`))
	if fault.FieldOf(err) != "body.text" {
		t.Errorf("field = %q", fault.FieldOf(err))
	}
}

// TestLenientIsAIOsDecoder: the tools' lenient mode and AIO's rows
// (DecodeAIO) read a type the same way, and a lenient error carries every
// problem in pydantic's terms inside a fault.Invalid naming the first.
func TestLenientIsAIOsDecoder(t *testing.T) {
	for _, raw := range []string{`{"text":"a","times":" 3 "}`, `{"text":"a","times":3.0,"other":[1]}`} {
		viaTool, err1 := DecodeArgs[echoArgs](json.RawMessage(raw), true)
		viaAIO, err2 := DecodeAIO[echoArgs]([]byte(raw), nil)
		if err1 != nil || err2 != nil || viaTool.Times != 3 || viaAIO != viaTool {
			t.Fatalf("%s: tool %+v %v, AIO %+v %v", raw, viaTool, err1, viaAIO, err2)
		}
	}
	_, err := DecodeArgs[echoArgs](json.RawMessage(`{"times":"x","mode":"shout"}`), true)
	var problems ArgErrors
	if fault.KindOf(err) != fault.Invalid || !errors.As(err, &problems) || len(problems) != 3 {
		t.Fatalf("err %v, problems %+v", err, problems)
	}
	want := []string{"missing text", "enum mode", "int_type times"}
	for i, p := range problems {
		if got := p.Type + " " + strings.Join(p.Loc, "."); got != want[i] {
			t.Errorf("problem %d = %q, want %q", i, got, want[i])
		}
	}
	if fault.FieldOf(err) != "body.text" {
		t.Errorf("field = %q", fault.FieldOf(err))
	}
	// AIO's rows refuse a body that is not an object, null included; the
	// tools read null arguments as none.
	if _, err := DecodeAIO[echoArgs]([]byte(`null`), nil); !errors.As(err, &problems) || problems[0].Type != "model_attributes_type" {
		t.Fatalf("AIO null body: %v", err)
	}
	// A row's own required fields count beside the type's tags.
	if _, err := DecodeAIO[echoArgs]([]byte(`{"text":"a"}`), []string{"mode"}); !errors.As(err, &problems) || problems[0].Type != "missing" {
		t.Fatalf("row-required field: %v", err)
	}
}

// TestCallDecodesLaxIntegers: /v1/tools/call and MCP (Dispatcher.Call) take
// "2" for an integer of a lenient tool, as AIO's HTTP rows do.
func TestCallDecodesLaxIntegers(t *testing.T) {
	ran := 0
	d := New(Options{})
	d.MustRegister(echoTool(true, &ran))
	res, err := d.Call(context.Background(), agent, "test.echo", json.RawMessage(`{"text":"ab","times":"2"}`))
	if err != nil || res.(echoResult).Out != "abab" {
		t.Fatalf("%v %v", res, err)
	}
	if _, err := d.Call(context.Background(), agent, "test.echo", json.RawMessage(`{"text":"ab","times":"two"}`)); fault.FieldOf(err) != "body.times" || ran != 1 {
		t.Fatalf("err %v ran %d", err, ran)
	}
}

func TestDefineValidatesBeforeCountingAndRunning(t *testing.T) {
	ran := 0
	lim := ratelimit.New(ratelimit.Options{})
	au := &memAudit{}
	d := New(Options{Limiter: lim, Audit: au})
	tool := echoTool(false, &ran)
	tool.Category = ratelimit.Command
	d.MustRegister(tool)
	_, err := d.Call(context.Background(), agent, "test.echo", json.RawMessage(`{"text":"a","times":9}`))
	if fault.KindOf(err) != fault.Invalid || fault.FieldOf(err) != "body.times" || ran != 0 {
		t.Fatalf("err %v field %q ran %d", err, fault.FieldOf(err), ran)
	}
	if e := au.last(); e.Verdict != "error" {
		t.Fatalf("audit verdict %q", e.Verdict)
	}
	got, err := Ref[echoArgs, echoResult]("test.echo").Call(context.Background(), d, agent, echoArgs{Text: "ab", Times: 2})
	if err != nil || got.Out != "abab" || ran != 1 {
		t.Fatalf("%v %v", got, err)
	}
	if e := au.last(); e.Detail["len"] != 4 || e.Detail["text"] != "ab" {
		t.Fatalf("detail %v", e.Detail)
	}
	// A pointer to the argument type is accepted too.
	if _, err := d.Dispatch(context.Background(), agent, "test.echo", &echoArgs{Text: "x"}); err != nil {
		t.Fatal(err)
	}
}

func TestDefineRefusesWrongTypesWithoutPanicking(t *testing.T) {
	ran := 0
	d := New(Options{})
	d.MustRegister(echoTool(false, &ran))
	_, err := d.Dispatch(context.Background(), agent, "test.echo", map[string]any{"text": "a"})
	if fault.KindOf(err) != fault.Internal || ran != 0 {
		t.Fatalf("err %v ran %d", err, ran)
	}
	if fault.Public(err) != "internal error" {
		t.Fatalf("public message leaks detail: %q", fault.Public(err))
	}
	_, err = Ref[echoArgs, string]("test.echo").Call(context.Background(), d, agent, echoArgs{Text: "a"})
	if fault.KindOf(err) != fault.Internal || ran != 1 {
		t.Fatalf("result type mismatch: %v", err)
	}
}

func TestSchemaForFollowsTheType(t *testing.T) {
	var s struct {
		Type       string                    `json:"type"`
		Required   []string                  `json:"required"`
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(SchemaFor[echoArgs](), &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || len(s.Required) != 1 || s.Required[0] != "text" {
		t.Fatalf("%+v", s)
	}
	p := s.Properties
	if p["text"]["type"] != "string" || p["text"]["maxLength"] != 10.0 || p["text"]["description"] != "what to echo" ||
		p["times"]["type"] != "integer" || p["times"]["maximum"] != 3.0 ||
		len(p["mode"]["enum"].([]any)) != 2 || p["inner"]["type"] != "object" {
		t.Fatalf("%v", p)
	}
	// No required list at all rather than "required": null.
	if strings.Contains(string(SchemaFor[struct {
		A string `json:"a"`
	}]()), "required") {
		t.Fatal("required present for a type with no required field")
	}
}

func TestStreamingMark(t *testing.T) {
	if Streaming(context.Background()) || !Streaming(WithStreaming(context.Background())) {
		t.Fatal("streaming mark")
	}
}

// A tool whose answer type is an interface may answer nothing: its
// caller gets the zero value, not an internal error (tools.delete).
func TestRefCallOfAToolAnsweringNothing(t *testing.T) {
	d := New(Options{})
	ref := Ref[struct{}, any]("test.nothing")
	d.MustRegister(Define(ref, Spec{Risk: guard.Safe},
		func(context.Context, auth.Caller, struct{}) (any, error) { return nil, nil }, Hooks[struct{}, any]{}))
	got, err := ref.Call(context.Background(), d, agent, struct{}{})
	if err != nil || got != nil {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ref.Call(context.Background(), nil, agent, struct{}{}); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("no dispatcher: %v", err)
	}
}
