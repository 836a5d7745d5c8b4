// Package redact removes secrets from text before it reaches a log line or an
// audit record. It stops credential leaks through observability: an agent
// that echoes a token, a failing request whose headers are logged, or a URL
// with user:pass@ in it must not leave the secret on disk.
//
// The rules are the SECURITY-RULES.md list: sandhold keys and tickets,
// Authorization / X-API-Key values, AWS access key ids, GitHub tokens, sk-
// style API keys, Slack tokens, JWTs, credentials in URLs (user:pass@host,
// with or without a scheme), PEM blocks and
// NAME_TOKEN=/SECRET=/PASSWORD= assignments. Matching is by shape, so it errs
// towards redacting; it is a second line of defence, not a reason to log
// secrets.
package redact

import (
	"regexp"
	"strings"
)

// Mark replaces a secret.
const Mark = "[REDACTED]"

// rule is one secret shape and what to keep of it.
type rule struct {
	name string
	re   *regexp.Regexp
	// repl is a regexp replacement template; it keeps prefixes (the header
	// name, the key= part) so the redacted text still reads.
	repl string
	// hints: the rule can only match text whose lower-case form contains
	// one of these, so the regexp runs only then (String is on the audit
	// hot path; most text holds no secret).
	hints []string
	// fn, when set, replaces re/repl: for shapes a regexp alone cannot
	// express (a secret recognised by its neighbour).
	fn func(string) string
}

// apply runs the rule on s unconditionally.
func (r rule) apply(s string) string {
	if r.fn != nil {
		return r.fn(s)
	}
	return r.re.ReplaceAllString(s, r.repl)
}

// rules, applied in order. Earlier rules catch containers (PEM, headers)
// before the token shapes inside them.
var rules = []rule{
	// A PEM block, whole; an unterminated private key block to the end.
	{name: "pem", re: regexp.MustCompile(`-----BEGIN [A-Z0-9 ]{1,64}-----[\s\S]*?(?:-----END [A-Z0-9 ]{1,64}-----|\z)`), repl: Mark, hints: []string{"-----begin "}},
	// Authorization header or field, any scheme.
	{name: "authorization", re: regexp.MustCompile(`(?i)(\bauthorization["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token|digest)\s+)?[^\s"',;]+`), repl: "${1}" + Mark, hints: []string{"authorization"}},
	// API key headers (ours and AIO's), and cookies carrying sessions.
	{name: "api key header", re: regexp.MustCompile(`(?i)(\bx-(?:aio-)?api-key["']?\s*[:=]\s*["']?)[^\s"',;]+`), repl: "${1}" + Mark, hints: []string{"api-key"}},
	// sandhold keys and tickets.
	{name: "sandhold key", re: regexp.MustCompile(`\bsh[kt]_[A-Za-z0-9_-]{8,}`), repl: Mark, hints: []string{"shk_", "sht_"}},
	// E2B access tokens (internal/e2b): a sandbox's bearer credential, and
	// the access-token header that carries one.
	{name: "e2b token", re: regexp.MustCompile(`\be2bt_[A-Za-z0-9_.-]{8,}`), repl: Mark, hints: []string{"e2bt_"}},
	{name: "access token header", re: regexp.MustCompile(`(?i)(\bx-access-token["']?\s*[:=]\s*["']?)[^\s"',;]+`), repl: "${1}" + Mark, hints: []string{"access-token"}},
	// An AWS secret access key (40 base64 characters) in text that also
	// holds an access key id: `aws configure set … AKIA… wJalr…`, env
	// dumps, credential files. Runs before the key id rule, which removes
	// the neighbour it recognises the secret by.
	{name: "aws secret beside key id", hints: []string{"akia", "asia"}, fn: redactAWSPair},
	// AWS access key ids (long-term AKIA, temporary ASIA).
	{name: "aws key id", re: regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), repl: Mark, hints: []string{"akia", "asia"}},
	// aws_secret_access_key / aws_session_token followed by its value with
	// =, : or just a space (`aws configure set aws_secret_access_key X`,
	// ~/.aws/credentials).
	{name: "aws secret named", re: regexp.MustCompile(`(?i)(\b(?:aws_secret_access_key|aws_session_token|secretaccesskey|sessiontoken)["']?(?:\s*[=:]\s*|\s+)["']?)[^\s"',;]+`), repl: "${1}" + Mark,
		hints: []string{"aws_secret_access_key", "aws_session_token", "secretaccesskey", "sessiontoken"}},
	// GitHub tokens: classic ghp_/gho_/ghu_/ghs_/ghr_ and fine-grained PATs.
	{name: "github token", re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`), repl: Mark, hints: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	// OpenAI/Anthropic/Stripe style secret keys (sk-..., sk-proj-..., sk-ant-...; sk_live_...).
	{name: "sk key", re: regexp.MustCompile(`\bsk[-_][A-Za-z0-9_-]{16,}`), repl: Mark, hints: []string{"sk-", "sk_"}},
	// Slack tokens.
	{name: "slack token", re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{8,}`), repl: Mark, hints: []string{"xox"}},
	// JWTs: three base64url segments, the first two JSON objects.
	{name: "jwt", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), repl: Mark, hints: []string{"eyj"}},
	// user:password@ in URLs: keep scheme and host.
	{name: "url credentials", re: regexp.MustCompile(`(\b[A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/\s:@]{0,256}:[^/\s@]{1,256}@`), repl: "${1}" + Mark + "@", hints: []string{"://"}},
	// user:password@host[:port] without a scheme, the way a proxy upstream
	// or a connection string is often written (curl -x alice:pw@proxy:3128,
	// UPSTREAM=alice:pw@proxy). Runs after the URL rule, which already
	// handled the scheme'd form.
	{name: "bare credentials", hints: []string{"@"}, fn: redactBareUserinfo},
	// mysql and friends take the password glued to -p (`-phunter5`; a bare
	// -p prompts). -P (port) is another option: the match is case-sensitive.
	{name: "mysql -p", re: regexp.MustCompile(`(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlsh|mariadb|mariadb-dump)\b[^\n;|&]*?\s-p)("[^"]*"|'[^']*'|[^\s"']+)`), repl: "${1}" + Mark,
		hints: []string{"mysql", "mariadb"}},
	// sshpass -p PASSWORD.
	{name: "sshpass -p", re: regexp.MustCompile(`(\bsshpass\b[^\n;|&]*?\s-p\s*)("[^"]*"|'[^']*'|[^\s"']+)`), repl: "${1}" + Mark, hints: []string{"sshpass"}},
	// curl -u user:password (also --user, --proxy-user, -U): keep the user.
	{name: "curl -u", re: regexp.MustCompile(`(\bcurl\b[^\n;|&]*?\s(?:-u|--user|-U|--proxy-user)(?:\s+|=)?["']?[^\s:"']*:)("[^"]*"|'[^']*'|[^\s"']+)`), repl: "${1}" + Mark, hints: []string{"curl"}},
	// --token X, --password=X, --api-key X, -client-secret X … : the value
	// of any option whose name holds a secret word. A value starting with
	// "-" is the next option, not a secret.
	{name: "secret option", re: regexp.MustCompile(`(?i)((?:^|\s)--?(?:[a-z0-9]+[-_])*(?:token|password|passwd|pass|passphrase|secret|api[-_]?key|access[-_]?key|private[-_]?key|credentials?)(?:[-_][a-z0-9]+)*(?:=|\s+))("[^"]*"|'[^']*'|[^\s"'-][^\s"']*)`), repl: "${1}" + Mark,
		hints: []string{"token", "pass", "secret", "key", "credential"}},
	// NAME_TOKEN=value and friends, in env dumps, command lines and query
	// strings; the word may sit inside the name (MY_SECRET_VALUE=).
	{name: "secret assignment", re: regexp.MustCompile(`(?i)(\b[A-Z0-9_]{0,64}(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)(?:_[A-Z0-9_]{0,64})?["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s&"',;]+)`), repl: "${1}" + Mark,
		hints: []string{"token", "secret", "password", "passwd", "passphrase", "api_key", "apikey", "access_key", "private_key", "credential"}},
	// DB_PASS=x, PASS=x, MYSQL_PASS_FILE=… : PASS as a whole word of an
	// environment name (not "bypass=", not "pass: 5").
	{name: "pass assignment", re: regexp.MustCompile(`(?i)(\b(?:[A-Z0-9_]{0,64}_)?PASS(?:_[A-Z0-9_]{0,64})?\s*=\s*)("[^"]*"|'[^']*'|[^\s&"',;]+)`), repl: "${1}" + Mark, hints: []string{"pass"}},
}

// awsSecretShape is a standalone 40-character base64 token, the shape of
// an AWS secret access key.
var awsSecretShape = regexp.MustCompile(`(^|[^A-Za-z0-9/+=])[A-Za-z0-9/+]{40}($|[^A-Za-z0-9/+=])`)

var awsKeyID = regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`)

// redactAWSPair redacts every 40-character base64 token of s when s also
// holds an AWS access key id.
func redactAWSPair(s string) string {
	if !awsKeyID.MatchString(s) {
		return s
	}
	// Adjacent tokens share a separator, so repeat until nothing changes
	// (each pass removes at least one token; bounded by the text length).
	for range len(s)/41 + 1 {
		out := awsSecretShape.ReplaceAllString(s, "${1}"+Mark+"${2}")
		if out == s {
			break
		}
		s = out
	}
	return s
}

// bareUserinfo is user:password@host[:port] standing as its own token:
// group 1 is what precedes it (the start, a space, a quote, =, ( …; Go's
// regexp has no look-behind), group 2 the user, group 3 the password,
// group 4 the host (a name, an IPv4 or a bracketed IPv6 address), group 5
// the port. The user holds no ':' (the first ':' splits user from
// password, as in a URL), the password no '/' or whitespace, neither an
// '@'. What follows the host is checked by redactBareUserinfo.
var bareUserinfo = regexp.MustCompile(`(^|[\s"'` + "`" + `=(<\[{,;|])([A-Za-z0-9._~%+!$*-]{1,128}):([^\s/"'` + "`" + `<>]{1,256})@([A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252}[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]{2,45}(?:%[A-Za-z0-9._~-]{1,32})?\])(:[0-9]{1,5})?`)

// notCredentialUser: a "user" that is a URI scheme written without // or a
// mail header's name; what follows its ':' is an address, not a password
// (mailto:alice@example.com, sip:bob@pbx, To:carol@example.com).
var notCredentialUser = map[string]bool{
	"mailto": true, "sip": true, "sips": true, "xmpp": true, "im": true, "pres": true, "acct": true, "tel": true,
	"email": true, "e-mail": true, "mail": true, "to": true, "from": true, "cc": true, "bcc": true,
	"reply-to": true, "sender": true, "contact": true, "author": true, "committer": true,
}

// bareEnd reports whether the byte at i may follow a bare user:pass@host
// token. ':' not taken as a port, '@', or a host character mean the host
// did not end there (name:tag@sha256:…, a:b@c:d); sentence punctuation
// after the host is fine.
func bareEnd(s string, i int) bool {
	if i >= len(s) {
		return true
	}
	return strings.IndexByte(":@_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", s[i]) < 0
}

// redactBareUserinfo replaces user:password of each bare credential token
// with Mark, keeping host and port, and leaves alone what only looks like
// one: a mail address after a scheme or header name, an image digest
// (name:tag@sha256:…), a time (12:30@room).
func redactBareUserinfo(s string) string {
	if !mayHoldBareUserinfo(s) {
		return s
	}
	ms := bareUserinfo.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		user, pass, host := s[m[4]:m[5]], s[m[6]:m[7]], s[m[8]:m[9]]
		switch {
		case !bareEnd(s, m[1]),
			notCredentialUser[strings.ToLower(user)],
			strings.HasPrefix(strings.ToLower(host), "sha256") || strings.HasPrefix(strings.ToLower(host), "sha512"),
			allDigits(user) && allDigits(pass):
			continue
		}
		b.WriteString(s[last:m[4]])
		b.WriteString(Mark)
		last = m[7] // from the '@' on: host and port stay
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// maxBarePassword is the longest password bareUserinfo takes (its
// {1,256}); mayHoldBareUserinfo looks no further back from an '@'.
const maxBarePassword = 256

// mayHoldBareUserinfo is a cheap necessary condition for bareUserinfo: an
// '@' with a ':' before it and only password bytes between them. Most
// text with an '@' (e-mail addresses, git@host:repo, ssh user@host) has
// none, and skips the regexp (String is on the audit hot path).
func mayHoldBareUserinfo(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '@' {
			continue
		}
		for j := i - 1; j >= 0 && j >= i-maxBarePassword-1; j-- {
			c := s[j]
			if c == ':' {
				return true
			}
			if strings.IndexByte(" \t\n\f\r/\"'`<>", c) >= 0 {
				break
			}
		}
	}
	return false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// String returns s with every secret-shaped substring replaced by Mark.
func String(s string) string {
	if s == "" {
		return s
	}
	lower := strings.ToLower(s)
	for _, r := range rules {
		if !r.mayMatch(lower) {
			continue
		}
		s = r.apply(s)
		lower = strings.ToLower(s)
	}
	return s
}

func (r rule) mayMatch(lower string) bool {
	for _, h := range r.hints {
		if strings.Contains(lower, h) {
			return true
		}
	}
	return false
}

// Contains reports whether s holds anything String would redact.
func Contains(s string) bool {
	lower := strings.ToLower(s)
	for _, r := range rules {
		if r.mayMatch(lower) && r.apply(s) != s {
			return true
		}
	}
	return false
}

// maxDepth bounds the walk of nested values so a hostile, deeply nested
// detail cannot exhaust the stack.
const maxDepth = 32

// Value returns a copy of v (JSON-like: maps, slices, strings, numbers,
// bools) with String applied to every string and map key. Values nested
// deeper than maxDepth are replaced by Mark.
func Value(v any) any { return value(v, 0) }

func value(v any, depth int) any {
	if depth > maxDepth {
		return Mark
	}
	switch x := v.(type) {
	case string:
		return String(x)
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = String(s)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = value(e, depth+1)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if sensitiveKey(k) {
				out[String(k)] = Mark
				continue
			}
			out[String(k)] = value(e, depth+1)
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if sensitiveKey(k) {
				out[String(k)] = Mark
				continue
			}
			out[String(k)] = String(e)
		}
		return out
	default:
		return v
	}
}

// sensitiveKeyParts: a map entry whose key contains one of these holds a
// secret whatever its value looks like.
var sensitiveKeyParts = []string{"authorization", "api_key", "apikey", "api-key", "password", "passwd", "secret", "token", "private_key", "cookie"}

func sensitiveKey(k string) bool {
	lk := strings.ToLower(k)
	for _, p := range sensitiveKeyParts {
		if strings.Contains(lk, p) {
			return true
		}
	}
	return false
}
