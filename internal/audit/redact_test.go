package audit

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandhold/sandhold/internal/store"
)

// TestSecretsNeverReachTheDatabase appends records carrying issue 11's
// secret shapes (in the target and in the detail) and then reads every
// file of the data dir — the database, its WAL, the head file — byte for
// byte: no secret may be there. Redaction happens before hashing, so the
// chain still verifies.
func TestSecretsNeverReachTheDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	lg := New(st, dir)
	cases := map[string]string{
		"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "aws configure set AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AKIAIOSFODNN7EXAMPLE":                     "id AKIAIOSFODNN7EXAMPLE",
		"hunter5":                                  "mysql -uroot -phunter5",
		"hunter6":                                  "curl -u admin:hunter6 https://x",
		"tokhunter7":                               "tool --token tokhunter7",
		"pwhunter8":                                "tool --password pwhunter8",
		"dbhunter9":                                "export DB_PASS=dbhunter9",
		"sechunter10":                              "MY_SECRET_THING=sechunter10",
		"awshunter11":                              "aws_secret_access_key awshunter11",
		"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC":         "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
	}
	for _, cmd := range cases {
		if _, err := lg.Append(ctx, Entry{Action: "exec.run", Target: cmd, Verdict: Allow,
			Detail: map[string]any{"command": cmd, "argv": []any{"sh", "-c", cmd}}}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := lg.Verify(ctx); err != nil || !res.OK {
		t.Fatalf("verify: %+v %v", res, err)
	}
	// Read while open (the WAL holds the records) and after closing.
	check := func(when string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		files := 0
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			files++
			for secret := range cases {
				if bytes.Contains(b, []byte(secret)) {
					t.Errorf("%s: %s holds %q", when, e.Name(), secret)
				}
			}
		}
		if files == 0 {
			t.Fatalf("%s: no files read", when)
		}
	}
	check("open")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	check("closed")
}
