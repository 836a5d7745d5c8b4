package transfer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/transfer"
)

// TestToolsAreTypedAndMarkStreaming: every transfer tool is declared with
// dispatch.Define; the body-moving ones are refused to a caller that did
// not mark its context with dispatch.WithStreaming (before any sandbox is
// looked up), arguments are read strictly, and transfer.WithStreaming is
// the dispatcher's one mark.
func TestToolsAreTypedAndMarkStreaming(t *testing.T) {
	d := dispatch.New(dispatch.Options{})
	for _, tl := range transfer.Tools(transfer.New(nil, transfer.Config{})) {
		if !tl.Typed() {
			t.Errorf("%s is not declared with dispatch.Define", tl.Name)
		}
		d.MustRegister(tl)
	}
	admin := auth.Caller{KeyID: "key_admin", Role: auth.RoleAdmin}
	ctx := context.Background()
	for name, args := range map[string]string{
		transfer.ToolUpload.Name(): `{"path":"/workspace/x"}`, transfer.ToolDownload.Name(): `{"path":"/workspace/x"}`,
		transfer.ToolArchive.Name(): `{"path":"/workspace"}`, transfer.ToolArtifactWrite.Name(): `{"id":"u1","offset":0}`,
		transfer.ToolArtifactRead.Name(): `{"name":"a.bin"}`,
	} {
		tl, _ := d.Tool(name)
		if !tl.Streams {
			t.Errorf("%s is not declared Streams", name)
		}
		_, err := d.Call(ctx, admin, name, json.RawMessage(args))
		if fault.KindOf(err) != fault.Invalid || !strings.Contains(fault.Public(err), "only available over its HTTP route") {
			t.Errorf("%s without streaming: %v, want the HTTP-only refusal", name, err)
		}
	}
	if !dispatch.Streaming(dispatch.WithStreaming(ctx)) {
		t.Error("transfer.WithStreaming does not set the dispatcher's streaming mark")
	}
	_, err := d.Call(ctx, admin, transfer.ToolExtract.Name(), json.RawMessage(`{"path":"/workspace/a.zip","dst":"/tmp"}`))
	if fault.KindOf(err) != fault.Invalid || !strings.Contains(fault.Public(err), "dst") {
		t.Errorf("a misspelt field: %v, want it refused by name", err)
	}
}
