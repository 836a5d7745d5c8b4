package daemon

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/config"
)

// floodSize is how many connections TestFloodOfWaitingCallsLeavesTheOperatorServed
// opens: SANDHOLD_TEST_FLOOD, else 10000 or as many as this process's
// open-file limit allows (the test holds the client ends, the server its
// own: about 1.5 per connection, and room for the rest).
func floodSize(t *testing.T) int {
	if v := os.Getenv("SANDHOLD_TEST_FLOOD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 64 {
			t.Fatalf("SANDHOLD_TEST_FLOOD=%q: want a number of connections, at least 64", v)
		}
		return n
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("no open-file limit to size the flood by: %v", err)
	}
	if rl.Cur < 2400 {
		t.Skipf("open-file limit %d is too low for a flood worth the name", rl.Cur)
	}
	n := int(min(10000, (rl.Cur-2000)*2/3)) // at most 10000: fits an int
	if n < 256 {
		t.Skipf("open-file limit %d is too low for a flood worth the name", rl.Cur)
	}
	return n
}

// TestFloodOfWaitingCallsLeavesTheOperatorServed: issue 38 row 5. 2 ×
// 9,990 concurrent calls of one flagged custom tool waiting for approval
// from one agent key took the server to its fd limit (accept4: too many
// open files); an admin GET /v1/control timed out. Now one key's requests
// in progress are capped (429, connection closed), the server's
// connections are capped (beyond: 503; a reserve answers /healthz and
// /v1/control), and the operator is served throughout — with either cap
// the tighter one.
func TestFloodOfWaitingCallsLeavesTheOperatorServed(t *testing.T) {
	if testing.Short() {
		t.Skip("opens thousands of connections")
	}
	n := floodSize(t)
	t.Run("the key's cap", func(t *testing.T) { flood(t, n, n/2, n/8, n/8) })
	t.Run("the server's cap", func(t *testing.T) { flood(t, n, n/8, n/2, n/8) })
}

// flood opens n connections of one agent key, each calling a tool that
// waits for an operator, against a server capped at maxConns connections
// and perKey requests per key, and checks that at most holds calls wait,
// every other one is refused (429 or 503) rather than queued, and the
// operator is served meanwhile.
func flood(t *testing.T, n, maxConns, perKey, holds int) {
	s := start(t, t.TempDir(), func(c *config.Config) {
		c.MaxConnections, c.MaxConnectionsPerKey = maxConns, perKey
	})
	admin := s.d.AdminKey()
	ag := s.createKey("flood", "agent")
	// Every call of t2 waits for an operator; the agent's rate limits and
	// approval waits are lifted so that only the connection caps bound
	// the flood.
	expectOK(t, s.do("PUT", "/v1/policy", admin, map[string]any{
		"roles": map[string]any{"agent": map[string]any{"tools": map[string]any{"t2": "approve"},
			"rate_limits": map[string]any{
				"read":      map[string]any{"per_minute": 1e6, "burst": 1e6},
				"approvals": map[string]any{"concurrent": 1e6}}}},
	}, nil), 200, nil)
	expectOK(t, s.do("POST", "/v1/tools/custom", ag.Key, map[string]any{"name": "t2", "call": map[string]any{"tool": "sandbox.list"}}, nil), 201, nil)

	body := `{"name":"t2","arguments":{}}`
	req := fmt.Sprintf("POST /v1/tools/call HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nX-Approval-Wait: 60\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", s.d.Addr(), ag.Key, len(body), body)
	var (
		answered atomic.Int64
		mu       sync.Mutex
		codes    = map[int]int{}
		conns    []net.Conn
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range n {
		c, err := net.Dial("tcp", s.d.Addr())
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		go func() {
			code := 0 // closed without an answer
			if _, err := io.WriteString(c, req); err == nil {
				if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					code = res.StatusCode
					_ = res.Body.Close()
				}
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
			answered.Add(1)
			_ = c.Close()
		}()
	}
	// Settled: every call is answered but at most the ones allowed to
	// wait.
	deadline := time.Now().Add(5 * time.Minute)
	for answered.Load() < int64(n-holds) {
		if time.Now().After(deadline) {
			mu.Lock()
			t.Fatalf("after 5 min only %d of %d calls answered: %v", answered.Load(), n, codes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The operator is served while the key's calls wait.
	for range 3 {
		expectOK(t, s.do("GET", "/v1/control", admin, nil, nil), 200, nil)
		if r := s.do("GET", "/healthz", "", nil, nil); r.status != 200 {
			t.Fatalf("/healthz under the flood: %d %s", r.status, r.raw)
		}
	}
	expectOK(t, s.do("POST", "/v1/control/halt", admin, map[string]any{"reason": "flood"}, nil), 200, nil)
	expectOK(t, s.do("POST", "/v1/control/unhalt", admin, nil, nil), 200, nil)

	mu.Lock()
	defer mu.Unlock()
	waiting := n - int(answered.Load())
	t.Logf("%d connections, caps %d per key and %d in all: %d wait, answers %v", n, perKey, maxConns, waiting, codes)
	if waiting > holds || waiting < holds/2 {
		t.Fatalf("%d calls wait, want at most %d (and most of them)", waiting, holds)
	}
	for code := range codes {
		// 202: a wait that ended (60 s) on a slow machine.
		if code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable && code != 0 && code != http.StatusAccepted {
			t.Fatalf("answers %v: a call was neither refused nor left waiting", codes)
		}
	}
}
