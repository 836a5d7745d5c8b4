package audit

import (
	"context"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/store"
)

func TestVisible(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "ls -la /workspace", "ls -la /workspace"},
		{"backslash kept", `printf 'a\nb'`, `printf 'a\nb'`},
		{"newline", "echo a\necho b", `echo a\necho b`},
		{"fake record line", "x\n{\"seq\":9}", `x\n{"seq":9}`},
		{"carriage return", "safe\rrm -rf /", `safe\rrm -rf /`},
		{"tab", "a\tb", `a\tb`},
		{"clear screen", "echo \x1b[2J", `echo \x1b[2J`},
		{"bell and NUL", "\a\x00", `\x07\x00`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI", "a\u009b2J", `a\u009b2J`},
		{"bidi override", "echo \u202egnp.exe", `echo \u202egnp.exe`},
		{"bidi isolates", "\u2066x\u2069", `\u2066x\u2069`},
		{"rtl mark", "a\u200fb\u061c", `a\u200fb\u061c`},
		{"zero width", "r\u200bm", `r\u200bm`},
		{"bom", "\ufeffx", `\ufeffx`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"tag character", "a\U000E0041", `a\U000e0041`},
		{"invalid utf-8", "a\xffb", `a\xffb`},
		{"unicode text kept", "naïve — 日本語 ✓", "naïve — 日本語 ✓"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Visible(tc.in); got != tc.want {
				t.Fatalf("Visible(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzVisible(f *testing.F) {
	f.Add("echo \x1b[2J\u202e\n")
	f.Add("plain")
	f.Fuzz(func(t *testing.T, s string) {
		out := Visible(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q", s)
		}
		for _, r := range out {
			if Hidden(r) {
				t.Fatalf("hidden %U survived in %q", r, out)
			}
		}
		if !needsEscape(s) && out != s {
			t.Fatalf("clean text changed: %q -> %q", s, out)
		}
	})
}

// TestRecordsStoredRawShownEscaped: the record keeps the real bytes (and
// its hash covers them); Display escapes every string, detail included.
func TestRecordsStoredRawShownEscaped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	lg := New(st, dir)
	cmd := "echo ok\x1b[2J\n{\"seq\":1}\u202eexe.txt"
	if _, err := lg.Append(ctx, Entry{Action: "exec.run", Target: cmd, Verdict: Allow,
		Detail: map[string]any{"cmd\u202e": []any{"a\nb", map[string]any{"x": "\x1b]0;title\a"}}}}); err != nil {
		t.Fatal(err)
	}
	recs, err := lg.Query(ctx, Filter{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("query: %v %d", err, len(recs))
	}
	if recs[0].Target != cmd {
		t.Fatalf("stored target changed: %q", recs[0].Target)
	}
	if res, err := lg.Verify(ctx); err != nil || !res.OK {
		t.Fatalf("verify: %+v %v", res, err)
	}
	d := recs[0].Display()
	all := d.Target + " " + flatten(d.Detail)
	for _, r := range all {
		if r != ' ' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf)) {
			t.Fatalf("rendering keeps %U: %q", r, all)
		}
	}
	for _, want := range []string{`\x1b[2J`, `\n{"seq":1}`, `\u202e`, `a\nb`, `\x07`} {
		if !strings.Contains(all, want) {
			t.Errorf("rendering lacks %q: %q", want, all)
		}
	}
	if d.Hash != recs[0].Hash {
		t.Fatal("display changed the hash")
	}
}

func flatten(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, flatten(e))
		}
		return strings.Join(parts, " ")
	case map[string]any:
		var parts []string
		for k, e := range x {
			parts = append(parts, k, flatten(e))
		}
		return strings.Join(parts, " ")
	}
	return ""
}
