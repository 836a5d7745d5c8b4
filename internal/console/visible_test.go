package console_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
)

// TestVisibleMatchesAudit: the console's visible(), escaped() and
// escapedJSON() (web/src/visible.ts) escape exactly what audit.Visible,
// audit.Escape and audit.JSONLine escape, the same way, so a record reads
// the same in the console as in `sandhold audit tail`.
func TestVisibleMatchesAudit(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the console's TypeScript is checked with Node.js 18+")
	}
	web, err := filepath.Abs(filepath.Join("..", "..", "web"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "esbuild", "package.json")); err != nil {
		t.Skip("esbuild is not installed: run `npm ci --prefix web` (make deps does)")
	}
	cases := []string{
		"plain text", "ls -la /workspace", `back\slash \x1b stays`, "é 中文 🙂",
		"a\nb\tc\rd", "\x1b[2Jcleared", "\x00nul", "del\x7f", "c1 \u0085 \u009b[31m",
		"bidi \u202eevil\u202c", "\u2066isolate\u2069", "\u200e\u200f\u061c marks", "zero\u200bwidth\u200d", "soft\u00adhyphen",
		"\ufeffbom", "tag \U000e0041\U000e007f", "line\u2028para\u2029", "\u0600 arabic number sign", "\U0001d173 music format",
		"echo a\tb", `echo "a\tb"`, `C:\dir\x1b`, "quote \" and <html> & amp",
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join("e2e", "visible-check.mjs"))
	cmd.Dir = web
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node visible-check.mjs: %v", err)
	}
	var got struct{ Visible, Escaped, JSON []string }
	if err := json.Unmarshal(out, &got); err != nil || len(got.Visible) != len(cases) || len(got.Escaped) != len(cases) || len(got.JSON) != len(cases) {
		t.Fatalf("answer %q: %v", out, err)
	}
	seen := map[string]string{}
	for i, c := range cases {
		if want := audit.Visible(c); got.Visible[i] != want {
			t.Errorf("%q: console's visible() shows %q, audit.Visible %q", c, got.Visible[i], want)
		}
		if want := audit.Escape(c); got.Escaped[i] != want {
			t.Errorf("%q: console's escaped() shows %q, audit.Escape %q", c, got.Escaped[i], want)
		}
		if prev, dup := seen[got.Escaped[i]]; dup {
			t.Errorf("%q and %q both show as %q", prev, c, got.Escaped[i])
		}
		seen[got.Escaped[i]] = c
		var back string
		if err := json.Unmarshal([]byte(got.JSON[i]), &back); err != nil || back != c {
			t.Errorf("%q: escapedJSON %s reads back as %q (%v)", c, got.JSON[i], back, err)
		}
		for _, r := range got.JSON[i] {
			if audit.Hidden(r) {
				t.Errorf("%q: escapedJSON keeps %U raw", c, r)
			}
		}
	}
}
