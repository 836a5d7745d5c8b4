package auth

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
)

// TestParseCredentialExactBytes: only the scheme and the ASCII space/tab of
// the HTTP grammar are removed; every other byte is part of the key, so a
// valid key with a trailing NBSP, zero-width space, vertical tab, NUL, or in
// another case is not that key.
func TestParseCredentialExactBytes(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newSvc(t)
	_, key, err := s.CreateKey(ctx, Caller{}, "k", RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	ok := []struct{ name, header, value string }{
		{"bearer", "Authorization", "Bearer " + key},
		{"bearer OWS", "Authorization", " \tBearer \t" + key + " \t"},
		{"scheme case", "Authorization", "BEARER " + key},
		{"x-api-key OWS", "X-API-Key", "\t" + key + " "},
	}
	for _, tc := range ok {
		t.Run("accept/"+tc.name, func(t *testing.T) {
			c, err := ParseCredential(http.Header{http.CanonicalHeaderKey(tc.header): {tc.value}}, nil)
			if err != nil || c.Key != key {
				t.Fatalf("got %q, %v", c.Key, err)
			}
			if _, err := s.Authenticate(ctx, "10.9.9.9", c); err != nil {
				t.Fatal(err)
			}
		})
	}
	bad := []struct{ name, value string }{
		{"trailing NBSP", key + "\u00a0"},
		{"leading NBSP", "\u00a0" + key},
		{"trailing zero-width space", key + "\u200b"},
		{"trailing vertical tab", key + "\v"},
		{"trailing form feed", key + "\f"},
		{"trailing NUL", key + "\x00"},
		{"embedded NUL", key[:10] + "\x00" + key[10:]},
		{"trailing CR", key + "\r"},
		{"next line U+0085", key + "\u0085"},
		{"upper case", strings.ToUpper(key)},
		{"lower case", strings.ToLower(key)},
		{"prefix case", "SHK_" + key[4:]},
		{"one char short", key[:len(key)-1]},
	}
	for _, tc := range bad {
		for _, header := range []string{"Authorization", "X-Api-Key", "X-Aio-Api-Key"} {
			t.Run("refuse/"+tc.name+"/"+header, func(t *testing.T) {
				v := tc.value
				if header == "Authorization" {
					v = "Bearer " + v
				}
				c, err := ParseCredential(http.Header{header: {v}}, nil)
				if err == nil {
					_, err = s.Authenticate(ctx, "10.8.8.8", c)
				}
				if fault.KindOf(err) != fault.Unauthorized && fault.KindOf(err) != fault.RateLimited {
					t.Fatalf("got %+v, %v (want 401)", c, err)
				}
			})
		}
	}
}

// TestOddKeysCountTowardLockout: the malformed variants are failures like
// any wrong key (the HTTP layer records parse failures; see api tests).
func TestOddKeysCountTowardLockout(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newSvc(t)
	_, key, err := s.CreateKey(ctx, Caller{}, "k", RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	addr := "10.7.7.7"
	for i := 0; i < DefaultLockoutLimit; i++ {
		c, perr := ParseCredential(http.Header{"Authorization": {"Bearer " + strings.ToUpper(key)}}, nil)
		if perr != nil {
			t.Fatal(perr)
		}
		_, err = s.Authenticate(ctx, addr, c)
	}
	if fault.KindOf(err) != fault.RateLimited || s.Locked(addr) <= 0 {
		t.Fatalf("after %d case-changed keys: %v, locked %v", DefaultLockoutLimit, err, s.Locked(addr))
	}
}

// TestLockoutSparesValidKeys is the lockout tested both ways: a burst of bad
// keys from 127.0.0.1 does not lock out holders of valid keys, and the
// brute-force protection still holds for guessable credentials.
func TestLockoutSparesValidKeys(t *testing.T) {
	ctx := context.Background()
	s, _, clk := newSvc(t)
	_, agentKey, err := s.CreateKey(ctx, Caller{}, "agent", RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	_, adminKey, err := s.CreateKey(ctx, Caller{}, "admin2", RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	opKey := "an-operator-chosen-admin-key-of-40-chars!"
	if err := s.EnsureAdmin(ctx, opKey); err != nil {
		t.Fatal(err)
	}
	const lo = "127.0.0.1"
	for i := 0; i < DefaultLockoutLimit; i++ {
		_, _ = s.Authenticate(ctx, lo, Credential{Key: "buggy-agent-key", Local: true})
	}
	if s.Locked(lo) <= 0 {
		t.Fatal("burst did not lock the address")
	}

	t.Run("generated keys pass", func(t *testing.T) {
		for _, k := range []string{agentKey, adminKey} {
			if _, err := s.Authenticate(ctx, lo, Credential{Key: k}); err != nil {
				t.Fatalf("valid key refused: %v", err)
			}
		}
	})
	t.Run("tickets pass", func(t *testing.T) {
		c, err := s.Authenticate(ctx, lo, Credential{Key: agentKey})
		if err != nil {
			t.Fatal(err)
		}
		tk, _, err := s.IssueTicket(ctx, c, ScopeCDP)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, lo, Credential{Ticket: tk, Scopes: []TicketScope{ScopeCDP}}); err != nil {
			t.Fatalf("ticket refused: %v", err)
		}
	})
	t.Run("local operator key is slowed, not refused", func(t *testing.T) {
		clk.add(lockedProbeInterval)
		if _, err := s.Authenticate(ctx, lo, Credential{Key: opKey, Local: true}); err != nil {
			t.Fatalf("operator refused: %v", err)
		}
		// A second check inside the interval is refused: a local guesser
		// gets one guess per interval.
		if _, err := s.Authenticate(ctx, lo, Credential{Key: opKey + "x", Local: true}); fault.KindOf(err) != fault.RateLimited {
			t.Fatalf("second check inside the interval: %v", err)
		}
		if _, err := s.Authenticate(ctx, lo, Credential{Key: opKey, Local: true}); fault.KindOf(err) != fault.RateLimited {
			t.Fatalf("third check inside the interval: %v", err)
		}
		clk.add(lockedProbeInterval)
		if _, err := s.Authenticate(ctx, lo, Credential{Key: opKey, Local: true}); err != nil {
			t.Fatalf("operator refused after the interval: %v", err)
		}
	})
	t.Run("brute force still locked", func(t *testing.T) {
		clk.add(lockedProbeInterval)
		// Forwarded or remote: a guessable key is not even checked.
		if _, err := s.Authenticate(ctx, lo, Credential{Key: opKey}); fault.KindOf(err) != fault.RateLimited {
			t.Fatalf("non-local guessable key while locked: %v", err)
		}
		// Wrong generated-shape keys get 429 and do not unlock anything.
		for i := 0; i < 5; i++ {
			if _, err := s.Authenticate(ctx, lo, Credential{Key: "shk_" + strings.Repeat("B", 43)}); fault.KindOf(err) != fault.RateLimited {
				t.Fatalf("wrong key while locked: %v", err)
			}
		}
		if s.Locked(lo) <= 0 {
			t.Fatal("lock lifted early")
		}
		const remote = "203.0.113.9"
		for i := 0; i < DefaultLockoutLimit; i++ {
			_, _ = s.Authenticate(ctx, remote, Credential{Key: "guess"})
		}
		if _, err := s.Authenticate(ctx, remote, Credential{Key: opKey}); fault.KindOf(err) != fault.RateLimited {
			t.Fatalf("remote guessable key while locked: %v", err)
		}
		clk.add(time.Minute)
		if _, err := s.Authenticate(ctx, remote, Credential{Key: opKey}); err != nil {
			t.Fatalf("not let back in after the window: %v", err)
		}
	})
}

func TestHighEntropyShape(t *testing.T) {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    Credential
		want bool
	}{
		{Credential{Key: k}, true},
		{Credential{Ticket: "sht_" + k[4:]}, true},
		{Credential{Key: "sht_" + k[4:]}, false},
		{Credential{Key: k[:len(k)-1]}, false},
		{Credential{Key: k[:len(k)-1] + "."}, false},
		{Credential{Key: strings.Repeat("x", 47)}, false},
	} {
		if got := tc.c.highEntropy(); got != tc.want {
			t.Errorf("%+v: %v", tc.c, got)
		}
	}
}
