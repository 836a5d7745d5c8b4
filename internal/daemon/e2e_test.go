package daemon

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/posture"
	"github.com/sandhold/sandhold/internal/store"
)

// clock is a movable time source for lockout windows.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

type server struct {
	t      *testing.T
	d      *Daemon
	base   string
	dir    string
	clk    *clock
	stop   func()
	stderr *bytes.Buffer
}

func start(t *testing.T, dir string, mutate func(*config.Config)) *server {
	t.Helper()
	// The default disk budget is a share of the free space, which other work
	// on a shared host moves; tests of the budget set their own.
	cfg := config.Config{Listen: "127.0.0.1:0", DataDir: dir, MaxBody: 64 << 10, DiskBudget: 1 << 40}
	if mutate != nil {
		mutate(&cfg)
	}
	clk := &clock{}
	stderr := &bytes.Buffer{}
	d, err := New(cfg, WithLogger(NewLogger(io.Discard, "error")), WithStderr(stderr), WithClock(clk.now), WithVersion("test"),
		WithPosture(func() posture.Report { return readyHost }))
	if err != nil {
		t.Fatalf("new daemon: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	s := &server{t: t, d: d, base: "http://" + d.Addr(), dir: dir, clk: clk, stderr: stderr}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run returned %v", err)
			}
		})
	}
	t.Cleanup(s.stop)
	return s
}

// envelope is the decoded AIO envelope.
type envelope struct {
	Success *bool           `json:"success"`
	Message *string         `json:"message"`
	Data    json.RawMessage `json:"data"`
	Hint    *string         `json:"-"`
	HintRaw json.RawMessage `json:"hint"`
}

type errData struct {
	Code      string `json:"code"`
	RequestID string `json:"request_id"`
	Field     string `json:"field"`
}

type resp struct {
	status int
	header http.Header
	env    envelope
	raw    []byte
}

func (r resp) errData(t *testing.T) errData {
	t.Helper()
	var d errData
	if err := json.Unmarshal(r.env.Data, &d); err != nil {
		t.Fatalf("error data %s: %v", r.env.Data, err)
	}
	return d
}

func (s *server) do(method, path, key string, body any, hdr map[string]string) resp {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out.env); err != nil {
			s.t.Fatalf("%s %s: body is not an envelope: %s", method, path, raw)
		}
	}
	return out
}

// expectError checks a native error envelope.
func expectError(t *testing.T, r resp, status int, code string) errData {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.raw)
	}
	if r.env.Success == nil || *r.env.Success || r.env.Message == nil || *r.env.Message == "" {
		t.Fatalf("not an error envelope: %s", r.raw)
	}
	d := r.errData(t)
	if d.Code != code || !strings.HasPrefix(d.RequestID, "req_") {
		t.Fatalf("data = %+v, want code %s and a request id", d, code)
	}
	if r.header.Get("X-Request-Id") != d.RequestID {
		t.Fatalf("request id header %q != body %q", r.header.Get("X-Request-Id"), d.RequestID)
	}
	for _, leak := range []string{"/tmp", "goroutine", ".go:", "sqlite"} {
		if strings.Contains(string(r.raw), leak) {
			t.Fatalf("error body leaks %q: %s", leak, r.raw)
		}
	}
	return d
}

func expectOK(t *testing.T, r resp, status int, into any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.raw)
	}
	if r.env.Success == nil || !*r.env.Success || r.env.Message == nil || string(r.env.HintRaw) != "null" {
		t.Fatalf("not a success envelope: %s", r.raw)
	}
	if into != nil {
		if err := json.Unmarshal(r.env.Data, into); err != nil {
			t.Fatalf("data %s: %v", r.env.Data, err)
		}
	}
}

type createdKey struct {
	ID, Name, Role, Key string
}

func (s *server) createKey(name, role string) createdKey {
	s.t.Helper()
	var k createdKey
	expectOK(s.t, s.do("POST", "/v1/keys", s.d.AdminKey(), map[string]string{"name": name, "role": role}, nil), 201, &k)
	return k
}

func (s *server) countKeys() int {
	s.t.Helper()
	ks, err := s.d.Store().ListKeys(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return len(ks)
}

func (s *server) auditActions(filter audit.Filter) []string {
	s.t.Helper()
	recs, err := s.d.Audit().Query(context.Background(), filter)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Action)
	}
	return out
}

func TestE2E(t *testing.T) {
	s := start(t, t.TempDir(), nil)
	admin := s.d.AdminKey()

	t.Run("admin key generated, saved 0600, announced once", func(t *testing.T) {
		if !strings.Contains(s.stderr.String(), admin) {
			t.Fatalf("admin key not announced: %q", s.stderr.String())
		}
		fi, err := os.Stat(filepath.Join(s.dir, AdminKeyFile))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file: %v %v", fi, err)
		}
		di, _ := os.Stat(s.dir)
		if di.Mode().Perm() != 0o700 {
			t.Fatalf("data dir mode %v", di.Mode().Perm())
		}
	})

	t.Run("healthz needs no key", func(t *testing.T) {
		var h struct{ Status, Version string }
		expectOK(t, s.do("GET", "/healthz", "", nil, nil), 200, &h)
		if h.Status != "ok" || h.Version != "test" {
			t.Fatalf("%+v", h)
		}
	})

	t.Run("openapi and docs", func(t *testing.T) {
		r := s.do("GET", "/openapi.json", "", nil, nil)
		if r.status != 200 || !bytes.Contains(r.raw, []byte(`"openapi":"3.1.0"`)) || !bytes.Contains(r.raw, []byte("/v1/keys")) {
			t.Fatalf("openapi: %d %.200s", r.status, r.raw)
		}
		r = s.do("GET", "/docs", "", nil, nil)
		if r.status != 200 || !bytes.Contains(r.raw, []byte("openapi.json")) || bytes.Contains(r.raw, []byte("https://")) {
			t.Fatalf("docs: %d", r.status)
		}
	})

	t.Run("unknown route is a 404 envelope after auth", func(t *testing.T) {
		expectError(t, s.do("GET", "/v1/nope", admin, nil, nil), 404, "not_found")
		expectError(t, s.do("GET", "/v1/nope", "", nil, nil), 401, "unauthorized")
	})

	var agent createdKey
	t.Run("create and list keys", func(t *testing.T) {
		agent = s.createKey("agent one", "agent")
		if agent.Role != "agent" || !strings.HasPrefix(agent.Key, "shk_") || len(agent.Key) != 47 || agent.ID == "" {
			t.Fatalf("%+v", agent)
		}
		r := s.do("GET", "/v1/keys", admin, nil, nil)
		var list []map[string]any
		expectOK(t, r, 200, &list)
		if bytes.Contains(r.raw, []byte(agent.Key)) || bytes.Contains(r.raw, []byte("hash")) {
			t.Fatalf("list leaks secrets: %s", r.raw)
		}
		if len(list) != 2 {
			t.Fatalf("list = %v", list)
		}
		// Every accepted header works.
		for _, h := range []string{"X-API-Key", "X-AIO-API-Key"} {
			expectOK(t, s.do("POST", "/v1/tickets", "", map[string]string{"scope": "terminal"}, map[string]string{h: agent.Key}), 201, nil)
		}
	})

	t.Run("auth failure modes are 401 and never 500", func(t *testing.T) {
		cases := []struct {
			name string
			hdr  map[string]string
			path string
		}{
			{"missing", nil, "/v1/audit"},
			{"wrong key", map[string]string{"Authorization": "Bearer shk_" + strings.Repeat("A", 43)}, "/v1/audit"},
			{"non-ascii bytes", map[string]string{"X-API-Key": "shk_\xff\xfe\xfd"}, "/v1/audit"},
			{"basic scheme", map[string]string{"Authorization": "Basic YTpi"}, "/v1/audit"},
			{"query-string key", nil, "/v1/audit?api_key=" + admin},
			{"query-string key with valid header", map[string]string{"X-API-Key": admin}, "/v1/audit?token=x"},
			{"bad ticket", nil, "/v1/audit?ticket=sht_nope"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				expectError(t, s.do("GET", tc.path, "", nil, tc.hdr), 401, "unauthorized")
			})
		}
		// Raw bytes a Go client would refuse to send.
		conn, err := net.Dial("tcp", s.d.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		_, _ = fmt.Fprintf(conn, "GET /v1/audit HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: shk_\x01\x7f\xc3\x28\r\nConnection: close\r\n\r\n")
		line, _ := bufio.NewReader(conn).ReadString('\n')
		if !strings.Contains(line, " 401 ") && !strings.Contains(line, " 400 ") {
			t.Fatalf("raw control bytes: %q", line)
		}
		s.clk.advance(2 * time.Minute) // forget these failures before the lockout test
	})

	t.Run("tickets are single use", func(t *testing.T) {
		var tk struct{ Ticket string }
		expectOK(t, s.do("POST", "/v1/tickets", agent.Key, map[string]string{"scope": "terminal"}, nil), 201, &tk)
		r := s.do("GET", "/auth?ticket="+tk.Ticket, "", nil, nil)
		if r.status != 200 {
			t.Fatalf("first use: %d %s", r.status, r.raw)
		}
		expectError(t, s.do("GET", "/auth?ticket="+tk.Ticket, "", nil, nil), 401, "unauthorized")
		s.clk.advance(2 * time.Minute)
	})

	t.Run("agent on admin routes is 403, audited, nothing stored", func(t *testing.T) {
		before := s.countKeys()
		expectError(t, s.do("GET", "/v1/keys", agent.Key, nil, nil), 403, "forbidden")
		expectError(t, s.do("POST", "/v1/keys", agent.Key, map[string]string{"name": "x", "role": "admin"}, nil), 403, "forbidden")
		expectError(t, s.do("DELETE", "/v1/keys/"+agent.ID, agent.Key, nil, nil), 403, "forbidden")
		expectError(t, s.do("GET", "/v1/audit/verify", agent.Key, nil, nil), 403, "forbidden")
		expectError(t, s.do("GET", "/metrics", agent.Key, nil, nil), 403, "forbidden")
		if n := s.countKeys(); n != before {
			t.Fatalf("refused request changed keys: %d -> %d", before, n)
		}
		// /metrics is a plain route (authz.deny); the rest are dispatcher
		// tools, refused at the scope step and audited as their action.
		if got := s.auditActions(audit.Filter{Action: "authz.deny", Actor: agent.ID}); len(got) != 1 {
			t.Fatalf("authz.deny records = %v", got)
		}
		recs, err := s.d.Audit().Query(context.Background(), audit.Filter{Actor: agent.ID})
		if err != nil {
			t.Fatal(err)
		}
		denied := map[string]bool{}
		for _, r := range recs {
			if r.Verdict == "denied" && r.Detail["reason"] == "role" {
				denied[r.Action] = true
			}
		}
		for _, want := range []string{"keys.list", "keys.create", "keys.revoke", "audit.verify"} {
			if !denied[want] {
				t.Fatalf("no denied %s record for the agent; denied: %v", want, denied)
			}
		}
		if got := s.auditActions(audit.Filter{Action: "key.create", Actor: agent.ID}); len(got) != 0 {
			t.Fatalf("refused create audited as create: %v", got)
		}
	})

	t.Run("refused unauthenticated request writes nothing", func(t *testing.T) {
		keys := s.countKeys()
		recs := len(s.auditActions(audit.Filter{}))
		expectError(t, s.do("POST", "/v1/keys", "", map[string]string{"name": "x", "role": "admin"}, nil), 401, "unauthorized")
		if s.countKeys() != keys || len(s.auditActions(audit.Filter{})) != recs {
			t.Fatal("a request without a credential touched the store")
		}
	})

	t.Run("agents see only their own audit records", func(t *testing.T) {
		var page struct {
			Records []audit.Record
			Count   int
		}
		expectOK(t, s.do("GET", "/v1/audit", agent.Key, nil, nil), 200, &page)
		if page.Count == 0 {
			t.Fatal("agent sees none of its own records")
		}
		for _, r := range page.Records {
			if r.Actor != agent.ID {
				t.Fatalf("agent saw record of %q", r.Actor)
			}
		}
		expectError(t, s.do("GET", "/v1/audit?actor=key_admin", agent.Key, nil, nil), 403, "forbidden")
		expectOK(t, s.do("GET", "/v1/audit?action=auth&limit=5&order=desc", admin, nil, nil), 200, &page)
		// action=auth is the category: authentication and authorization.
		for _, r := range page.Records {
			if !strings.HasPrefix(r.Action, "auth.") && !strings.HasPrefix(r.Action, "authz.") {
				t.Fatalf("action filter leaked %q", r.Action)
			}
		}
		d := expectError(t, s.do("GET", "/v1/audit?since=yesterday", admin, nil, nil), 400, "invalid")
		if d.Field != "query.since" {
			t.Fatalf("field = %q", d.Field)
		}
	})

	t.Run("bad JSON names the field", func(t *testing.T) {
		cases := []struct {
			name   string
			body   string
			status int
			field  string
		}{
			{"malformed", `{"name": "x", "role":`, 400, "body"},
			{"missing role", `{"name": "x"}`, 422, "body.role"},
			{"bad role", `{"name": "x", "role": "root"}`, 422, "body.role"},
			{"wrong type", `{"name": 5, "role": "agent"}`, 422, "body.name"},
			{"unknown field", `{"name": "x", "role": "agent", "admin": true}`, 422, "body"},
			{"bad name chars", `{"name": "a\nb", "role": "agent"}`, 400, "body.name"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				before := s.countKeys()
				code := map[int]string{400: "invalid", 422: "unprocessable"}[tc.status]
				d := expectError(t, s.do("POST", "/v1/keys", admin, tc.body, nil), tc.status, code)
				if !strings.HasPrefix(d.Field, tc.field) {
					t.Fatalf("field = %q, want %s*", d.Field, tc.field)
				}
				if s.countKeys() != before {
					t.Fatal("invalid request stored a key")
				}
			})
		}
	})

	t.Run("oversized body is 413", func(t *testing.T) {
		big := `{"name":"` + strings.Repeat("a", 70<<10) + `","role":"agent"}`
		expectError(t, s.do("POST", "/v1/keys", admin, big, nil), 413, "too_large")
		// Without Content-Length (chunked) the cap holds too.
		req, _ := http.NewRequest("POST", s.base+"/v1/keys", io.MultiReader(strings.NewReader(big)))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = -1
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != 413 {
			t.Fatalf("chunked: %d", res.StatusCode)
		}
	})

	t.Run("foreign Host and Origin are refused", func(t *testing.T) {
		expectError(t, s.do("GET", "/healthz", "", nil, map[string]string{"Host": "evil.example"}), 421, "misdirected")
		expectError(t, s.do("GET", "/v1/keys", admin, nil, map[string]string{"Host": "evil.example:8080"}), 421, "misdirected")
		expectError(t, s.do("GET", "/v1/keys", admin, nil, map[string]string{"Origin": "http://evil.example"}), 403, "forbidden")
		expectError(t, s.do("GET", "/v1/keys", admin, nil, map[string]string{"Origin": "null"}), 403, "forbidden")
		for _, h := range []string{"localhost:8080", "127.0.0.1", "[::1]:1"} {
			expectOK(t, s.do("GET", "/healthz", "", nil, map[string]string{"Host": h}), 200, nil)
		}
		// Same-origin (the /docs page) is fine.
		expectOK(t, s.do("GET", "/v1/keys", admin, nil, map[string]string{"Origin": s.base}), 200, nil)
	})

	t.Run("metrics by route pattern", func(t *testing.T) {
		r := s.do("GET", "/metrics", admin, nil, nil)
		if r.status != 200 || !bytes.Contains(r.raw, []byte(`sandhold_http_requests_total{code="201",method="POST",route="/v1/keys"}`)) ||
			!bytes.Contains(r.raw, []byte(`sandhold_http_request_duration_seconds_bucket`)) {
			t.Fatalf("metrics: %d %.300s", r.status, r.raw)
		}
		if bytes.Contains(r.raw, []byte(agent.ID)) {
			t.Fatal("raw path with an id became a label")
		}
	})

	t.Run("revocation is immediate", func(t *testing.T) {
		victim := s.createKey("victim", "viewer")
		expectOK(t, s.do("GET", "/v1/audit", victim.Key, nil, nil), 200, nil)
		var tk struct{ Ticket string }
		expectOK(t, s.do("POST", "/v1/tickets", victim.Key, map[string]string{"scope": "cdp"}, nil), 201, &tk)
		revoked := make(chan string, 4)
		s.d.Auth().OnRevoke(func(id string) { revoked <- id })
		var info struct {
			ID        string
			RevokedAt *time.Time `json:"revoked_at"`
		}
		expectOK(t, s.do("DELETE", "/v1/keys/"+victim.ID, admin, nil, nil), 200, &info)
		if info.ID != victim.ID || info.RevokedAt == nil {
			t.Fatalf("%+v", info)
		}
		if id := <-revoked; id != victim.ID {
			t.Fatalf("hook got %q", id)
		}
		expectError(t, s.do("GET", "/v1/audit", victim.Key, nil, nil), 401, "unauthorized")
		expectError(t, s.do("GET", "/sandboxes/sb_nope/cdp/json/version?ticket="+tk.Ticket, "", nil, nil), 401, "unauthorized")
		expectError(t, s.do("DELETE", "/v1/keys/key_nope", admin, nil, nil), 404, "not_found")
		expectError(t, s.do("DELETE", "/v1/keys/key_admin", admin, nil, nil), 409, "conflict")
		s.clk.advance(2 * time.Minute)
	})

	t.Run("lockout and recovery", func(t *testing.T) {
		bad := map[string]string{"X-API-Key": "shk_" + strings.Repeat("B", 43)}
		for i := 0; i < 9; i++ {
			expectError(t, s.do("GET", "/v1/audit", "", nil, bad), 401, "unauthorized")
		}
		r := s.do("GET", "/v1/audit", "", nil, bad)
		expectError(t, r, 429, "rate_limited")
		if r.header.Get("Retry-After") != "60" {
			t.Fatalf("Retry-After = %q", r.header.Get("Retry-After"))
		}
		// Locked: bad keys are refused and the refusals are not audited;
		// the (generated) admin key still gets in (SECURITY.md, lockout).
		n := len(s.auditActions(audit.Filter{}))
		for i := 0; i < 5; i++ {
			expectError(t, s.do("GET", "/v1/audit", "", nil, bad), 429, "rate_limited")
		}
		if got := len(s.auditActions(audit.Filter{})); got != n {
			t.Fatalf("locked requests wrote %d records", got-n)
		}
		expectOK(t, s.do("GET", "/v1/audit", admin, nil, nil), 200, nil)
		s.clk.advance(30 * time.Second)
		expectError(t, s.do("GET", "/v1/audit", "", nil, bad), 429, "rate_limited")
		s.clk.advance(31 * time.Second)
		expectError(t, s.do("GET", "/v1/audit", "", nil, bad), 401, "unauthorized")
		if got := s.auditActions(audit.Filter{Action: "auth.lockout"}); len(got) != 1 {
			t.Fatalf("lockout records: %v", got)
		}
	})

	t.Run("audit chain verifies after real traffic", func(t *testing.T) {
		var res audit.Result
		expectOK(t, s.do("GET", "/v1/audit/verify", admin, nil, nil), 200, &res)
		if !res.OK || res.Records < 20 {
			t.Fatalf("%+v", res)
		}
		// Every action category this issue promises is there.
		for _, a := range []string{"auth.success", "auth.failure", "auth.lockout", "key.create", "key.revoke", "authz.deny", "server.start", "ticket.create"} {
			if len(s.auditActions(audit.Filter{Action: a})) == 0 {
				t.Errorf("no %s record", a)
			}
		}
		// No secret reached the audit log.
		recs, _ := s.d.Audit().Query(context.Background(), audit.Filter{})
		j, _ := json.Marshal(recs)
		if bytes.Contains(j, []byte(admin)) || bytes.Contains(j, []byte(agent.Key)) {
			t.Fatal("a key reached the audit log")
		}
	})
}

// readyHost is a host with every layer: these tests are about the API and
// must pass unprivileged; posture's own tests probe the real kernel.
var readyHost = posture.Report{Checks: []posture.Check{{Name: posture.UserNS, OK: true, Required: true}}}

func TestRefusesToStartWithoutIsolation(t *testing.T) {
	bare := posture.Report{Checks: []posture.Check{{Name: posture.UserNS, OK: false, Required: true, Detail: "refused"}}}
	_, err := New(config.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0"},
		WithLogger(NewLogger(io.Discard, "error")), WithPosture(func() posture.Report { return bare }))
	if err == nil || !strings.Contains(err.Error(), "user namespaces") || !strings.Contains(err.Error(), "--insecure-no-isolation") {
		t.Fatalf("err = %v", err)
	}
	dir := t.TempDir()
	d, err := New(config.Config{DataDir: dir, Listen: "127.0.0.1:0", InsecureNoIsolation: true},
		WithLogger(NewLogger(io.Discard, "error")), WithStderr(io.Discard), WithPosture(func() posture.Report { return bare }))
	if err != nil {
		t.Fatalf("insecure start refused: %v", err)
	}
	defer func() { _ = d.Close() }()
	recs, err := d.Audit().Query(context.Background(), audit.Filter{Action: "config.loosen"})
	if err != nil || len(recs) != 1 || recs[0].Target != "SANDBOX_INSECURE_NO_ISOLATION" {
		t.Fatalf("loosening not audited: %+v %v", recs, err)
	}
}

func TestCORSForConfiguredOrigins(t *testing.T) {
	s := start(t, t.TempDir(), func(c *config.Config) { c.CORSOrigins = []string{"https://app.example"} })
	pre := s.do("OPTIONS", "/v1/keys", "", nil, map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
	if pre.status != 204 || pre.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("preflight: %d %v", pre.status, pre.header)
	}
	r := s.do("GET", "/v1/keys", s.d.AdminKey(), nil, map[string]string{"Origin": "https://app.example"})
	expectOK(t, r, 200, nil)
	if r.header.Get("Access-Control-Allow-Origin") != "https://app.example" || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers: %v", r.header)
	}
	expectError(t, s.do("OPTIONS", "/v1/keys", "", nil, map[string]string{"Origin": "https://other.example", "Access-Control-Request-Method": "POST"}), 403, "forbidden")
}

func TestLooseningsAreAudited(t *testing.T) {
	s := start(t, t.TempDir(), func(c *config.Config) { c.EnableSudo = true; c.DisableRateLimit = true })
	recs, err := s.d.Audit().Query(context.Background(), audit.Filter{Action: "config.loosen"})
	if err != nil || len(recs) != 2 {
		t.Fatalf("%v %v", recs, err)
	}
}

func TestConfiguredAPIKey(t *testing.T) {
	key := strings.Repeat("k", 40)
	s := start(t, t.TempDir(), func(c *config.Config) { c.APIKey = key })
	if s.d.AdminKey() != key || s.stderr.Len() != 0 {
		t.Fatalf("stderr %q", s.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(s.dir, AdminKeyFile)); !os.IsNotExist(err) {
		t.Fatal("key file written although SANDBOX_API_KEY was set")
	}
	expectOK(t, s.do("GET", "/v1/keys", key, nil, nil), 200, nil)
}

func TestAdminKeyStableAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	s1 := start(t, dir, nil)
	k := s1.d.AdminKey()
	s1.stop()
	s2 := start(t, dir, nil)
	if s2.d.AdminKey() != k || s2.stderr.Len() != 0 {
		t.Fatal("admin key changed or was announced again")
	}
	expectOK(t, s2.do("GET", "/v1/keys", k, nil, nil), 200, nil)
}

func TestBadConfigRefused(t *testing.T) {
	_, err := New(config.Config{DataDir: t.TempDir(), Listen: "nowhere"}, WithLogger(NewLogger(io.Discard, "error")),
		WithPosture(func() posture.Report { return readyHost }))
	if err == nil || !strings.Contains(err.Error(), "SANDBOX_LISTEN") {
		t.Fatalf("err = %v", err)
	}
}

// TestTamperingDetected runs real traffic, stops the server, tampers with
// the SQLite file and the head file directly, restarts, and asks the API.
func TestTamperingDetected(t *testing.T) {
	t.Parallel() // its own server, data dir and cgroup base; nothing shared
	cases := []struct {
		name   string
		tamper func(t *testing.T, db *sql.DB, dir string, last int64)
		// firstBad computes the expected first bad seq from the last seq
		// before tampering.
		firstBad func(last int64) int64
	}{
		{"edit", func(t *testing.T, db *sql.DB, _ string, _ int64) {
			exec(t, db, `UPDATE audit SET actor='key_someone_else' WHERE seq=3`)
		}, func(int64) int64 { return 3 }},
		{"delete", func(t *testing.T, db *sql.DB, _ string, _ int64) {
			exec(t, db, `DELETE FROM audit WHERE seq=4`)
		}, func(int64) int64 { return 4 }},
		{"reorder", func(t *testing.T, db *sql.DB, _ string, _ int64) {
			exec(t, db, `UPDATE audit SET seq=-1 WHERE seq=2`)
			exec(t, db, `UPDATE audit SET seq=2 WHERE seq=5`)
			exec(t, db, `UPDATE audit SET seq=5 WHERE seq=-1`)
		}, func(int64) int64 { return 2 }},
		{"truncate", func(t *testing.T, db *sql.DB, _ string, last int64) {
			exec(t, db, fmt.Sprintf(`DELETE FROM audit WHERE seq > %d`, last-3))
		}, func(last int64) int64 { return last }},
		{"truncate and rewrite head to an old record", func(t *testing.T, db *sql.DB, dir string, last int64) {
			// The forger also rewrites the head file, but to a hash that
			// matches nothing (they cannot know the new record's hash).
			exec(t, db, fmt.Sprintf(`DELETE FROM audit WHERE seq > %d`, last-3))
			if err := os.WriteFile(filepath.Join(dir, audit.HeadFile), []byte(fmt.Sprintf("%d %s\n", last-3, strings.Repeat("0", 64))), 0o600); err != nil {
				t.Fatal(err)
			}
		}, func(last int64) int64 { return last - 3 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := start(t, dir, nil)
			admin := s.d.AdminKey()
			s.createKey("a", "agent")
			s.createKey("b", "viewer")
			expectError(t, s.do("GET", "/v1/keys", "shk_wrong", nil, nil), 401, "unauthorized")
			var res audit.Result
			expectOK(t, s.do("GET", "/v1/audit/verify", admin, nil, nil), 200, &res)
			if !res.OK {
				t.Fatalf("intact chain reported broken: %+v", res)
			}
			s.stop()
			last, err := lastSeq(dir)
			if err != nil {
				t.Fatal(err)
			}
			db := openRaw(t, dir)
			tc.tamper(t, db, dir, last)
			_ = db.Close()

			s2 := start(t, dir, nil)
			r := s2.do("GET", "/v1/audit/verify", admin, nil, nil)
			expectOK(t, r, 200, &res)
			if res.OK || res.FirstBad != tc.firstBad(last) || !strings.Contains(*r.env.Message, "broken") {
				t.Fatalf("verify = %+v (message %q), want first bad %d", res, *r.env.Message, tc.firstBad(last))
			}
		})
	}
}

func exec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func openRaw(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.FileName)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func lastSeq(dir string) (int64, error) {
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		return 0, err
	}
	defer func() { _ = st.Close() }()
	r, err := st.LastAudit(context.Background())
	return r.Seq, err
}
