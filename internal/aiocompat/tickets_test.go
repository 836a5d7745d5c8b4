package aiocompat_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
)

// TestAIOTicketFlow: POST /tickets mints a ticket that authenticates one
// GET /auth without a key (an auth_request subrequest), and only one.
func TestAIOTicketFlow(t *testing.T) {
	s := startServer(t)
	st, _, body := s.call("POST", "/tickets", "", nil)
	var tk struct {
		Success   bool   `json:"success"`
		Ticket    string `json:"ticket"`
		ExpiresIn int    `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &tk); err != nil || st != 200 || !tk.Success || tk.Ticket == "" || tk.ExpiresIn <= 0 || tk.ExpiresIn > 30 {
		t.Fatalf("POST /tickets: %d %s", st, body)
	}
	get := func(path string) (int, []byte) {
		t.Helper()
		res, err := http.Get(s.base + path) // no key
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	if st, b := get("/auth"); st != http.StatusUnauthorized {
		t.Fatalf("GET /auth without a key or ticket: %d %s, want 401", st, b)
	}
	st, b := get("/auth?ticket=" + url.QueryEscape(tk.Ticket))
	var who map[string]string
	if err := json.Unmarshal(b, &who); err != nil || st != 200 || who["status"] != "authenticated" || who["role"] != "admin" {
		t.Fatalf("GET /auth with the ticket: %d %s", st, b)
	}
	if st, b := get("/auth?ticket=" + url.QueryEscape(tk.Ticket)); st != http.StatusUnauthorized {
		t.Fatalf("GET /auth with a used ticket: %d %s, want 401", st, b)
	}
}
