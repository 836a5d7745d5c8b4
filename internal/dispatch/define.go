package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Ref names a tool whose arguments are an A and whose answer is an R. It
// is declared once, beside the tool's Define:
//
//	var ToolRead = dispatch.Ref[ReadArgs, ReadResult]("file.read")
//
// and is the one way code calls the tool (Call): a call whose arguments or
// answer do not match the tool's types does not compile. The name is also
// the tool's audit action.
type Ref[A, R any] string

// Name is the tool's name.
func (r Ref[A, R]) Name() string { return string(r) }

// Call dispatches the tool for c with args through every step (HALT, role,
// validation, rate limit, risk, policy, audit) and answers its R. A nil d
// (a server still starting) is Unavailable.
func (r Ref[A, R]) Call(ctx context.Context, d *Dispatcher, c auth.Caller, args A) (R, error) {
	var zero R
	if d == nil {
		return zero, fault.New(fault.Unavailable, "the server is still starting")
	}
	res, err := d.Dispatch(ctx, c, string(r), args)
	if err != nil {
		return zero, err
	}
	return ResultAs[R](string(r), res)
}

// CallJSON calls the tool with JSON arguments, read by the tool's own
// decoder inside the dispatcher (arguments that do not decode are refused
// there, audited like any refusal), and answers its R: for an edge whose
// arguments are JSON (MCP's AIO aliases).
func (r Ref[A, R]) CallJSON(ctx context.Context, d *Dispatcher, c auth.Caller, raw json.RawMessage) (R, error) {
	var zero R
	if d == nil {
		return zero, fault.New(fault.Unavailable, "the server is still starting")
	}
	res, err := d.Call(ctx, c, string(r), raw)
	if err != nil {
		return zero, err
	}
	return ResultAs[R](string(r), res)
}

// CallWithin calls the tool as a nested call of the call running in ctx,
// for its caller (Within); outside a tool's run it returns refused.
func (r Ref[A, R]) CallWithin(ctx context.Context, args A, refused error) (R, error) {
	d, c, ok := Within(ctx)
	if !ok {
		var zero R
		return zero, refused
	}
	return r.Call(ctx, d, c, args)
}

// Spec is what a tool declares about itself apart from its name (its Ref)
// and typed code: its description, tier, rate-limit bucket, who may call
// it and how its arguments are read.
type Spec struct {
	Description string
	Risk        guard.Risk
	RiskCeiling guard.Risk
	Category    ratelimit.Category
	Roles       []auth.Role
	Visible     func(auth.Caller) bool
	// Lenient reads arguments the AIO (pydantic) way (DecodeArgs): unknown
	// fields ignored, null as absent, lax integers ("5" is 5), enums and
	// required fields checked — AIO's HTTP rows decode the same types with
	// the same decoder. Without it an unknown field is refused, so a
	// misspelt option never silently means its default.
	Lenient bool
	// Streams says the tool can send output while it runs to a caller that
	// asked for it with WithStreaming; other callers get the whole answer.
	Streams bool
	// Commands says whether and how the call starts a command: its record
	// then goes first (record.go).
	Commands Commands
}

// Hooks are a tool's optional typed hooks; see Tool for what each does.
type Hooks[A, R any] struct {
	Assess    func(A) Assessment
	Describe  func(A) Target
	Summarize func(A, R) map[string]any
}

// Validator is implemented by argument types whose fields have rules
// beyond their JSON types (ranges, exclusive options, formats). A field's
// rule lives there and nowhere else: Dispatch checks it for every caller,
// whichever edge the call came from. Return fault.InvalidField errors so
// clients learn which field is wrong.
type Validator interface {
	Validate() error
}

// Define declares the tool ref names, whose arguments are an A and whose
// answer is an R. The input schema is derived from A (SchemaFor), arguments are decoded
// into A by one decoder (DecodeArgs, strict unless spec.Lenient), A's
// Validate runs before the rate limit counts the call, and run is handed
// an A — never an any. Dispatching a value of another type is refused as
// an internal error rather than panicking.
func Define[A, R any](ref Ref[A, R], spec Spec, run func(context.Context, auth.Caller, A) (R, error), h Hooks[A, R]) Tool {
	name := string(ref)
	t := Tool{
		Name: name, Description: spec.Description, Risk: spec.Risk, RiskCeiling: spec.RiskCeiling,
		Category: spec.Category, Roles: spec.Roles, Visible: spec.Visible, Streams: spec.Streams, Commands: spec.Commands,
		InputSchema: SchemaFor[A](),
		Decode: func(raw json.RawMessage) (any, error) {
			return DecodeArgs[A](raw, spec.Lenient)
		},
		Check: func(args any) error {
			a, err := argsAs[A](name, args)
			if err != nil {
				return err
			}
			return validate(a)
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a, err := argsAs[A](name, args)
			if err != nil {
				return nil, err
			}
			return run(ctx, c, a)
		},
		typed: true,
	}
	if h.Assess != nil {
		t.Assess = func(args any) Assessment {
			a, err := argsAs[A](name, args)
			if err != nil {
				// Fail closed: a call that cannot be read is rated at
				// the top tier (Dispatch refuses it in Check anyway).
				return Assessment{Risk: guard.Dangerous}
			}
			return h.Assess(a)
		}
	}
	if h.Describe != nil {
		t.Describe = func(args any) Target {
			a, err := argsAs[A](name, args)
			if err != nil {
				return Target{}
			}
			return h.Describe(a)
		}
	}
	if h.Summarize != nil {
		t.Summarize = func(args, result any) map[string]any {
			a, aerr := argsAs[A](name, args)
			r, rok := result.(R)
			if aerr != nil || !rok {
				return nil
			}
			return h.Summarize(a, r)
		}
	}
	return t
}

// argsAs is the one place a tool's arguments are asserted to their type.
func argsAs[A any](tool string, args any) (A, error) {
	switch v := args.(type) {
	case A:
		return v, nil
	case *A:
		if v != nil {
			return *v, nil
		}
	}
	var zero A
	return zero, fault.Wrap(fault.Internal, fmt.Errorf("tool %s given arguments of type %T, wants %T", tool, args, zero), "internal error")
}

func validate[A any](a A) error {
	if v, ok := any(a).(Validator); ok {
		return v.Validate()
	}
	if v, ok := any(&a).(Validator); ok {
		return v.Validate()
	}
	return nil
}

// DecodeArgs reads JSON arguments into an A. An empty body or null means
// every field's default; anything after the first JSON value is refused.
// Strict (lenient false): unknown fields are refused, a key must be a
// field's JSON name exactly (not another case of it, which encoding/json
// alone would take), and every field must have exactly its JSON type. Lenient: AIO's pydantic rules (decodeLax) —
// the same decoder AIO's HTTP rows use (DecodeAIO), so a type reads the
// same from MCP, /v1/tools/call and AIO's routes ("5" is the integer 5).
// Errors are fault.Invalid naming the offending field where the decoder
// knows it; lenient errors carry every problem as ArgErrors.
func DecodeArgs[A any](raw json.RawMessage, lenient bool) (A, error) {
	if lenient {
		return decodeLax[A](raw, nil, true)
	}
	var v A
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return v, nil
	}
	if k, ok := inexactKey[A](raw); ok {
		return v, fault.InvalidField("body", fmt.Sprintf("the arguments do not match the tool's schema: unknown field %q", k))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, decodeFault(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, fault.InvalidField("body", "the arguments hold more than one JSON value")
	}
	return v, nil
}

func decodeFault(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := "body"
		if te.Field != "" {
			field = "body." + te.Field
		}
		return fault.InvalidField(field, fmt.Sprintf("field %s must be %s, not %s", cmpOr(te.Field, "(body)"), te.Type, te.Value))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fault.InvalidField("body", fmt.Sprintf("malformed JSON at byte %d", se.Offset))
	}
	// json's unknown-field error names the field: `json: unknown field "x"`.
	return fault.InvalidField("body", "the arguments do not match the tool's schema: "+trimJSONPrefix(err.Error()))
}

func trimJSONPrefix(s string) string {
	const p = "json: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ResultAs asserts a tool's answer to R: the one place a result is
// asserted to its type. A tool that answers something else is an internal
// error (naming both types), never a panic at the edge.
func ResultAs[R any](name string, res any) (R, error) {
	var zero R
	if res == nil && reflect.TypeFor[R]().Kind() == reflect.Interface {
		// A tool answering "nothing" where its R is an interface.
		return zero, nil
	}
	switch v := res.(type) {
	case R:
		return v, nil
	case *R:
		if v != nil {
			return *v, nil
		}
	}
	return zero, fault.Wrap(fault.Internal, fmt.Errorf("tool %s answered %T, wants %T", name, res, zero), "internal error")
}

// streamingKey marks a context whose caller reads output as it is made.
type streamingKey struct{}

// WithStreaming marks ctx: the caller reads a tool's output while it runs
// (SSE, a WebSocket). Tools declared with Spec.Streams look at Streaming.
func WithStreaming(ctx context.Context) context.Context {
	return context.WithValue(ctx, streamingKey{}, true)
}

// Streaming reports whether the caller asked for output as it is made.
func Streaming(ctx context.Context) bool {
	v, _ := ctx.Value(streamingKey{}).(bool)
	return v
}
