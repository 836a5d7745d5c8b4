package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/sandhold/sandhold/internal/store"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		} else {
			code = 1
		}
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), code
}

// TestKeysCreateWithRateLimits: a key's own rate limits are stored and
// listed; above the server's they are refused.
func TestKeysCreateWithRateLimits(t *testing.T) {
	t.Setenv("SANDBOX_DATA_DIR", t.TempDir())
	t.Setenv("SANDBOX_RATE_LIMITS", "command=100/m")
	// A key's own rate limits: stored, listed; above the server's refused.
	if _, _, code := runCLI(t, "keys", "create", "--name", "slow", "--role", "agent", "--rate-limits", "command=2/m"); code != 0 {
		t.Fatalf("create with rate limits: code %d", code)
	}
	if list, _, _ := runCLI(t, "keys", "list"); !strings.Contains(list, "command=2/m:2") {
		t.Fatalf("list lacks the key's limits: %q", list)
	}
	if _, errOut, code := runCLI(t, "keys", "create", "--name", "fast", "--role", "agent", "--rate-limits", "command=101/m"); code == 0 || !strings.Contains(errOut, "above the server's limit") {
		t.Fatalf("limits above the server's: %q %d", errOut, code)
	}
}

func TestKeysAndAuditVerify(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SANDBOX_DATA_DIR", dir)

	key, _, code := runCLI(t, "keys", "create", "--name", "ci", "--role", "agent")
	key = strings.TrimSpace(key)
	if code != 0 || !strings.HasPrefix(key, "shk_") || len(key) != 47 {
		t.Fatalf("create: %q code %d", key, code)
	}
	list, _, code := runCLI(t, "keys", "list")
	if code != 0 || !strings.Contains(list, "ci") || strings.Contains(list, key) {
		t.Fatalf("list: %q", list)
	}
	id := strings.Fields(strings.Split(list, "\n")[1])[0]
	if out, _, code := runCLI(t, "keys", "revoke", id); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("revoke: %q %d", out, code)
	}
	if _, errOut, code := runCLI(t, "keys", "revoke", "key_nope"); code == 0 || !strings.Contains(errOut, "no such key") {
		t.Fatalf("revoke missing: %q %d", errOut, code)
	}
	if _, _, code := runCLI(t, "keys", "create", "--name", "x", "--role", "root"); code == 0 {
		t.Fatal("bad role accepted")
	}
	out, _, code := runCLI(t, "audit", "verify")
	if code != 0 || !strings.Contains(out, "intact: 2 records") {
		t.Fatalf("verify: %q %d", out, code)
	}
	tail, _, code := runCLI(t, "audit", "tail", "-n", "1")
	if code != 0 || !strings.Contains(tail, `"action":"key.revoke"`) {
		t.Fatalf("tail: %q", tail)
	}

	// Tamper: edit the first record directly in the database.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit SET target='key_other' WHERE seq=1`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	_, errOut, code := runCLI(t, "audit", "verify")
	if code != 1 || !strings.Contains(errOut, "record 1") {
		t.Fatalf("verify after tamper: %q code %d", errOut, code)
	}
}

func TestBadConfigExitsNonZeroNamingTheSetting(t *testing.T) {
	t.Setenv("SANDBOX_DATA_DIR", t.TempDir())
	t.Setenv("SANDBOX_MAX_MEMORY", "lots")
	_, errOut, code := runCLI(t, "serve")
	if code != 2 || !strings.Contains(errOut, "SANDBOX_MAX_MEMORY") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("%q code %d", errOut, code)
	}
}

func TestHelpAndVersion(t *testing.T) {
	out, _, code := runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "serve") {
		t.Fatalf("help: %q %d", out, code)
	}
	out, _, code = runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "sandhold dev") {
		t.Fatalf("version: %q", out)
	}
	if _, _, code := runCLI(t, "nonsense"); code != 2 {
		t.Fatalf("unknown command code %d", code)
	}
}
