package console

import (
	"encoding/json"
	"net/http"
	"testing"
)

// ticketOf mints a ticket of scope with the agent's key (or the cookie
// and CSRF token in hdr) and returns its text, or "" with the status.
func (e *env) ticketOf(scope string, hdr ...string) (string, int) {
	e.t.Helper()
	if len(hdr) == 0 {
		hdr = []string{"X-API-Key", e.agentKey}
	}
	rec := e.do(http.MethodPost, "/v1/tickets", `{"scope":"`+scope+`"}`, hdr...)
	if rec.Code != http.StatusCreated {
		return "", rec.Code
	}
	var got struct {
		Data struct {
			Ticket string `json:"ticket"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		e.t.Fatal(err)
	}
	return got.Data.Ticket, rec.Code
}

// A ticket of scope console signs a browser in without the key entering
// it; a ticket of any other scope does not, and a console session mints
// no console ticket (sessions would renew themselves forever).
func TestSignInWithAConsoleTicket(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		name  string
		scope string
		want  int
	}{
		{"console ticket", "console", http.StatusOK},
		{"terminal ticket", "terminal", http.StatusUnauthorized},
		{"preview ticket", "preview", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk, code := e.ticketOf(tc.scope)
			if tk == "" {
				t.Fatalf("mint: %d", code)
			}
			rec := e.do(http.MethodPost, SessionPath, `{"ticket":"`+tk+`"}`)
			if rec.Code != tc.want {
				t.Fatalf("sign in with a %s ticket: %d %s, want %d", tc.scope, rec.Code, rec.Body, tc.want)
			}
			if tc.want != http.StatusOK {
				return
			}
			cookies := rec.Result().Cookies()
			if len(cookies) != 1 {
				t.Fatalf("cookies %v", cookies)
			}
			var got struct {
				Data Info `json:"data"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &got)
			if got.Data.KeyID != e.agentID {
				t.Fatalf("session of %q, want the agent's", got.Data.KeyID)
			}
			cookie := cookies[0].Name + "=" + cookies[0].Value
			// Used once only.
			if again := e.do(http.MethodPost, SessionPath, `{"ticket":"`+tk+`"}`); again.Code != http.StatusUnauthorized {
				t.Fatalf("a used console ticket: %d", again.Code)
			}
			// The session mints one-request tickets, but no console ticket.
			if tk, code := e.ticketOf("terminal", "Cookie", cookie, CSRFHeader, got.Data.CSRFToken); tk == "" {
				t.Fatalf("session minting a terminal ticket: %d", code)
			}
			if _, code := e.ticketOf("console", "Cookie", cookie, CSRFHeader, got.Data.CSRFToken); code != http.StatusForbidden {
				t.Fatalf("session minting a console ticket: %d, want 403", code)
			}
		})
	}
	if rec := e.do(http.MethodPost, SessionPath, `{"key":"`+e.agentKey+`","ticket":"sht_x"}`); rec.Code != http.StatusUnprocessableEntity && rec.Code != http.StatusBadRequest {
		t.Fatalf("key and ticket together: %d", rec.Code)
	}
}
