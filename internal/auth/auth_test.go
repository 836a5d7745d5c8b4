package auth

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/store"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newSvc(t *testing.T) (*Service, *audit.Log, *fakeClock) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	lg := audit.New(st, dir)
	return NewService(st, lg, WithClock(clk.now)), lg, clk
}

func TestGenerateKeyShape(t *testing.T) {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if !looksLikeKey(k) || len(k) != 47 {
		t.Fatalf("key %q", k)
	}
	k2, _ := GenerateKey()
	if k == k2 {
		t.Fatal("keys repeat")
	}
}

func TestParseCredential(t *testing.T) {
	tests := []struct {
		name   string
		h      map[string][]string
		q      string
		key    string
		ticket string
		err    bool
	}{
		{"bearer", map[string][]string{"Authorization": {"Bearer abc"}}, "", "abc", "", false},
		{"bearer lowercase scheme", map[string][]string{"Authorization": {"bearer abc"}}, "", "abc", "", false},
		{"x-api-key", map[string][]string{"X-Api-Key": {"abc"}}, "", "abc", "", false},
		{"aio header", map[string][]string{"X-Aio-Api-Key": {"abc"}}, "", "abc", "", false},
		{"same key twice", map[string][]string{"X-Api-Key": {"abc"}, "Authorization": {"Bearer abc"}}, "", "abc", "", false},
		{"conflicting keys", map[string][]string{"X-Api-Key": {"abc"}, "Authorization": {"Bearer xyz"}}, "", "", "", true},
		{"basic scheme", map[string][]string{"Authorization": {"Basic dXNlcg=="}}, "", "", "", true},
		{"bare authorization", map[string][]string{"Authorization": {"abc"}}, "", "", "", true},
		{"non-ascii", map[string][]string{"X-Api-Key": {"shk_\xff\xfe"}}, "", "", "", true},
		{"utf8", map[string][]string{"X-Api-Key": {"shk_é"}}, "", "", "", true},
		{"control char", map[string][]string{"X-Api-Key": {"a\x00b"}}, "", "", "", true},
		{"huge", map[string][]string{"X-Api-Key": {strings.Repeat("a", 10000)}}, "", "", "", true},
		{"empty header", map[string][]string{"X-Api-Key": {""}}, "", "", "", true},
		{"query api_key", nil, "api_key=abc", "", "", true},
		{"query token with header", map[string][]string{"X-Api-Key": {"abc"}}, "token=abc", "", "", true},
		{"query key", nil, "key=abc", "", "", true},
		{"ticket", nil, "ticket=sht_x", "", "sht_x", false},
		{"two tickets", nil, "ticket=a&ticket=b", "", "", true},
		{"ticket and key", map[string][]string{"X-Api-Key": {"abc"}}, "ticket=a", "", "", true},
		{"missing", nil, "", "", "", true},
		{"unrelated query", map[string][]string{"X-Api-Key": {"abc"}}, "path=/x", "abc", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, vs := range tc.h {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			q, _ := url.ParseQuery(tc.q)
			c, err := ParseCredential(h, q)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if err != nil && fault.KindOf(err) != fault.Unauthorized {
				t.Fatalf("kind = %s", fault.KindOf(err))
			}
			if c.Key != tc.key || c.Ticket != tc.ticket {
				t.Fatalf("got %+v", c)
			}
		})
	}
}

func FuzzParseCredential(f *testing.F) {
	f.Add("Bearer shk_abc", "abc", "ticket=x")
	f.Add("\xff", "", "api_key=1")
	f.Fuzz(func(t *testing.T, authz, xkey, rawq string) {
		h := http.Header{}
		h.Set("Authorization", authz)
		h.Set("X-API-Key", xkey)
		q, _ := url.ParseQuery(rawq)
		c, err := ParseCredential(h, q)
		if err != nil {
			if k := fault.KindOf(err); k != fault.Unauthorized {
				t.Fatalf("kind %s", k)
			}
			return
		}
		if c.Key != "" && !validCredential(c.Key) {
			t.Fatalf("invalid key accepted: %q", c.Key)
		}
	})
}

func TestLockout(t *testing.T) {
	l := newLockout(3, time.Minute)
	t0 := time.Unix(1000, 0)
	for i := 0; i < 2; i++ {
		if l.fail("a", t0) {
			t.Fatal("locked too early")
		}
	}
	if !l.fail("a", t0.Add(10*time.Second)) {
		t.Fatal("third failure did not lock")
	}
	if d := l.check("a", t0.Add(20*time.Second)); d != 50*time.Second {
		t.Fatalf("remaining = %v", d)
	}
	// Hammering while locked does not extend the lock.
	for i := 0; i < 100; i++ {
		l.fail("a", t0.Add(30*time.Second))
	}
	if d := l.check("a", t0.Add(70*time.Second)); d != 0 {
		t.Fatalf("still locked after window: %v", d)
	}
	// Other addresses unaffected.
	if l.check("b", t0) != 0 {
		t.Fatal("b locked")
	}
	// Failures spread over more than a window never lock.
	l2 := newLockout(3, time.Minute)
	for i := 0; i < 10; i++ {
		if l2.fail("c", t0.Add(time.Duration(i)*40*time.Second)) {
			t.Fatalf("locked at failure %d despite spacing", i)
		}
	}
}

func TestLockoutKeys(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"10.1.2.3", "10.1.2.3"},
		{"::1", "::/64"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"::ffff:10.0.0.1", "::ffff:10.0.0.1"}, // IPv4-mapped: counted per address like IPv4
		{"not-an-ip", "not-an-ip"},
	}
	for _, tc := range tests {
		if got := lockoutKey(tc.in); got != tc.want {
			t.Errorf("lockoutKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Rotating through one /64 does not escape the lock.
	l := newLockout(3, time.Minute)
	t0 := time.Unix(0, 0)
	for i := 0; i < 3; i++ {
		l.fail("2001:db8::"+string(rune('a'+i)), t0)
	}
	if l.check("2001:db8::ffff", t0) == 0 {
		t.Fatal("another address of the same /64 is not locked")
	}
	if l.check("2001:db9::1", t0) != 0 {
		t.Fatal("another /64 is locked")
	}
}

func TestLockoutBoundedMemory(t *testing.T) {
	l := newLockout(10, time.Minute)
	t0 := time.Unix(0, 0)
	for i := 0; i < maxTrackedAddrs+500; i++ {
		l.fail("addr"+string(rune('a'+i%26))+strings.Repeat("x", i%7)+time.Duration(i).String(), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if n := l.size(); n > maxTrackedAddrs {
		t.Fatalf("table grew to %d", n)
	}
}

func TestAuthenticateKeysAndRevocation(t *testing.T) {
	ctx := context.Background()
	s, lg, _ := newSvc(t)
	admin := Caller{KeyID: "key_admin", Role: RoleAdmin, Addr: "127.0.0.1"}
	info, secret, err := s.CreateKey(ctx, admin, "ci bot", RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	var revoked []string
	s.OnRevoke(func(id string) { revoked = append(revoked, id) })

	c, err := s.Authenticate(ctx, "10.0.0.1", Credential{Key: secret})
	if err != nil || c.KeyID != info.ID || c.Role != RoleAgent || c.Addr != "10.0.0.1" {
		t.Fatalf("auth = %+v %v", c, err)
	}
	if _, err := s.Authenticate(ctx, "10.0.0.1", Credential{Key: secret + "x"}); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := s.RevokeKey(ctx, admin, info.ID); err != nil {
		t.Fatal(err)
	}
	if len(revoked) != 1 || revoked[0] != info.ID {
		t.Fatalf("hooks: %v", revoked)
	}
	if _, err := s.Authenticate(ctx, "10.0.0.1", Credential{Key: secret}); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("revoked key accepted: %v", err)
	}
	if _, err := s.RevokeKey(ctx, admin, "key_nope"); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("missing: %v", err)
	}
	if _, err := s.RevokeKey(ctx, admin, AdminKeyID); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("admin revoke: %v", err)
	}
	recs, _ := lg.Query(ctx, audit.Filter{Action: "auth"})
	var acts []string
	for _, r := range recs {
		acts = append(acts, r.Action+":"+r.Verdict)
	}
	want := "auth.success:allow auth.failure:deny auth.failure:deny"
	if strings.Join(acts, " ") != want {
		t.Fatalf("audit = %v, want %s", acts, want)
	}
	keys, _ := s.ListKeys(ctx)
	if len(keys) != 1 || keys[0].RevokedAt == nil {
		t.Fatalf("list = %+v", keys)
	}
}

func TestAuthenticateLockoutAndRecovery(t *testing.T) {
	ctx := context.Background()
	s, lg, clk := newSvc(t)
	_, secret, err := s.CreateKey(ctx, Caller{}, "k", RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < DefaultLockoutLimit-1; i++ {
		if _, err := s.Authenticate(ctx, "1.2.3.4", Credential{Key: "wrong"}); fault.KindOf(err) != fault.Unauthorized {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	_, err = s.Authenticate(ctx, "1.2.3.4", Credential{Key: "wrong"})
	if fault.KindOf(err) != fault.RateLimited || fault.RetryAfterOf(err) != 60 {
		t.Fatalf("10th failure: %v (retry %d)", err, fault.RetryAfterOf(err))
	}
	// A guessable (operator-chosen) key is refused while locked, and the
	// refusal is not audited again.
	opKey := strings.Repeat("operator-chosen-", 3)
	if err := s.EnsureAdmin(ctx, opKey); err != nil {
		t.Fatal(err)
	}
	before, _ := lg.Query(ctx, audit.Filter{})
	if _, err := s.Authenticate(ctx, "1.2.3.4", Credential{Key: opKey}); fault.KindOf(err) != fault.RateLimited {
		t.Fatalf("locked guessable key: %v", err)
	}
	// A wrong generated-shape key is checked but still answered 429.
	if _, err := s.Authenticate(ctx, "1.2.3.4", Credential{Key: "shk_" + strings.Repeat("A", 43)}); fault.KindOf(err) != fault.RateLimited {
		t.Fatalf("locked wrong key: %v", err)
	}
	after, _ := lg.Query(ctx, audit.Filter{})
	if len(after) != len(before) {
		t.Fatalf("refusal while locked wrote %d records", len(after)-len(before))
	}
	// A generated key (32 random bytes) is never locked out.
	if _, err := s.Authenticate(ctx, "1.2.3.4", Credential{Key: secret}); err != nil {
		t.Fatalf("locked generated key: %v", err)
	}
	// Another address is fine.
	if _, err := s.Authenticate(ctx, "5.6.7.8", Credential{Key: secret}); err != nil {
		t.Fatal(err)
	}
	clk.add(61 * time.Second)
	if _, err := s.Authenticate(ctx, "1.2.3.4", Credential{Key: opKey}); err != nil {
		t.Fatalf("not let back in: %v", err)
	}
	if recs, _ := lg.Query(ctx, audit.Filter{Action: "auth.lockout"}); len(recs) != 1 {
		t.Fatalf("lockout records: %d", len(recs))
	}
}

func TestTickets(t *testing.T) {
	ctx := context.Background()
	s, _, clk := newSvc(t)
	info, _, err := s.CreateKey(ctx, Caller{}, "k", RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	c := Caller{KeyID: info.ID, Role: RoleAgent}
	tk, exp, err := s.IssueTicket(ctx, c, ScopeTerminal)
	if err != nil || !strings.HasPrefix(tk, TicketPrefix) || exp.Sub(clk.now()) != TicketTTL {
		t.Fatalf("issue: %q %v %v", tk, exp, err)
	}
	got, err := s.Authenticate(ctx, "a", Credential{Ticket: tk, Scopes: []TicketScope{ScopeTerminal}})
	if err != nil || got.KeyID != info.ID || !got.ViaTicket || got.TicketScope != ScopeTerminal {
		t.Fatalf("redeem: %+v %v", got, err)
	}
	if _, err := s.Authenticate(ctx, "a", Credential{Ticket: tk, Scopes: []TicketScope{ScopeTerminal}}); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("second use: %v", err)
	}
	tk2, _, _ := s.IssueTicket(ctx, c, ScopeTerminal)
	clk.add(TicketTTL)
	if _, err := s.Authenticate(ctx, "a", Credential{Ticket: tk2, Scopes: []TicketScope{ScopeTerminal}}); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("expired: %v", err)
	}
	tk3, _, _ := s.IssueTicket(ctx, c, ScopeTerminal)
	if _, err := s.RevokeKey(ctx, Caller{}, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "a", Credential{Ticket: tk3, Scopes: []TicketScope{ScopeTerminal}}); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("ticket of revoked key: %v", err)
	}
	// Per-key cap.
	var capErr error
	for i := 0; i <= maxTicketsPerKey; i++ {
		if _, _, err := s.IssueTicket(ctx, Caller{KeyID: "key_x"}, ScopeVNC); err != nil {
			capErr = err
			break
		}
	}
	if fault.KindOf(capErr) != fault.RateLimited {
		t.Fatalf("cap: %v", capErr)
	}
}

func TestRequireAuditsRefusal(t *testing.T) {
	ctx := context.Background()
	s, lg, _ := newSvc(t)
	agent := Caller{KeyID: "key_a", Role: RoleAgent}
	if err := s.Require(ctx, agent, "manage keys", RoleAdmin); fault.KindOf(err) != fault.Forbidden {
		t.Fatalf("err = %v", err)
	}
	if err := s.Require(ctx, Caller{Role: RoleAdmin}, "manage keys", RoleAdmin); err != nil {
		t.Fatal(err)
	}
	recs, _ := lg.Query(ctx, audit.Filter{Action: "authz"})
	if len(recs) != 1 || recs[0].Actor != "key_a" || recs[0].Verdict != audit.Deny {
		t.Fatalf("records %+v", recs)
	}
}

func TestCreateKeyValidation(t *testing.T) {
	s, _, _ := newSvc(t)
	tests := []struct {
		name, keyName string
		role          Role
		field         string
	}{
		{"empty name", "", RoleAgent, "body.name"},
		{"long name", strings.Repeat("a", 65), RoleAgent, "body.name"},
		{"newline in name", "a\nb", RoleAgent, "body.name"},
		{"bad role", "ok", Role("root"), "body.role"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.CreateKey(context.Background(), Caller{}, tc.keyName, tc.role)
			if fault.KindOf(err) != fault.Invalid || fault.FieldOf(err) != tc.field {
				t.Fatalf("err = %v field %q", err, fault.FieldOf(err))
			}
		})
	}
}

func TestEnsureAdmin(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newSvc(t)
	k1 := strings.Repeat("a", 40)
	if err := s.EnsureAdmin(ctx, k1); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Authenticate(ctx, "x", Credential{Key: k1}); err != nil || !c.IsAdmin() || c.KeyID != AdminKeyID {
		t.Fatalf("%+v %v", c, err)
	}
	k2 := strings.Repeat("b", 40)
	if err := s.EnsureAdmin(ctx, k2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "x", Credential{Key: k1}); err == nil {
		t.Fatal("old admin key still works")
	}
	if err := s.EnsureAdmin(ctx, "bad key"); err == nil {
		t.Fatal("accepted a key with a space")
	}
}

func TestClientIP(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5555": "127.0.0.1",
		"[::1]:80":       "::1",
		"10.0.0.1":       "10.0.0.1",
		"::1":            "::1",
	} {
		if got := ClientIP(in); got != want {
			t.Errorf("ClientIP(%q) = %q, want %q", in, got, want)
		}
	}
}

// A sink sees the first caller put below it, and nothing when nothing
// authenticated.
func TestCallerSink(t *testing.T) {
	ctx, who := WithCallerSink(context.Background())
	if _, ok := who(); ok {
		t.Fatal("a caller before any was put")
	}
	inner := WithCaller(ctx, Caller{KeyID: "key_1", Role: RoleAgent})
	_ = WithCaller(inner, Caller{KeyID: "key_system", Role: RoleAdmin}) // a nested call
	if c, ok := who(); !ok || c.KeyID != "key_1" {
		t.Fatalf("sink = %+v %v, want key_1", c, ok)
	}
	if c, ok := CallerFrom(inner); !ok || c.KeyID != "key_1" {
		t.Fatalf("CallerFrom = %+v %v", c, ok)
	}
}
