package audit

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
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

func TestEscape(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "ls -la /workspace", "ls -la /workspace"},
		{"tab", "echo a\tb", `echo a\tb`},
		{"typed backslash-t", `echo "a\tb"`, `echo "a\\tb"`},
		{"backslash alone", `C:\dir`, `C:\\dir`},
		{"newline", "a\nb", `a\nb`},
		{"typed backslash-n", `a\nb`, `a\\nb`},
		{"escape sequence", "\x1b[2J", `\x1b[2J`},
		{"typed escape text", `\x1b[2J`, `\\x1b[2J`},
		{"bidi", "a\u202eb", `a\u202eb`},
		{"invalid utf-8", "a\xffb", `a\xffb`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Escape(tc.in); got != tc.want {
				t.Fatalf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// unescape reads Escape's output back; the fuzz test uses it to show that
// Escape loses nothing (two strings never render alike).
func unescape(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			t.Fatalf("dangling backslash in %q", s)
		}
		i++
		hex := func(n int) uint32 {
			if i+1+n > len(s) {
				t.Fatalf("short escape in %q", s)
			}
			v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
			if err != nil {
				t.Fatalf("bad escape in %q: %v", s, err)
			}
			i += n
			return uint32(v) // #nosec G115 -- parsed with bitSize 32
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'x':
			b.WriteByte(byte(hex(2))) // #nosec G115 -- two hex digits
		case 'u':
			b.WriteRune(rune(hex(4))) // #nosec G115 -- four hex digits
		case 'U':
			b.WriteRune(rune(hex(8))) // #nosec G115 -- a code point, at most 0x10ffff
		default:
			t.Fatalf("unknown escape \\%c in %q", s[i], s)
		}
	}
	return b.String()
}

func FuzzEscape(f *testing.F) {
	f.Add("echo a\tb")
	f.Add(`echo "a\tb"`)
	f.Add("\\x1b\x1b\u202e\xff\\")
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		for _, r := range out {
			if Hidden(r) {
				t.Fatalf("hidden %U survived in %q", r, out)
			}
		}
		if back := unescape(t, out); back != s {
			t.Fatalf("Escape(%q) = %q reads back as %q", s, out, back)
		}
	})
}

// Issue 29 row 9: the API returned Visible's rendering, where a tab and a
// typed backslash-t read the same. Records keep the exact strings (the
// hash covers them), Query returns them, and the renderings for people
// (JSONLine, Escape) tell them apart and hide no control character.
func TestRecordsKeepExactStringsRenderingsTellThemApart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	lg := New(st, dir)
	targets := []string{"echo a\tb", `echo "a\tb"`, "echo ok\x1b[2J\n{\"seq\":1}\u202eexe.txt"}
	for _, tg := range targets {
		if _, err := lg.Append(ctx, Entry{Action: "exec.run", Target: tg, Verdict: Allow,
			Detail: map[string]any{"cmd\u202e": []any{tg, map[string]any{"x": "\x1b]0;title\a"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := lg.Query(ctx, Filter{})
	if err != nil || len(recs) != len(targets) {
		t.Fatalf("query: %v %d", err, len(recs))
	}
	seen := map[string]string{}
	for i, r := range recs {
		if r.Target != targets[i] {
			t.Fatalf("record %d's target = %q, want exactly %q", r.Seq, r.Target, targets[i])
		}
		line, err := JSONLine(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range line {
			if Hidden(c) {
				t.Fatalf("JSONLine keeps %U: %q", c, line)
			}
		}
		var back Record
		if err := json.Unmarshal([]byte(line), &back); err != nil || back.Target != r.Target || back.Detail["cmd\u202e"].([]any)[0] != r.Target {
			t.Fatalf("JSONLine %s decodes to %q (%v)", line, back.Target, err)
		}
		shown := Escape(r.Target)
		if prev, dup := seen[shown]; dup {
			t.Fatalf("%q and %q both render as %q", prev, r.Target, shown)
		}
		seen[shown] = r.Target
	}
	if res, err := lg.Verify(ctx); err != nil || !res.OK {
		t.Fatalf("verify: %+v %v", res, err)
	}
}
