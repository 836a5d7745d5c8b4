package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// startServer spawns a one-shot TCP server inside the sandbox that binds
// 127.0.0.1:port, answers the first connection with greeting and exits;
// it returns the process (its stderr tells a failed bind).
func (ts *testSandbox) startServer(t *testing.T, port int, greeting string) *Process {
	t.Helper()
	sub, err := ts.group.Sub(fmt.Sprintf("srv%d", port), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Kill(); _ = sub.Destroy() })
	attach, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	defer proto.CloseAll(attach)
	script := fmt.Sprintf(`import socket,sys
s=socket.socket()
try:
    s.bind(("127.0.0.1",%d))
except OSError as e:
    print("BIND", e.errno, file=sys.stderr); sys.exit(3)
s.listen(1)
print("LISTENING", flush=True)
c,_=s.accept()
c.sendall(b%q)
c.close()
`, port, greeting)
	p, err := ts.Spawn(context.Background(), proto.SpawnReq{
		Argv: []string{"/usr/bin/python3", "-c", script},
		Env:  []string{"PATH=/usr/bin:/bin", "HOME=/workspace"}, Cwd: "/workspace",
	}, attach, ts.home)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestDialReachesTheSandboxLoopback(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the test server needs /usr/bin/python3")
	}
	ts := launch(t, func(s *proto.Setup) { s.LoopbackPorts = []uint16{8000, 8001} })
	p := ts.startServer(t, 8000, "hello from inside")
	line := make([]byte, len("LISTENING\n"))
	if _, err := io.ReadFull(p.Stdout, line); err != nil {
		b, _ := io.ReadAll(p.Stderr)
		t.Fatalf("server did not start: %v (%s)", err, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := ts.Dial(ctx, 8000)
	if err != nil {
		t.Fatalf("dial 8000: %v", err)
	}
	c, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "hello from inside" {
		t.Fatalf("read %q, %v", b, err)
	}
	// Nothing listens on 8001: refused, not hung.
	var pe *proto.Error
	if _, err := ts.Dial(ctx, 8001); !errors.As(err, &pe) || pe.Code != "ECONNREFUSED" {
		t.Fatalf("dial of a closed port: %v, want ECONNREFUSED", err)
	}
}

func TestDialRefusesPortsOutsideTheList(t *testing.T) {
	ts := launch(t, func(s *proto.Setup) { s.LoopbackPorts = []uint16{8000} })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		port int
		code string
	}{
		{"unlisted", 22, "EPERM"},
		{"zero", 0, proto.CodeInvalid},
		{"negative", -1, proto.CodeInvalid},
		{"too large", 65536, proto.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Sent raw, so the init's own check is what answers.
			_, files, err := ts.call(ctx, proto.Request{Op: proto.OpDial, Dial: &proto.DialReq{Port: tc.port}}, nil, nil)
			proto.CloseAll(files)
			var pe *proto.Error
			if !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("dial %d: %v, want %s", tc.port, err, tc.code)
			}
		})
	}
}

func TestLoopbackPortsBoundTheSandboxsListeners(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the test server needs /usr/bin/python3")
	}
	ts := launch(t, func(s *proto.Setup) { s.LoopbackPorts = []uint16{8000} })
	if r := ts.run(t, "/usr/bin/python3", "-c", `import socket; socket.socket().bind(("127.0.0.1", 8000)); print("ok")`); strings.TrimSpace(r.stdout) != "ok" {
		t.Fatalf("bind of a listed port: %+v", r)
	}
	r := ts.run(t, "/usr/bin/python3", "-c", `import socket; socket.socket().bind(("127.0.0.1", 8002)); print("ok")`)
	if r.exit.Code == 0 || !strings.Contains(r.stderr, "ermission") {
		t.Fatalf("bind of an unlisted port was not refused: %+v", r)
	}
}
