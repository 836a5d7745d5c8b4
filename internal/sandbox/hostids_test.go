package sandbox

import "testing"

// TestThisHostsIDsAreApart: no local account, group or subordinate range
// of this host falls among the sandboxes' host ids.
func TestThisHostsIDsAreApart(t *testing.T) {
	if err := checkHostIDs(hostIDFiles); err != nil {
		t.Fatalf("this host: %v", err)
	}
}
