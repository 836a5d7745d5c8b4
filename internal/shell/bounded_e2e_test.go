package shell_test

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/testenv"
)

// TestIdlessShellCallsStayBounded: AIO's shell/exec without an id makes a
// session per call. Under a burst of such calls 16 at a time on one
// sandbox, every call succeeds (no refusal, no 5xx), the sandbox never
// holds more sessions than its cap, and once the implicit sessions expire
// the server's goroutines are back at their baseline.
func TestIdlessShellCallsStayBounded(t *testing.T) {
	testenv.RequireSandboxes(t, "/bin/bash")
	d := daemontest.Start(t, nil, daemon.WithSessionTimers(time.Second, 200*time.Millisecond))
	s := &srv{t: t, d: d, base: "http://" + d.Addr(), key: d.AdminKey()}

	// Warm up: the default sandbox, one implicit session (ended again).
	ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"command": "true"}))
	count := func() int {
		l := ok(t, s.do("GET", "/v1/shell/sessions", nil))
		m, _ := l["sessions"].(map[string]any)
		return len(m)
	}
	testenv.Eventually(t, "warm-up session expired", func() bool { return count() == 0 })
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	base := runtime.NumGoroutine()

	const calls, conc, sessionCap = 96, 16, 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		failed  []string
		maxSeen int
	)
	sem := make(chan struct{}, conc)
	for i := range calls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := s.do("POST", "/v1/shell/exec", map[string]any{"command": fmt.Sprintf("echo %d", i)})
			if r.status != 200 || r.body["success"] != true {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%d %s", r.status, r.raw))
				mu.Unlock()
			}
			if i%8 == 0 {
				n := count()
				mu.Lock()
				maxSeen = max(maxSeen, n)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d id-less calls failed, first: %s", len(failed), calls, failed[0])
	}
	if maxSeen > sessionCap {
		t.Fatalf("the sandbox held %d sessions, above the cap of %d", maxSeen, sessionCap)
	}
	// The implicit sessions expire (1 s idle here) and take their shells,
	// goroutines and buffers with them.
	testenv.Eventually(t, "implicit sessions expired", func() bool { return count() == 0 })
	http.DefaultClient.CloseIdleConnections()
	const margin = 10
	var now int
	for range 100 {
		if now = runtime.NumGoroutine(); now <= base+margin {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("goroutines %d after the sessions ended, baseline %d (margin %d)\n%s", now, base, margin, buf[:runtime.Stack(buf, true)])
}
