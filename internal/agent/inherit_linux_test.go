package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/testenv"
)

// inheritable makes f's descriptor survive exec, as a shell's `9<file` or
// a supervisor's pipe does, until the test ends.
func inheritable(t *testing.T, f *os.File) int {
	t.Helper()
	fd := int(f.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return fd
}

// TestInheritedDescriptorsNeverReachCommands: whatever the process that
// starts an init leaves open and inheritable — a host file, a pipe — is
// closed before the first command, and a command starts with exactly 0, 1
// and 2 (the PTY's three for a terminal).
func TestInheritedDescriptorsNeverReachCommands(t *testing.T) {
	testenv.RequireSandboxes(t)
	secretPath := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secretPath, []byte("HOST-SECRET-FILE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret, err := os.Open(secretPath)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pw.WriteString("HOST-SECRET-PIPE\n"); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close() // a leaked reader then sees the data and EOF, not a hang
	fileFD, pipeFD := inheritable(t, secret), inheritable(t, pr)
	ts := launch(t, nil)
	// The descriptors are inheritable again only for this launch: other
	// tests must not be affected.
	for _, fd := range []int{fileFD, pipeFD} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("the init holds neither", func(t *testing.T) {
		var fst, pst unix.Stat_t
		if err := unix.Fstat(fileFD, &fst); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fstat(pipeFD, &pst); err != nil {
			t.Fatal(err)
		}
		dir := fmt.Sprintf("/proc/%d/fd", ts.Pid)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			var st unix.Stat_t
			if err := unix.Stat(dir+"/"+e.Name(), &st); err != nil {
				continue // closed meanwhile
			}
			if (st.Dev == fst.Dev && st.Ino == fst.Ino) || (st.Dev == pst.Dev && st.Ino == pst.Ino) {
				target, _ := os.Readlink(dir + "/" + e.Name())
				t.Errorf("the init holds the inherited %s as fd %s", target, e.Name())
			}
		}
	})

	// The shell tests each descriptor itself (test is a builtin: nothing
	// is opened, nothing forked). Listing /proc/$$/fd with ls showed
	// "0 1 2 3 4 5" or "0 1 2 10" now and then: descriptors the shell
	// holds for a moment while it builds a pipeline or saves one around
	// a redirection, not ones the command inherited.
	fds := make([]string, 64)
	for i := range fds {
		fds[i] = strconv.Itoa(i)
	}
	script := fmt.Sprintf("for i in %s; do [ -e /proc/$$/fd/$i ] && printf '%%s ' $i; done; echo; cat <&%d; cat <&%d; cat <&3; true",
		strings.Join(fds, " "), fileFD, pipeFD)
	t.Run("a command starts with 0, 1, 2", func(t *testing.T) {
		r := ts.run(t, "sh", "-c", script)
		if first, _, _ := strings.Cut(r.stdout, "\n"); first != "0 1 2 " {
			t.Errorf("a command's descriptors: %q, want \"0 1 2 \"", r.stdout)
		}
		if strings.Contains(r.stdout+r.stderr, "HOST-SECRET") {
			t.Errorf("a command read an inherited descriptor: %q %q", r.stdout, r.stderr)
		}
	})

	t.Run("a terminal starts with 0, 1, 2", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := ts.Spawn(ctx, proto.SpawnReq{
			Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Cwd: "/workspace", TTY: true,
		}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		outc := make(chan string, 1)
		go func() { b, _ := io.ReadAll(p.PTY); outc <- string(b) }() // EIO once the terminal's last holder exits
		select {
		case <-p.Exited():
		case <-ctx.Done():
			t.Fatal("no exit")
		}
		out := <-outc
		if !regexp.MustCompile(`(?m)^0 1 2 `).MatchString(out) {
			t.Errorf("a terminal command's descriptors: %q, want 0 1 2", out)
		}
		if strings.Contains(out, "HOST-SECRET") {
			t.Errorf("a terminal command read an inherited descriptor: %q", out)
		}
	})
}

// TestCommandsInSandboxCgroupNamespace: every command, whichever thread of
// the init forks it, is in the sandbox's own cgroup namespace (not the
// host's) and sees only paths below its root: "/" and its execution group.
func TestCommandsInSandboxCgroupNamespace(t *testing.T) {
	ts := launch(t, nil)
	host, err := os.Readlink("/proc/self/ns/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	layerOK := false
	for _, l := range ts.Ready.Layers {
		if l.Name == "cgroup namespace" && l.Active {
			layerOK = true
		}
	}
	if !layerOK {
		t.Errorf("cgroup namespace layer not reported active: %+v", ts.Ready.Layers)
	}

	// The init's thread that forks commands; compared with the commands'
	// namespace below.
	initNS := map[string]bool{}
	dir := fmt.Sprintf("/proc/%d/task", ts.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		ns, err := os.Readlink(dir + "/" + task.Name() + "/ns/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		initNS[ns] = true
	}

	execGroup := regexp.MustCompile(`^/x[0-9]+$`)
	var seen string
	// Several commands, so spawns land on more than one thread.
	for i := range 6 {
		r := ts.run(t, "sh", "-c", "readlink /proc/self/ns/cgroup; cat /proc/self/cgroup")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) < 2 {
			t.Fatalf("command %d printed %q (stderr %q)", i, r.stdout, r.stderr)
		}
		if lines[0] == host {
			t.Fatalf("command %d is in the host's cgroup namespace %s", i, host)
		}
		if seen != "" && lines[0] != seen {
			t.Errorf("command %d in namespace %s, an earlier one in %s: one namespace per sandbox", i, lines[0], seen)
		}
		seen = lines[0]
		if !initNS[lines[0]] {
			t.Errorf("command %d in namespace %s, which no thread of the init is in (%v)", i, lines[0], initNS)
		}
		inGroup := false
		for _, l := range lines[1:] {
			parts := strings.SplitN(l, ":", 3)
			if len(parts) != 3 {
				t.Fatalf("malformed /proc/self/cgroup line %q", l)
			}
			switch {
			case parts[2] == "/":
			case execGroup.MatchString(parts[2]):
				inGroup = true
			default:
				t.Errorf("command %d sees cgroup path %q (a host path), want / or its execution group", i, parts[2])
			}
		}
		if !inGroup {
			t.Errorf("command %d is in no execution group below the namespace root: %q", i, r.stdout)
		}
	}
}
