package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/audit"
)

// AuditRecord is one record of the server's audit log.
type AuditRecord struct {
	Seq        int64          `json:"seq"`
	Time       time.Time      `json:"time"`
	Actor      string         `json:"actor"`
	Role       string         `json:"role"`
	ClientAddr string         `json:"client_addr"`
	Action     string         `json:"action"`
	Target     string         `json:"target"`
	Sandbox    string         `json:"sandbox"`
	Verdict    string         `json:"verdict"`
	Detail     map[string]any `json:"detail"`
	PrevHash   string         `json:"prev_hash"`
	Hash       string         `json:"hash"`
}

// AuditFilter selects records (GET /v1/audit).
type AuditFilter struct {
	Since   string
	After   int64
	Actor   string
	Action  string
	Sandbox string
	Limit   int
	// Newest asks for the newest records first.
	Newest bool
}

// Audit queries the audit log (agents see only their own records).
func (c *Client) Audit(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("since", f.Since)
	set("actor", f.Actor)
	set("action", f.Action)
	set("sandbox", f.Sandbox)
	if f.After > 0 {
		q.Set("after", strconv.FormatInt(f.After, 10))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Newest {
		q.Set("order", "desc")
	}
	var page struct {
		Records []AuditRecord `json:"records"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/audit", q, nil, &page)
	return page.Records, err
}

// AuditVerification is the chain's state as the server verified it.
type AuditVerification struct {
	OK       bool   `json:"ok"`
	Records  int64  `json:"records"`
	HeadSeq  int64  `json:"head_seq"`
	HeadHash string `json:"head_hash"`
	FirstBad int64  `json:"first_bad,omitempty"`
	Problem  string `json:"problem,omitempty"`
}

// AuditVerify asks the server to verify its hash chain (admin, viewer).
func (c *Client) AuditVerify(ctx context.Context) (AuditVerification, error) {
	var v AuditVerification
	err := c.call(ctx, http.MethodGet, "/v1/audit/verify", nil, nil, &v)
	return v, err
}

// AuditJSON renders a record as one JSON line whose every character is
// printable: encoding/json escapes C0 controls but leaves DEL, the C1
// controls (U+0080–U+009F, which some terminals obey as escape
// introducers) and bidirectional overrides raw; they are \u-escaped here.
func AuditJSON(r AuditRecord) (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	return escapeJSON(string(b)), nil
}

// escapeJSON \u-escapes the runes Escape would show escaped. Outside
// strings a JSON document is ASCII punctuation, so every such rune is
// inside a string, where \uXXXX is valid.
func escapeJSON(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r != utf8.RuneError && !audit.Hidden(r) {
			b.WriteRune(r)
			continue
		}
		if r > 0xFFFF {
			r1, r2 := utf16Surrogates(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

func utf16Surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// Escape shows s with every character audit.Visible escapes written as an
// escape (\n, \x1b, \u202e; invalid UTF-8 as \xNN) and, unlike a
// server-side rendering, backslashes doubled, so an escape the server
// wrote and one typed by a user never look alike on the terminal. Text
// from the server (audit records, error messages) cannot drive it.
func Escape(s string) string {
	return audit.Visible(strings.ReplaceAll(s, `\`, `\\`))
}
