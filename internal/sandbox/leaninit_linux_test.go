package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent/initbin"
	"github.com/sandhold/sandhold/internal/testenv"
)

// buildLeanInit builds cmd/sandhold-init as `make build` does and returns
// the program. A plain `go test` embeds no lean init (no build tag), so
// this is how the memfd path runs in every test run.
func buildLeanInit(t testing.TB) []byte {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH; cannot build the lean init:", err)
	}
	out := filepath.Join(t.TempDir(), "sandhold-init")
	args := []string{"build", "-trimpath"}
	if runtime.GOARCH == "amd64" {
		// As the Makefile links it: the keeper an idle init sleeps in is
		// the entry point (cmd/sandhold-init/keeper_amd64.s).
		args = append(args, "-ldflags", "-E main.keeperEntry")
	}
	cmd := exec.Command(gobin, append(args, "-o", out, "github.com/sandhold/sandhold/cmd/sandhold-init")...) //nolint:gosec // G204: fixed arguments, a test temp path
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the lean init: %v\n%s", err, b)
	}
	prog, err := os.ReadFile(out) //nolint:gosec // G304: the test's own temp file
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

func leanConfig(t *testing.T, prog []byte) Config {
	t.Helper()
	f, err := initbin.Memfd(prog)
	if err != nil {
		t.Fatal("seal the lean init into a memfd:", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	cfg := testConfig(t)
	cfg.InitExe, cfg.InitArgs, cfg.InitFile = "", nil, f
	return cfg
}

// TestLeanInitFromSealedMemfd runs real sandboxes on the lean init from a
// sealed memfd: the start-up self-test passes with every layer in force,
// the host sees the memfd as the init's executable, the descriptor that
// carried it reaches no command, and the layers hold for a command.
func TestLeanInitFromSealedMemfd(t *testing.T) {
	testenv.RequireSandboxes(t)
	m := newManager(t, leanConfig(t, buildLeanInit(t)), nil)
	ctx := context.Background()

	layers, err := m.SelfTest(ctx)
	if err != nil {
		t.Fatal("self-test on the lean init:", err)
	}
	if len(layers) == 0 {
		t.Fatal("self-test reported no layers")
	}
	for _, l := range layers {
		if !l.Active {
			t.Errorf("layer %s not in force: %s", l.Name, l.Detail)
		}
	}

	s := create(t, m, Spec{})
	s.mu.Lock()
	pid := s.inst.Pid
	s.mu.Unlock()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(exe, "/memfd:sandhold-init") {
		t.Fatalf("init runs %q, want the sealed memfd", exe)
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "sandhold-init" {
		t.Errorf("the init's command name is %q (%v), want sandhold-init", comm, err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if !strings.Contains(l, "memfd:") {
			continue
		}
		// An init that can sleep keeps a close-on-exec copy of its
		// program for the keeper's exec (internal/agent/sandboxinit/sleep_linux.go);
		// the inherited descriptor itself, and any copy a command could
		// inherit, must be gone.
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var flags int64 = -1
		for line := range strings.Lines(string(info)) {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, _ = strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			}
		}
		if fd.Name() == "5" || flags < 0 || flags&unix.O_CLOEXEC == 0 {
			t.Errorf("the init kept its program's memfd open as fd %s (flags %o), want at most a close-on-exec copy", fd.Name(), flags)
		}
	}

	cases := []struct {
		name  string
		cmd   string
		check func(*testing.T, Result)
	}{
		{name: "runs commands", cmd: `echo ok`, check: wantStdout("ok\n")},
		{name: "no memfd reaches a command", cmd: `ls -l /proc/self/fd/ | grep -c memfd`, check: wantStdout("0\n")},
		{name: "init is PID 1 and closed to the sandbox", cmd: `readlink /proc/1/exe; echo rc=$?`, check: wantStdoutContains("rc=1")},
		{name: "mount refused", cmd: `python3 -c 'import ctypes;l=ctypes.CDLL(None,use_errno=True);print(l.syscall(165,b"none",b"/tmp",b"tmpfs",0,0), ctypes.get_errno())'`, check: wantStdout("-1 1\n")},
		{name: "sandbox user", cmd: `id -u`, check: wantStdout("1000\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, s, ExecRequest{Command: tc.cmd, Timeout: 20 * time.Second})
			if r.Status != StatusCompleted {
				t.Fatalf("status %s/%s; stdout %q stderr %q", r.Status, r.Reason, r.Stdout, r.Stderr)
			}
			tc.check(t, r)
		})
	}
}
