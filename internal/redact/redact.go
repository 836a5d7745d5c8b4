// Package redact removes secrets from text before it reaches a log line or an
// audit record. It stops credential leaks through observability: an agent
// that echoes a token, a failing request whose headers are logged, or a URL
// with user:pass@ in it must not leave the secret on disk.
//
// The rules are the SECURITY-RULES.md list: sandhold keys and tickets,
// Authorization / X-API-Key values, AWS access key ids, GitHub tokens, sk-
// style API keys, Slack tokens, JWTs, credentials in URLs, PEM blocks and
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
}

// rules, applied in order. Earlier rules catch containers (PEM, headers)
// before the token shapes inside them.
var rules = []rule{
	// A PEM block, whole; an unterminated private key block to the end.
	{"pem", regexp.MustCompile(`-----BEGIN [A-Z0-9 ]{1,64}-----[\s\S]*?(?:-----END [A-Z0-9 ]{1,64}-----|\z)`), Mark, []string{"-----begin "}},
	// Authorization header or field, any scheme.
	{"authorization", regexp.MustCompile(`(?i)(\bauthorization["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token|digest)\s+)?[^\s"',;]+`), "${1}" + Mark, []string{"authorization"}},
	// API key headers (ours and AIO's), and cookies carrying sessions.
	{"api key header", regexp.MustCompile(`(?i)(\bx-(?:aio-)?api-key["']?\s*[:=]\s*["']?)[^\s"',;]+`), "${1}" + Mark, []string{"api-key"}},
	// sandhold keys and tickets.
	{"sandhold key", regexp.MustCompile(`\bsh[kt]_[A-Za-z0-9_-]{8,}`), Mark, []string{"shk_", "sht_"}},
	// AWS access key ids (long-term AKIA, temporary ASIA).
	{"aws key id", regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), Mark, []string{"akia", "asia"}},
	// GitHub tokens: classic ghp_/gho_/ghu_/ghs_/ghr_ and fine-grained PATs.
	{"github token", regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`), Mark, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	// OpenAI/Anthropic/Stripe style secret keys (sk-..., sk-proj-..., sk-ant-...; sk_live_...).
	{"sk key", regexp.MustCompile(`\bsk[-_][A-Za-z0-9_-]{16,}`), Mark, []string{"sk-", "sk_"}},
	// Slack tokens.
	{"slack token", regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{8,}`), Mark, []string{"xox"}},
	// JWTs: three base64url segments, the first two JSON objects.
	{"jwt", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), Mark, []string{"eyj"}},
	// user:password@ in URLs: keep scheme and host.
	{"url credentials", regexp.MustCompile(`(\b[A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/\s:@]{0,256}:[^/\s@]{1,256}@`), "${1}" + Mark + "@", []string{"://"}},
	// NAME_TOKEN=value and friends, in env dumps, command lines and query strings.
	{"secret assignment", regexp.MustCompile(`(?i)(\b[A-Z0-9_]{0,64}(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY)["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s&"',;]+)`), "${1}" + Mark, []string{"token", "secret", "password", "passwd", "api_key", "apikey", "access_key", "private_key"}},
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
		s = r.re.ReplaceAllString(s, r.repl)
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
		if r.mayMatch(lower) && r.re.MatchString(s) {
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
