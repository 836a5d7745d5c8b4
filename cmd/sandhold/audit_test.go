package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/store"
)

// TestAuditTailEscapes: a record whose command holds ESC, a newline and a
// bidi override is printed with those characters escaped and visible, never
// as raw bytes for the terminal to act on; and a tab and a typed backslash-t
// print differently (issue 29: they read the same before).
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
	for _, tg := range []string{"echo a\tb", `echo "a\tb"`} {
		if _, err := audit.New(st, dir).Append(ctx, audit.Entry{Action: "exec.run", Target: tg, Verdict: audit.Allow}); err != nil {
			t.Fatal(err)
		}
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
	if strings.Count(strings.TrimRight(out, "\n"), "\n") != 2 {
		t.Errorf("three records not printed as three lines: %q", out)
	}
	for _, want := range []string{`"target":"echo a\tb"`, `"target":"echo \"a\\tb\""`} {
		if !strings.Contains(out, want) {
			t.Errorf("tail lacks %s: %s", want, out)
		}
	}
	for _, want := range []string{`\u001b[2J`, `\n{\"seq\":99}`, `\u202etxt.exe`, `\u009b`} {
		if !strings.Contains(out, want) {
			t.Errorf("tail lacks %s: %s", want, out)
		}
	}
	if out, _, code := runCLI(t, "audit", "verify"); code != 0 || !strings.Contains(out, "intact") {
		t.Fatalf("verify: %q %d", out, code)
	}
}

// Issue 38: `DELETE FROM audit` plus removing audit.head made `audit
// verify` print "audit chain intact: 0 records" and exit 0. It now exits 1
// and names the anchor that disagrees; an intact chain lists both anchors.
func TestAuditVerifyEmptiedLog(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SANDBOX_DATA_DIR", dir)
	ctx := context.Background()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := audit.New(st, dir).Append(ctx, audit.Entry{Action: "exec.run", Target: "true", Verdict: audit.Allow}); err != nil {
			t.Fatal(err)
		}
	}
	_ = st.Close()
	out, _, code := runCLI(t, "audit", "verify")
	if code != 0 || !strings.Contains(out, "audit chain intact: 3 records") || !strings.Contains(out, "store (audit_head): record 3, agrees; not guarded") ||
		!strings.Contains(out, "head file (audit.head): record 3, agrees") {
		t.Fatalf("verify of an intact log: %d %q", code, out)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM audit`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if err := os.Remove(filepath.Join(dir, audit.HeadFile)); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "audit", "verify")
	if code != 1 || !strings.Contains(errOut, "records 1..3 are missing (log truncated): the store's anchor (audit_head) names record 3") {
		t.Fatalf("verify of an emptied log: %d %q %q", code, out, errOut)
	}
}
