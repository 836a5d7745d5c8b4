package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// execGroup makes an execution group of ts named with prefix and returns
// its attach files (closed when the test ends).
func execGroup(t *testing.T, ts *testSandbox, prefix string) []*os.File {
	t.Helper()
	sub, err := ts.group.Sub(fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1e9), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Destroy() })
	attach, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proto.CloseAll(attach) })
	return attach
}

// nonblocking reports whether f's open file has O_NONBLOCK, without Fd
// (which would turn a polled descriptor back to blocking).
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	return flags&unix.O_NONBLOCK != 0
}

// TestPipesAreNonBlockingOnTheServersSideOnly: the server's ends of a
// command's pipes arrive non-blocking (its runtime polls them instead of
// parking a thread in read(2)); the command's ends stay blocking, as
// programs expect; and everything written, stdin to stdout, more than a
// pipe holds, arrives whole.
func TestPipesAreNonBlockingOnTheServersSideOnly(t *testing.T) {
	ts := launch(t, nil)
	attach := execGroup(t, ts, "p")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The command's own view of its descriptors' flags (octal, as the
	// kernel prints them), then its stdin copied to stdout.
	script := `for fd in 0 1 2; do grep '^flags' /proc/self/fdinfo/$fd | tr -d '\n\t' | sed "s/flags:/$fd=/"; echo; done >&2; cat`
	p, err := ts.Spawn(ctx, proto.SpawnReq{
		Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Cwd: "/workspace", Stdin: true,
	}, attach, ts.home)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for name, f := range map[string]*os.File{"stdin": p.Stdin, "stdout": p.Stdout, "stderr": p.Stderr} {
		if !nonblocking(t, f) {
			t.Errorf("the server's %s is blocking", name)
		}
	}
	const size = 1 << 20 // 16 pipe buffers
	in := strings.Repeat("0123456789abcdef", size/16)
	go func() {
		_, _ = io.WriteString(p.Stdin, in)
		_ = p.Stdin.Close()
	}()
	errc := make(chan string, 1)
	go func() { b, _ := io.ReadAll(p.Stderr); errc <- string(b) }()
	out, err := io.ReadAll(p.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Fatalf("stdout carried %d bytes, want the %d written to stdin", len(out), len(in))
	}
	stderr := <-errc
	for _, line := range strings.Fields(stderr) {
		fd, flags, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(flags, 8, 64)
		if err != nil {
			t.Fatalf("flags %q: %v", line, err)
		}
		if v&unix.O_NONBLOCK != 0 {
			t.Errorf("the command's fd %s is non-blocking (flags %s)", fd, flags)
		}
	}
	if strings.Count(stderr, "=") != 3 {
		t.Fatalf("the command reported %q, want the flags of fds 0-2", stderr)
	}
	select {
	case ex := <-p.Exited():
		if ex.Code != 0 {
			t.Fatalf("exit %+v", ex)
		}
	case <-ctx.Done():
		t.Fatal("no exit")
	}
}

// TestDevToolsPipeIsDescriptorsThreeAndFour: a process spawned with
// DevToolsPipe reads what the server writes to DevToolsIn on its
// descriptor 3 and writes DevToolsOut's bytes on its descriptor 4 (Chromium's
// --remote-debugging-pipe); nobody else is given them.
func TestDevToolsPipeIsDescriptorsThreeAndFour(t *testing.T) {
	ts := launch(t, nil)
	attach := execGroup(t, ts, "d")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := ts.Spawn(ctx, proto.SpawnReq{
		Argv: []string{"sh", "-c", "tr a-z A-Z <&3 >&4"}, Env: []string{"PATH=/usr/bin:/bin"}, Cwd: "/workspace", DevToolsPipe: true,
	}, attach, ts.home)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.DevToolsIn == nil || p.DevToolsOut == nil || p.Stdout == nil || p.Stderr == nil {
		t.Fatalf("descriptors: %+v", p)
	}
	if _, err := io.WriteString(p.DevToolsIn, "{\"id\":1}\x00"); err != nil {
		t.Fatal(err)
	}
	_ = p.DevToolsIn.Close()
	got, err := io.ReadAll(p.DevToolsOut)
	if err != nil || string(got) != "{\"ID\":1}\x00" {
		t.Fatalf("through descriptors 3 and 4: %q %v", got, err)
	}
	if _, err := ts.Spawn(ctx, proto.SpawnReq{Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}, Cwd: "/workspace", TTY: true, DevToolsPipe: true},
		attach, ts.home); err == nil {
		t.Fatal("a terminal's process got a DevTools pipe")
	}
}
