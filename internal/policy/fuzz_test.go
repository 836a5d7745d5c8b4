package policy

import (
	"encoding/json"
	"testing"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// FuzzParse feeds arbitrary documents: Parse never panics, and whatever it
// accepts encodes, parses again to the same decisions, and decides.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"roles":{"agent":{"allow_up_to":"medium","commands":{"deny":["rm*"]},"paths":{"deny":["/etc/**"]}}}}`))
	f.Add([]byte(`{"roles":{},"keys":{"k":{"tools":{"file.*":"approve"},"rate_limits":{"exec":{"per_minute":1}}}}}`))
	f.Add([]byte(`{"roles":{"viewer":{"approve_up_to":"none"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := Parse(b)
		if err != nil {
			return
		}
		again, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("accepted document does not encode: %v", err)
		}
		if _, err := Parse(again); err != nil {
			t.Fatalf("re-encoded document refused: %v (%s)", err, again)
		}
		for _, r := range doc.Roles {
			for _, risk := range []guard.Risk{guard.Safe, guard.Medium, guard.Dangerous} {
				_, _ = Evaluate(r, "exec.run", dispatch.Assessment{Risk: risk, Names: []string{"rm"}, Paths: []string{"/etc/passwd"}})
			}
		}
	})
}
