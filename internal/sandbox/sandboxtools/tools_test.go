package sandboxtools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// TestExecToolDecodesStrictly: exec.run's JSON arguments are ExecArgs,
// read by dispatch's one decoder (strict: an unknown field is refused)
// and checked before the tool runs.
func TestExecToolDecodesStrictly(t *testing.T) {
	var exec dispatch.Tool
	for _, tl := range Tools(nil, guard.New(guard.Config{})) {
		if tl.Name == sandbox.ToolExec.Name() {
			exec = tl
		}
		if !tl.Typed() {
			t.Errorf("%s is not declared with dispatch.Define", tl.Name)
		}
	}
	if _, err := exec.Decode(json.RawMessage(`{"command":"ls","tiemout":5}`)); err == nil {
		t.Fatal("an unknown field was accepted")
	}
	args, err := exec.Decode(json.RawMessage(`{"command":"ls","timeout":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Check(args); fault.FieldOf(err) != "timeout" {
		t.Fatalf("timeout 0 passed the check: %v", err)
	}
	d := dispatch.New(dispatch.Options{})
	d.MustRegister(exec)
	_, err = d.Call(context.Background(), auth.Caller{KeyID: "k", Role: auth.RoleAdmin}, sandbox.ToolExec.Name(), json.RawMessage(`{"command":"ls","timeout":601}`))
	if !fault.Is(err, fault.Invalid) {
		t.Fatalf("timeout 601 through the dispatcher: %v, want invalid", err)
	}
}
