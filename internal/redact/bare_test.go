package redact

import (
	"strings"
	"testing"
)

// bareCases: user:pass@host written without a scheme, and the texts that
// only look like it. secret must not survive; keep must; an empty secret
// means the text is left exactly as it was.
var bareCases = []struct {
	name, in, secret, keep string
}{
	{"proxy upstream", "alice:s3cret@proxy.example:3128", "s3cret", "@proxy.example:3128"},
	{"user is gone too", "alice:s3cret@proxy.example:3128", "alice", "proxy.example"},
	{"curl -x", "curl -x alice:s3cret@proxy.example:3128 https://example.com/", "s3cret", "https://example.com/"},
	{"env assignment", "UPSTREAM=alice:s3cret@proxy:3128 ./run", "s3cret", "UPSTREAM="},
	{"json value", `{"server":"alice:s3cret@proxy.example:3128"}`, "s3cret", `{"server":"`},
	{"yaml value", "upstream: alice:s3cret@proxy.example", "s3cret", "upstream: "},
	{"single-label host", "bob:hunter2@db", "hunter2", "@db"},
	{"ipv4 host", "bob:hunter2@10.0.0.5:5432", "hunter2", "@10.0.0.5:5432"},
	{"ipv6 host", "bob:hunter2@[2001:db8::1]:3128", "hunter2", "@[2001:db8::1]:3128"},
	{"ipv6 host with zone", "bob:hunter2@[fe80::1%eth0]:3128", "hunter2", "]:3128"},
	{"path after host", "bob:hunter2@git.example/org/repo.git", "hunter2", "/org/repo.git"},
	{"sentence end", "the upstream is bob:hunter2@proxy.example.", "hunter2", "proxy.example."},
	{"password with @", "bob:p@ss-w0rd@proxy.example:3128", "ss-w0rd", "proxy.example:3128"},
	{"password with :", "bob:pa:ss@proxy.example:3128", "pa:ss", "proxy.example:3128"},
	{"percent-encoded user", "bob%40corp:hunter2@proxy:8080", "hunter2", "proxy:8080"},
	{"after a label without space", "upstream:alice:s3cret@proxy:3128", "s3cret", "@proxy:3128"},
	{"two in a row", "a:pw1@h1 b:pw2@h2", "pw", "@h1 "},
	{"quoted in shell", "export HTTPS_PROXY='alice:s3cret@proxy:3128'", "s3cret", "HTTPS_PROXY='"},
	{"in parentheses", "(alice:s3cret@proxy)", "s3cret", ")"},

	// Not credentials.
	{"e-mail address", "mail alice@example.com about it", "", ""},
	{"git scp-like remote", "git clone git@github.com:org/repo.git", "", ""},
	{"ssh user@host", "ssh -p 2222 alice@host.example", "", ""},
	{"scp target", "scp ./f alice@host.example:/tmp/f", "", ""},
	{"mailto", "see mailto:alice@example.com", "", ""},
	{"sip uri", "call sip:bob@pbx.example", "", ""},
	{"mail header", "To:carol@example.com", "", ""},
	{"image digest", "docker pull nginx:1.25@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "", ""},
	{"time at a place", "meet 12:30@room5", "", ""},
	{"npm alias", "npm i lodash@npm:lodash-es@4.17.21", "", ""},
	{"go module", "go get golang.org/x/sys@v0.30.0", "", ""},
	{"ipv6 address alone", "listen [::1]:8080 and fe80::1", "", ""},
	{"user with path not host", "rsync host:/data/x@y ./", "", ""},
	{"no host after @", "ratio a:b@ then", "", ""},
	{"colon then host-like word continues", "a:b@c:d", "", ""},
	{"already redacted", "[REDACTED]@proxy:3128", "", ""},
}

func TestBareCredentials(t *testing.T) {
	for _, tc := range bareCases {
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
				t.Errorf("changed text that holds no credential: %q -> %q", tc.in, got)
			}
			if String(got) != got {
				t.Errorf("not idempotent: %q -> %q", got, String(got))
			}
			if Contains(tc.in) != (tc.secret != "") {
				t.Errorf("Contains = %v", Contains(tc.in))
			}
		})
	}
}

// TestBareCredentialsInValues: the rule reaches audit details (Value)
// and a URL with a scheme is still handled by the URL rule, once.
func TestBareCredentialsInValues(t *testing.T) {
	out := Value(map[string]any{"server": "alice:s3cret@proxy.example:3128", "url": "http://alice:s3cret@proxy.example:3128"}).(map[string]any)
	if out["server"] != Mark+"@proxy.example:3128" {
		t.Errorf("server: %q", out["server"])
	}
	if out["url"] != "http://"+Mark+"@proxy.example:3128" {
		t.Errorf("url: %q", out["url"])
	}
}

// FuzzBareCredentials puts each credential case between fuzzed words and
// punctuation that may end a token: the password never survives (it may
// stand in the fuzzed words themselves, as plain text: those occurrences
// stay), and the result is stable under a second pass.
func FuzzBareCredentials(f *testing.F) {
	f.Add("curl -x", "https://example.com/")
	f.Add("", "")
	f.Add("UPSTREAM=", ";")
	f.Fuzz(func(t *testing.T, pre, post string) {
		pre, post = words(pre), words(post)
		for _, tc := range bareCases {
			if tc.secret == "" {
				continue
			}
			in := pre + " " + tc.in + " " + post
			got := String(in)
			if strings.Count(got, tc.secret) > strings.Count(pre+" "+post, tc.secret) {
				t.Fatalf("%s: secret survived in %q -> %q", tc.name, in, got)
			}
			if String(got) != got {
				t.Fatalf("%s: not idempotent: %q", tc.name, got)
			}
		}
	})
}

// FuzzBarePrefilter: the cheap check never skips text the regexp would
// match (it is a necessary condition, so skipping cannot keep a secret).
func FuzzBarePrefilter(f *testing.F) {
	for _, tc := range bareCases {
		f.Add(tc.in)
	}
	f.Add("a:b\v@c")
	f.Fuzz(func(t *testing.T, s string) {
		if !mayHoldBareUserinfo(s) && bareUserinfo.MatchString(s) {
			t.Fatalf("prefilter skips %q, which the regexp matches", s)
		}
	})
}

func BenchmarkStringWithAt(b *testing.B) {
	s := "git clone git@github.com:org/repo.git && mail alice@example.com"
	for b.Loop() {
		_ = String(s)
	}
}
