package guard

import (
	"encoding/json"
	"testing"
)

// FuzzClassify checks the guard's contract on arbitrary input: it never
// panics (the recover in Classify would report "internal-error", which the
// fuzzer treats as a failure), it is deterministic, its risk is always a
// valid tier, and Dynamic implies Dangerous.
func FuzzClassify(f *testing.F) {
	for _, tc := range classifyCases {
		if len(tc.cmd) < 4096 {
			f.Add(tc.cmd)
		}
	}
	for _, s := range []string{
		"$(", "${", "<<EOF", "bash <<EOF\n$(", "a=(", "f() {", "`", "$'\\x", "$'\\u{", "{a,b", "{1..3}{a,b}",
		"sudo -u", "env -S", "xargs -I", "find -exec", "bash -c", "eval", "alias a=a; a", "alias a=b b=a; a",
		"x() { x | x & }; x", "curl -o", "wget -O", "python -c", "perl -e", "exec 3<>/dev/tcp/",
		`perl -e 'system(q{`, `perl -e 'qx(`, `ruby -e '%x[`, `python3 -c 'os.system(["`, `python3 -c 'exec("""`,
		`awk '{print | "`, `awk '"x" | getline`, "xargs -0 rm <<< ", "find / -exec rm {} +", "echo a | xargs -I{} x {}",
	} {
		f.Add(s)
	}
	g := New(Config{})
	f.Fuzz(func(t *testing.T, s string) {
		v := g.Classify(s)
		for _, r := range v.Rules {
			if r == RuleInternal {
				t.Fatalf("Classify(%q) panicked: %v", s, v.Reasons)
			}
		}
		if !v.Risk.Valid() {
			t.Fatalf("Classify(%q): invalid risk %d", s, v.Risk)
		}
		if v.Dynamic && v.Risk != Dangerous {
			t.Fatalf("Classify(%q): dynamic but %v", s, v.Risk)
		}
		a, _ := json.Marshal(v)
		b, _ := json.Marshal(g.Classify(s))
		if string(a) != string(b) {
			t.Fatalf("Classify(%q) not deterministic:\n%s\n%s", s, a, b)
		}
	})
}
