package template

import "testing"

// TestPolicyNameAndSplitRecorded: the name a policy's template rules
// match, for what a client writes, and the name and digest of what a
// sandbox records.
func TestPolicyNameAndSplitRecorded(t *testing.T) {
	const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for in, want := range map[string]string{
		"": "host", "host": "host", "host:latest": "host",
		"py": "py:latest", "py:3.12": "py:3.12", "py:3.12@" + d: "py:3.12",
		d: d, "Not A Ref": "Not A Ref",
	} {
		if got := PolicyName(in); got != want {
			t.Errorf("PolicyName(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string][2]string{
		"": {"host", ""}, "py:3.12@" + d: {"py:3.12", d}, d: {"", d},
	} {
		if name, digest := SplitRecorded(in); name != want[0] || digest != want[1] {
			t.Errorf("SplitRecorded(%q) = %q, %q; want %q, %q", in, name, digest, want[0], want[1])
		}
	}
}
