package sandboxinit

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sandhold/sandhold/internal/agent/proto"
)

// TestSetupMessagesAreRequestAndResponse: the init reads its setup as a
// setupMsg and answers with a readyMsg (init_linux.go); the server sends a
// Request and reads a Response. Each field of the small types must be the
// big type's field of the same name, type and JSON tag, and a message must
// come through either way whole.
func TestSetupMessagesAreRequestAndResponse(t *testing.T) {
	same := func(small, big reflect.Type) {
		t.Helper()
		for f := range small.Fields() {
			g, ok := big.FieldByName(f.Name)
			if !ok || g.Type != f.Type || g.Tag != f.Tag {
				t.Errorf("%s.%s (%s %q) is not %s's field", small.Name(), f.Name, f.Type, f.Tag, big.Name())
			}
		}
	}
	same(reflect.TypeFor[setupMsg](), reflect.TypeFor[proto.Request]())
	same(reflect.TypeFor[readyMsg](), reflect.TypeFor[proto.Response]())

	st := proto.Setup{Hostname: "sandbox", UID: 1000, GID: 1000, TmpBytes: 1 << 20, CgroupVersion: 1, TCPConnect: []uint16{80}, SleepAfterMs: 3000}
	b, err := json.Marshal(proto.Request{ID: 7, Op: proto.OpSetup, Setup: &st})
	if err != nil {
		t.Fatal(err)
	}
	var got setupMsg
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != 7 || got.Op != proto.OpSetup || got.Setup == nil || !reflect.DeepEqual(*got.Setup, st) {
		t.Errorf("setup through setupMsg: %+v, want id 7, op setup, %+v", got, st)
	}

	for _, sent := range []readyMsg{
		{ID: 7, Ready: &proto.Ready{Layers: []proto.Layer{{Name: "seccomp", Active: true, Detail: "d"}}}},
		{ID: 7, Err: &proto.Error{Code: "invalid", Msg: "m"}},
	} {
		b, err := json.Marshal(sent)
		if err != nil {
			t.Fatal(err)
		}
		var resp proto.Response
		if err := json.Unmarshal(b, &resp); err != nil {
			t.Fatal(err)
		}
		want := proto.Response{ID: sent.ID, Err: sent.Err, Ready: sent.Ready}
		if !reflect.DeepEqual(resp, want) {
			t.Errorf("answer through Response: %+v, want %+v", resp, want)
		}
	}
}
