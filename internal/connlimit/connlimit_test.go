package connlimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/testenv"
)

func get(t *testing.T, c net.Conn, path string) (int, string) {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestCapsAndReserve: up to Max connections are served; the next Reserve
// answer only exempt requests; beyond those a connection gets a fixed 503
// and is closed without reaching the server. Pressure fires at Max and
// Relief when the count falls below half.
func TestCapsAndReserve(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var pressure, relief atomic.Int32
	ln := Wrap(inner, Options{Max: 4, Reserve: 2,
		Pressure: func() { pressure.Add(1) }, Relief: func() { relief.Add(1) }})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/work" {
			_, _ = io.WriteString(w, "served /work")
		}
	})
	srv := &http.Server{
		Handler: Guard(ok, func(r *http.Request) bool { return r.URL.Path == "/healthz" },
			func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "busy", http.StatusServiceUnavailable) }),
		ConnContext:       ConnContext,
		ReadHeaderTimeout: time.Minute,
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	var held []net.Conn
	for i := range 4 {
		c := dial()
		held = append(held, c)
		testenv.Eventually(t, "the connection counted", func() bool { return ln.Open() == i+1 })
	}
	if code, body := get(t, held[0], "/work"); code != 200 || body != "served /work" {
		t.Fatalf("within the cap: %d %q", code, body)
	}
	testenv.Eventually(t, "pressure", func() bool { return pressure.Load() == 1 })

	over := dial()
	testenv.Eventually(t, "the reserve used", func() bool { return ln.Open() == 5 })
	if code, _ := get(t, over, "/healthz"); code != 200 {
		t.Fatalf("exempt request in the reserve: %d", code)
	}
	over2 := dial()
	testenv.Eventually(t, "the reserve full", func() bool { return ln.Open() == 6 })
	if code, _ := get(t, over2, "/work"); code != http.StatusServiceUnavailable {
		t.Fatalf("ordinary request in the reserve: %d", code)
	}

	// The refused connection was closed (Connection: close); fill the
	// reserve again with one that sends nothing.
	testenv.Eventually(t, "the refused connection closed", func() bool { return ln.Open() == 5 })
	idle := dial()
	testenv.Eventually(t, "the reserve full", func() bool { return ln.Open() == 6 })

	// Beyond Max+Reserve: a fixed 503, and the connection is closed.
	beyond := dial()
	b, err := io.ReadAll(beyond)
	if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 503 ") || !strings.Contains(string(b), "Connection: close") {
		t.Fatalf("beyond every cap: %q %v", b, err)
	}
	if ln.Rejected() != 1 || ln.Open() > 6 {
		t.Fatalf("rejected %d, open %d", ln.Rejected(), ln.Open())
	}

	// Below half: relief.
	for _, c := range append(held, over, over2, idle) {
		_ = c.Close()
	}
	testenv.Eventually(t, "relief", func() bool { return relief.Load() == 1 && ln.Open() == 0 })
}
