package dispatch

import (
	"encoding/json"
	"testing"
)

// onArgs is an argument type as the tools declare them: On embedded
// where a sandbox field of its own would stand.
type onArgs struct {
	Path string `json:"path"`
	On
	Depth int `json:"depth,omitempty"`
}

// ownArgs is the same arguments with the field declared in place, as
// every tool did before On.
type ownArgs struct {
	Path    string `json:"path"`
	Sandbox string `json:"sandbox,omitempty" doc:"sandbox id; empty: the caller's default sandbox"`
	Depth   int    `json:"depth,omitempty"`
}

// TestOnKeepsTheJSONShape: embedding On reads, writes and describes the
// arguments exactly as a sandbox field of their own did — the same JSON
// (field order included), the same schema — and Target names the sandbox
// through the Targeted interface an edge holds.
func TestOnKeepsTheJSONShape(t *testing.T) {
	tests := []struct {
		name string
		raw  string
	}{
		{"named", `{"path":"/a","sandbox":"sb-1","depth":2}`},
		{"default sandbox", `{"path":"/a"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			on, err := DecodeArgs[onArgs](json.RawMessage(tt.raw), false)
			if err != nil {
				t.Fatal(err)
			}
			own, err := DecodeArgs[ownArgs](json.RawMessage(tt.raw), false)
			if err != nil {
				t.Fatal(err)
			}
			if on.Sandbox != own.Sandbox || on.SandboxID() != own.Sandbox {
				t.Fatalf("sandbox %q (%q), want %q", on.Sandbox, on.SandboxID(), own.Sandbox)
			}
			a, _ := json.Marshal(on)
			b, _ := json.Marshal(own)
			if string(a) != string(b) {
				t.Fatalf("On writes %s, a field of its own %s", a, b)
			}
			lax, err := DecodeArgs[onArgs](json.RawMessage(tt.raw), true)
			if err != nil || lax != on {
				t.Fatalf("lenient decode %+v, %v; want %+v", lax, err, on)
			}
		})
	}
	if a, b := string(SchemaFor[onArgs]()), string(SchemaFor[ownArgs]()); a != b {
		t.Fatalf("schema with On %s, with a field of its own %s", a, b)
	}
	var args onArgs
	var edge Targeted = &args
	edge.ActOn("sb-2")
	if args.Sandbox != "sb-2" {
		t.Fatalf("Target named %q, want sb-2", args.Sandbox)
	}
}

// TestOnTaggedRequired: tags on the embedded On apply to its field, so a
// tool whose callers must name the sandbox (E2B's) says so in its schema
// and the lenient decoder refuses a call without one.
func TestOnTaggedRequired(t *testing.T) {
	type requiredOn struct {
		On   `required:"true" doc:"sandbox id"`
		Path string `json:"path" required:"true"`
	}
	type requiredOwn struct {
		Sandbox string `json:"sandbox,omitempty" required:"true" doc:"sandbox id"`
		Path    string `json:"path" required:"true"`
	}
	if a, b := string(SchemaFor[requiredOn]()), string(SchemaFor[requiredOwn]()); a != b {
		t.Fatalf("schema with On %s, with a field of its own %s", a, b)
	}
	tests := []struct {
		name    string
		raw     string
		missing bool
	}{
		{"named", `{"sandbox":"sb-1","path":"/a"}`, false},
		{"not named", `{"path":"/a"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeArgs[requiredOn](json.RawMessage(tt.raw), true)
			_, own := DecodeArgs[requiredOwn](json.RawMessage(tt.raw), true)
			if (err != nil) != tt.missing || (own != nil) != tt.missing {
				t.Fatalf("decode: %v (a field of its own: %v), want refused: %v", err, own, tt.missing)
			}
		})
	}
}

// TestKeysAreNamedOneWay: encoding/json binds a key to a field whatever
// its case, Unicode folds included ("ſandbox" is sandbox), and the last
// such key wins. The strict decoder refuses a key that is not exactly a
// field's name; the lenient one ignores it, as pydantic does, so it can
// neither override the sandbox an edge named (AIO's MCP route sets
// "sandbox" from its path) nor pass a value past the lenient checks (an
// enum).
func TestKeysAreNamedOneWay(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		lenient bool
		wantErr bool
		want    string // the sandbox read
	}{
		{"strict: exact", `{"path":"/a","sandbox":"sb-1"}`, false, false, "sb-1"},
		{"strict: another case", `{"path":"/a","Sandbox":"sb-2"}`, false, true, ""},
		{"strict: a Unicode fold after the key", `{"path":"/a","sandbox":"sb-1","ſandbox":"sb-2"}`, false, true, ""},
		{"strict: unknown field", `{"path":"/a","sandboxes":"sb-2"}`, false, true, ""},
		{"lenient: exact", `{"path":"/a","sandbox":"sb-1"}`, true, false, "sb-1"},
		{"lenient: another case ignored", `{"path":"/a","Sandbox":"sb-2"}`, true, false, ""},
		{"lenient: a Unicode fold ignored", `{"path":"/a","sandbox":"sb-1","ſandbox":"sb-2"}`, true, false, "sb-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeArgs[onArgs](json.RawMessage(tt.raw), tt.lenient)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if err == nil && got.Sandbox != tt.want {
				t.Fatalf("sandbox %q, want %q", got.Sandbox, tt.want)
			}
		})
	}
	got, err := DecodeArgs[echoArgs](json.RawMessage(`{"text":"a","Mode":"shout"}`), true)
	if err != nil || got.Mode != "" {
		t.Fatalf("a key in another case read mode %q (%v) past its enum", got.Mode, err)
	}
}
