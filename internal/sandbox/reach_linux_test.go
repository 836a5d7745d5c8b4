package sandbox

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/loopback"
)

// holdServer accepts every connection on 127.0.0.1:port and keeps it open,
// answering what it reads with "echo:" + the bytes (one thread: the
// sandbox's pids limit counts threads).
const holdServer = `import socket,sys,selectors
sel=selectors.DefaultSelector()
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(256)
sel.register(s, selectors.EVENT_READ)
print("LISTENING", flush=True)
while True:
    for k,_ in sel.select():
        if k.fileobj is s:
            c,_=s.accept(); sel.register(c, selectors.EVENT_READ)
            continue
        d=k.fileobj.recv(4096)
        if not d:
            sel.unregister(k.fileobj); k.fileobj.close(); continue
        k.fileobj.sendall(b"echo:"+d)
`

func reachConfig(t *testing.T) Config {
	cfg := testConfig(t)
	cfg.LoopbackPorts = LoopbackPorts([]uint16{8000})
	return cfg
}

// startListener runs holdServer on port inside s and waits for it.
func startListener(t *testing.T, s *Sandbox, port string) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the test server needs /usr/bin/python3")
	}
	p, err := s.Spawn(context.Background(), SpawnSpec{Argv: []string{"/usr/bin/python3", "-c", holdServer, port}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Release)
	line, err := bufio.NewReader(p.Stdout).ReadString('\n')
	if err != nil || line != "LISTENING\n" {
		b, _ := io.ReadAll(p.Stderr)
		t.Fatalf("server did not start: %q %v (%s)", line, err, b)
	}
}

func echo(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return strings.TrimSpace(line)
}

func TestDialPortReachesAServerInTheSandbox(t *testing.T) {
	m := newManager(t, reachConfig(t), nil)
	s := create(t, m, Spec{})
	startListener(t, s, "8000")
	ctx := context.Background()
	c, err := m.DialPort(ctx, owner, s.ID(), 8000)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if got := echo(t, c, "hi"); got != "echo:hi" {
		t.Fatalf("got %q", got)
	}
	if n := s.OpenRelays(); n != 1 {
		t.Fatalf("open relays = %d, want 1", n)
	}
	_ = c.Close()
	if n := s.OpenRelays(); n != 0 {
		t.Fatalf("open relays after close = %d, want 0", n)
	}

	cases := []struct {
		name   string
		caller Caller
		port   int
		kind   fault.Kind
	}{
		{"another key's sandbox", Caller{KeyID: "key-b"}, 8000, fault.NotFound},
		{"unlisted port", owner, 22, fault.Forbidden},
		{"port zero", owner, 0, fault.Invalid},
		{"port too large", owner, 70000, fault.Invalid},
		{"nothing listening", owner, 9222, fault.Unavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := m.DialPort(ctx, tc.caller, s.ID(), tc.port)
			if err == nil {
				_ = c.Close()
			}
			if fault.KindOf(err) != tc.kind {
				t.Fatalf("err = %v (kind %s), want %s", err, fault.KindOf(err), tc.kind)
			}
		})
	}
}

func TestDialPortIsCappedAndEndsWithPause(t *testing.T) {
	m := newManager(t, reachConfig(t), nil)
	s := create(t, m, Spec{})
	startListener(t, s, "8000")
	ctx := context.Background()
	var conns []net.Conn
	for range loopback.MaxConns {
		c, err := s.DialPort(ctx, 8000)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	if _, err := s.DialPort(ctx, 8000); !fault.Is(err, fault.Conflict) {
		t.Fatalf("dial over the cap: %v, want conflict", err)
	}
	_ = conns[0].Close()
	c, err := s.DialPort(ctx, 8000)
	if err != nil {
		t.Fatalf("dial after one closed: %v", err)
	}
	conns[0] = c
	if got := echo(t, c, "x"); got != "echo:x" {
		t.Fatalf("got %q", got)
	}

	if err := m.Pause(ctx, owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	if n := s.OpenRelays(); n != 0 {
		t.Fatalf("open relays after pause = %d, want 0", n)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a relayed connection survived the pause")
	}
	if _, err := s.DialPort(ctx, 8000); !fault.Is(err, fault.Conflict) {
		t.Fatalf("dial while paused: %v, want conflict", err)
	}
	if err := m.Resume(ctx, owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	s.shutdown()
	if _, err := s.DialPort(ctx, 8000); !fault.Is(err, fault.Conflict) {
		t.Fatalf("dial while stopped: %v, want conflict", err)
	}
}

func TestDialPortServesHTTP(t *testing.T) {
	m := newManager(t, reachConfig(t), nil)
	s := create(t, m, Spec{})
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the test server needs /usr/bin/python3")
	}
	p, err := s.Spawn(context.Background(), SpawnSpec{Argv: []string{"/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1", "8000"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Release)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return s.DialPort(ctx, 8000)
	}}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var resp *http.Response
	for i := 0; i < 100; i++ {
		resp, err = cl.Get("http://sandbox/")
		if err == nil || !fault.Is(err, fault.Unavailable) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "Directory listing") {
		t.Fatalf("status %d body %.200s", resp.StatusCode, b)
	}
}
