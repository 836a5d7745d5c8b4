package e2b

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

func newTokens(t *testing.T) *tokens {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &tokens{st: st}
}

// TestTokens: a token verifies for the purpose, key and sandbox it was
// minted for, and nothing else; the secret survives a new service on the
// same store (a restart), and a server with another secret refuses it.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	tk := newTokens(t)
	tok, err := tk.mint(ctx, purposeEnvd, "key_a", "sb1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, tokenPrefix+"key_a.") {
		t.Fatalf("token shape %q", tok)
	}
	if k, err := tk.verify(ctx, purposeEnvd, tok, "sb1"); err != nil || k != "key_a" {
		t.Fatalf("verify: %q %v", k, err)
	}
	mac := tok[strings.LastIndexByte(tok, '.')+1:]
	for _, tc := range []struct{ name, purpose, token, sandbox string }{
		{"another sandbox", purposeEnvd, tok, "sb2"},
		{"another purpose", purposeTraffic, tok, "sb1"},
		{"another key named", purposeEnvd, tokenPrefix + "key_b." + mac, "sb1"},
		{"a changed mac", purposeEnvd, tok[:len(tok)-2] + "AA", "sb1"},
		{"no prefix", purposeEnvd, strings.TrimPrefix(tok, tokenPrefix), "sb1"},
		{"no key", purposeEnvd, tokenPrefix + "." + mac, "sb1"},
		{"no sandbox", purposeEnvd, tok, ""},
		{"empty", purposeEnvd, "", "sb1"},
		{"an admin key", purposeEnvd, "shk_" + strings.Repeat("a", 43), "sb1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tk.verify(ctx, tc.purpose, tc.token, tc.sandbox); !errors.Is(err, errBadToken) {
				t.Fatalf("verify: %v, want errBadToken", err)
			}
		})
	}
	again := &tokens{st: tk.st}
	if k, err := again.verify(ctx, purposeEnvd, tok, "sb1"); err != nil || k != "key_a" {
		t.Fatalf("after a restart: %q %v", k, err)
	}
	other := newTokens(t)
	if _, err := other.verify(ctx, purposeEnvd, tok, "sb1"); !errors.Is(err, errBadToken) {
		t.Fatalf("another server's secret: %v", err)
	}
}

// TestURLSignatureMatchesTheSDK: the vectors are what the SDK's own
// getSignature (e2b 2.51.0, sandbox/signature.ts) returned for these
// inputs.
func TestURLSignatureMatchesTheSDK(t *testing.T) {
	for _, tc := range []struct {
		path, op, user, token string
		exp                   int64
		want                  string
	}{
		{"/workspace/dl.txt", "read", "", "e2bt_key_0123.abc", 0, "v1_7X3DSCJI0vLqKlu2clcbiSMFF+/0gWwHo2ZLY03WRmU"},
		{"notes/x y.txt", "write", "root", "tok", 1700000600, "v1_65ykQgHPsv1pqS5yT/+rSLRHfFOHA3tzY8T71lNHdoU"},
	} {
		if got := urlSignature(tc.path, tc.op, tc.user, tc.token, tc.exp); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.op, tc.path, got, tc.want)
		}
	}
}

func TestURLExpiry(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	for _, tc := range []struct {
		name, raw string
		ok        bool
	}{
		{"none", "", false},
		{"not a number", "soon", false},
		{"past", at(-time.Second), false},
		{"now", at(0), false},
		{"in a minute", at(time.Minute), true},
		{"at the cap", at(maxURLLifetime), true},
		{"beyond the cap", at(maxURLLifetime + time.Second), false},
	} {
		if err := checkURLExpiry(tc.raw, now); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestUserOf(t *testing.T) {
	for _, tc := range []struct {
		name, authz, query, want string
		ok                       bool
	}{
		{"none", "", "", "", true},
		{"user", "Basic dXNlcjo=", "", "", true},
		{"root", "Basic cm9vdDo=", "", "root", true},
		{"root by the files parameter", "", "?username=root", "root", true},
		{"someone else", "Basic Ym9iOg==", "", "", false},
		{"a bearer key", "Bearer shk_x", "", "", false},
		{"not base64", "Basic !!!", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/files"+tc.query, nil)
			if tc.authz != "" {
				r.Header.Set("Authorization", tc.authz)
			}
			got, err := userOf(r)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("%q %v", got, err)
			}
		})
	}
}
