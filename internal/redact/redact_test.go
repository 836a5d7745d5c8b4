package redact

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		secret string // must not survive
		keep   string // must survive
	}{
		{"sandhold key", "key is shk_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG ok", "shk_abcdefghij", "key is"},
		{"ticket", "ticket=sht_abcdefghijkl", "sht_abcdefghijkl", "ticket="},
		{"e2b token", "token e2bt_key_1.AbCdEfGhIjKlMnOp-_q ok", "AbCdEfGhIjKl", "token "},
		{"access token header", "X-Access-Token: opaque-value-1", "opaque-value-1", "X-Access-Token: "},
		{"bearer header", "Authorization: Bearer abc.def-123", "abc.def-123", "Authorization: "},
		{"json authorization", `{"authorization":"Basic dXNlcjpwYXNz"}`, "dXNlcjpwYXNz", `"authorization"`},
		{"x-api-key", "X-API-Key: hunter2hunter2", "hunter2", "X-API-Key"},
		{"aio key", "x-aio-api-key=zzzsecretzzz", "zzzsecretzzz", "x-aio-api-key"},
		{"aws", "id AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE", "here"},
		{"github classic", "ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_0123456789", ""},
		{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghijk", "github_pat_11ABC", ""},
		{"openai", "OPENAI sk-proj-abcdefghijklmnop1234", "sk-proj-abcdefghijklmnop1234", "OPENAI"},
		{"anthropic", "sk-ant-api03-abcdefghijklmnopqrstuv", "abcdefghijklmnop", ""},
		{"slack", "xoxb-1234567890-abcdefghij", "xoxb-1234567890", ""},
		{"jwt", "tok eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig-nature_x", "eyJzdWIiOiIxMjM0In0", "tok"},
		{"url creds", "git clone https://alice:s3cr3t@example.com/repo.git", "s3cr3t", "example.com/repo.git"},
		{"url user only kept", "https://alice@example.com/", "", "alice@example.com"},
		{"pem", "x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\ny", "MIIEow", "\ny"},
		{"unterminated pem", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "b3BlbnNzaC1rZXk", ""},
		{"token assignment", "GITHUB_TOKEN=abc123 make", "abc123", "GITHUB_TOKEN="},
		{"quoted password", `DB_PASSWORD="p a s s"`, "p a s s", "DB_PASSWORD="},
		{"query string", "?access_token=qqq&x=1", "qqq", "&x=1"},
		{"plain text untouched", "hello world: ls -la /workspace", "", "hello world: ls -la /workspace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := String(tc.in)
			if tc.secret != "" && strings.Contains(got, tc.secret) {
				t.Errorf("secret survived: %q", got)
			}
			if tc.secret != "" && !strings.Contains(got, Mark) {
				t.Errorf("no mark in %q", got)
			}
			if tc.keep != "" && !strings.Contains(got, tc.keep) {
				t.Errorf("lost %q: %q", tc.keep, got)
			}
			if tc.secret == "" && got != tc.in {
				t.Errorf("changed clean text: %q -> %q", tc.in, got)
			}
		})
	}
}

func TestValue(t *testing.T) {
	in := map[string]any{
		"cmd":      "curl -H 'Authorization: Bearer abcdef' https://x",
		"password": "plain",
		"nested":   []any{map[string]any{"k": "AKIAIOSFODNN7EXAMPLE"}},
		"n":        3,
	}
	out := Value(in).(map[string]any)
	if out["password"] != Mark {
		t.Errorf("sensitive key kept: %v", out["password"])
	}
	if s := out["cmd"].(string); strings.Contains(s, "abcdef") {
		t.Errorf("cmd: %q", s)
	}
	if s := out["nested"].([]any)[0].(map[string]any)["k"]; s != Mark {
		t.Errorf("nested: %v", s)
	}
	if out["n"] != 3 {
		t.Errorf("number changed")
	}
	if in["password"] != "plain" {
		t.Errorf("input mutated")
	}
	// Depth cap.
	var deep any = "x"
	for i := 0; i < 100; i++ {
		deep = []any{deep}
	}
	_ = Value(deep)
}

func FuzzString(f *testing.F) {
	f.Add("Authorization: Bearer shk_abcdefghijklmnop")
	f.Add("https://u:p@h/")
	f.Add("curl -x alice:s3cret@proxy.example:3128 x")
	f.Add("nginx:1.25@sha256:0123 mailto:a@b.c bob:p@ss@[::1]:80.")
	f.Add("AWS_SECRET_ACCESS_KEY=abc eyJhbGciOi.eyJzdWIiOi.x")
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		// The hint prefilter never skips a rule that would have matched.
		if want := bruteForce(s); out != want {
			t.Fatalf("prefilter changed the result for %q: %q, want %q", s, out, want)
		}
		// Idempotent: redacting twice changes nothing more.
		if String(out) != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, String(out))
		}
	})
}

func TestSlogHandler(t *testing.T) {
	var buf strings.Builder
	l := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil)))
	l = l.With("hdr", "Authorization: Bearer zzzsecret1")
	l.Info("key shk_abcdefghijklmnopqrstu used", "err", errors.New("dial https://u:pw123@h/"),
		"api_key", "plain", slog.Group("g", "cmd", "AWS AKIAIOSFODNN7EXAMPLE"), "n", 5)
	out := buf.String()
	for _, secret := range []string{"zzzsecret1", "shk_abcdefghijklmnopqrstu", "pw123", "plain", "AKIAIOSFODNN7EXAMPLE"} {
		if strings.Contains(out, secret) {
			t.Errorf("log kept %q: %s", secret, out)
		}
	}
	if !strings.Contains(out, `"n":5`) {
		t.Errorf("lost a number: %s", out)
	}
}

func BenchmarkStringClean(b *testing.B) {
	s := "python3 -c 'print(sum(range(100)))' > /workspace/out.txt"
	for b.Loop() {
		_ = String(s)
	}
}

// bruteForce applies every rule unconditionally: the reference for String.
func bruteForce(s string) string {
	for _, r := range rules {
		s = r.apply(s)
	}
	return s
}

func TestEveryRuleHasLowercaseHints(t *testing.T) {
	for _, r := range rules {
		if len(r.hints) == 0 {
			t.Errorf("rule %s has no hints: it would never run", r.name)
		}
		for _, h := range r.hints {
			if h != strings.ToLower(h) {
				t.Errorf("rule %s hint %q is not lower case", r.name, h)
			}
		}
	}
}

func TestPrefilterMatchesBruteForce(t *testing.T) {
	for _, s := range []string{
		"Authorization: Bearer abc", "x-api-key: k", "shk_abcdefghijk", "AKIAIOSFODNN7EXAMPLE",
		"ghp_0123456789abcdefghijABCD", "sk-proj-abcdefghijklmnop12", "xoxb-1234567890-ab",
		"eyJhbGciOiJI.eyJzdWIiOiIx.sig", "https://u:p@h/", "-----BEGIN X-----\nabc\n-----END X-----",
		"MY_TOKEN=1 PASSWORD=2", "nothing here",
	} {
		if got, want := String(s), bruteForce(s); got != want {
			t.Errorf("String(%q) = %q, want %q", s, got, want)
		}
	}
}
