package shell

import (
	"github.com/sandhold/sandhold/internal/dispatch"

	"encoding/json"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

func fieldOf(err error) string { return fault.FieldOf(err) }

// FuzzFeed checks that whatever a sandbox prints, the parser neither
// panics nor loses bytes that are not markers of this session, and never
// holds back more than markerMax.
func FuzzFeed(f *testing.F) {
	f.Add([]byte("plain"), 3)
	f.Add([]byte(rs+"SHabc123:7:0:/tmp"+us), 5)
	f.Add([]byte(rs+"SHother:7:0:/"+us+rs), 1)
	f.Fuzz(func(t *testing.T, data []byte, split int) {
		s, c := newParser()
		if split < 0 {
			split = -split
		}
		if split == 0 {
			split = 1
		}
		for i := 0; i < len(data); i += split {
			s.feed(data[i:min(len(data), i+split)])
		}
		if len(s.carry) > markerMax+split {
			t.Fatalf("carry %d bytes", len(s.carry))
		}
		got, _ := c.out.Text()
		if !strings.Contains(string(data), "SHabc123:") && got+string(s.carry) != string(data) && !c.out.Truncated() {
			t.Fatalf("lost output: %q from %q", got, data)
		}
	})
}

// decoder reads and validates arguments as the dispatcher does for a
// tool declared with Spec.Lenient.
func decoder[T Checker]() func(json.RawMessage) (any, error) {
	return func(raw json.RawMessage) (any, error) {
		v, err := dispatch.DecodeArgs[T](raw, true)
		if err != nil {
			return nil, err
		}
		if err := v.Validate(); err != nil {
			return nil, err
		}
		return v, nil
	}
}

// FuzzDecodeArgs checks that request decoding and validation never panic
// and that accepted timeouts are within bounds.
func FuzzDecodeArgs(f *testing.F) {
	f.Add([]byte(`{"command":"ls","timeout":1e309}`))
	f.Add([]byte(`{"command":"ls","timeout":-1,"hard_timeout":0.5,"no_change_timeout":3}`))
	f.Add([]byte(`{"session_id":"a","max_output_length":99999999999}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, dec := range []func(json.RawMessage) (any, error){
			decoder[ShellExecArgs](), decoder[BashExecArgs](), decoder[BashOutputArgs](), decoder[ShellWaitArgs](),
		} {
			v, err := dec(raw)
			if err != nil {
				continue
			}
			switch a := v.(type) {
			case ShellExecArgs:
				if d, _ := seconds("timeout", a.Timeout, MaxWait); d < 0 || d > MaxWait {
					t.Fatalf("timeout %v accepted", d)
				}
			case BashExecArgs:
				if a.MaxOutputLength != nil && (*a.MaxOutputLength < 0 || *a.MaxOutputLength > BashKeep) {
					t.Fatalf("max_output_length %d accepted", *a.MaxOutputLength)
				}
			}
		}
	})
}
