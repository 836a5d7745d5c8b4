package main

import (
	"context"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/store"
)

// TestAuditTailEscapes: a record whose command holds ESC, a newline and a
// bidi override is printed with those characters escaped and visible, never
// as raw bytes for the terminal to act on.
func TestAuditTailEscapes(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SANDBOX_DATA_DIR", dir)
	ctx := context.Background()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := "echo hi\x1b[2J\n{\"seq\":99}\u202etxt.exe\u009b"
	if _, err := audit.New(st, dir).Append(ctx, audit.Entry{Action: "exec.run", Target: cmd, Verdict: audit.Allow,
		Detail: map[string]any{"argv": []any{"sh", "-c", cmd}}}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	out, errOut, code := runCLI(t, "audit", "tail", "-n", "5")
	if code != 0 {
		t.Fatalf("tail: %d %s", code, errOut)
	}
	for _, raw := range []string{"\x1b", "\u202e", "\u009b"} {
		if strings.Contains(out, raw) {
			t.Errorf("tail printed raw %q: %q", raw, out)
		}
	}
	if strings.Count(strings.TrimRight(out, "\n"), "\n") != 0 {
		t.Errorf("one record printed as several lines: %q", out)
	}
	for _, want := range []string{`\\x1b[2J`, `\\n{\"seq\":99}`, `\\u202etxt.exe`, `\\u009b`} {
		if !strings.Contains(out, want) {
			t.Errorf("tail lacks %s: %s", want, out)
		}
	}
	if out, _, code := runCLI(t, "audit", "verify"); code != 0 || !strings.Contains(out, "intact") {
		t.Fatalf("verify: %q %d", out, code)
	}
}
