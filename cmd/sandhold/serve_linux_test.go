package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startServer runs this test binary as `sandhold serve` on a free port,
// with extra (descriptors 3, 4, … in the server; nil entries leave a gap),
// and returns its address and admin key. The server is stopped when the
// test ends.
func startServer(t *testing.T, extra []*os.File) (addr, key string, pid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a server that starts sandboxes needs root (id mappings and cgroups)")
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("user namespaces are not available:", err)
	}
	key = "test-admin-key-" + strings.Repeat("k", 32)
	cmd := exec.Command(os.Args[0], "serve", "--listen", "127.0.0.1:0")
	cmd.Env = []string{
		runMainEnv + "=1",
		"PATH=/usr/bin:/bin",
		"SANDBOX_DATA_DIR=" + filepath.Join(t.TempDir(), "data"),
		"SANDBOX_API_KEY=" + key,
		"SANDBOX_WARM_POOL=0",
	}
	cmd.ExtraFiles = extra
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		// A server asked to stop exits 0 by itself. Killed, it would
		// leave its own children and temp dirs behind (the cleanup of
		// the data dir below still runs, theirs would not).
		if st := cmd.ProcessState; st == nil || !st.Success() {
			t.Errorf("the server did not exit 0 on SIGTERM: %v", st)
		}
	})
	addrc := make(chan string, 1)
	var logBuf bytes.Buffer
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			logBuf.WriteString(line + "\n")
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if !sent && json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "sandhold listening" {
				addrc <- rec.Addr
				sent = true
			}
		}
		_ = cmd.Wait()
		if !sent {
			close(addrc)
		}
	}()
	select {
	case addr, ok := <-addrc:
		if !ok {
			<-exited
			t.Fatalf("server exited before listening:\n%s", logBuf.String())
		}
		return addr, key, cmd.Process.Pid
	case <-time.After(2 * time.Minute):
		t.Fatal("server did not start listening")
	}
	return "", "", 0
}

// call sends one JSON request with the admin key and decodes the
// envelope's data into out.
func call(t *testing.T, method, url, key, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Success bool            `json:"success"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil || !env.Success {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	}
}

// TestServeKeepsInheritedDescriptorsFromSandboxes: a server started with an
// open host file on fd 9 and a pipe on fd 10 (as `sandhold serve
// 9</etc/shadow` or a CI runner would) gives a command neither: it starts
// with 0, 1 and 2 and reads nothing through 9 or 10.
func TestServeKeepsInheritedDescriptorsFromSandboxes(t *testing.T) {
	secretPath := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secretPath, []byte("HOST-SECRET-FILE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret, err := os.Open(secretPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = secret.Close() }()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pr.Close() }()
	if _, err := pw.WriteString("HOST-SECRET-PIPE\n"); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close() // a leaked reader then sees the data and EOF, not a hang
	extra := make([]*os.File, 8)
	extra[6], extra[7] = secret, pr // fd 9 and fd 10 in the server
	addr, key, pid := startServer(t, extra)
	base := "http://" + addr

	// The server's half: both are close-on-exec in the server itself, so
	// no process it starts (an init, mkfs, a browser) inherits them.
	for _, fd := range []int{9, 10} {
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
		if err != nil {
			t.Fatal(err)
		}
		var flags int64
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, _ = strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			}
		}
		if flags&syscall.O_CLOEXEC == 0 {
			t.Errorf("fd %d in the server is not close-on-exec (flags %o)", fd, flags)
		}
	}

	var sb struct {
		ID string `json:"id"`
	}
	call(t, "POST", base+"/v1/sandboxes", key, `{"name":"fds"}`, &sb)
	var res struct {
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode *int   `json:"exit_code"`
	}
	// ls writes to a file, not a pipe: while bash builds a pipeline it
	// holds the pipe's ends itself, and ls would list them.
	cmd := `ls /proc/$$/fd > /tmp/fds; sort -n /tmp/fds | tr '\n' ' '; cat <&9; cat <&10; true`
	body, _ := json.Marshal(map[string]any{"command": cmd, "timeout": 20})
	call(t, "POST", fmt.Sprintf("%s/v1/sandboxes/%s/exec", base, sb.ID), key, string(body), &res)
	if res.Stdout != "0 1 2 " {
		t.Errorf("a command's descriptors: %q, want \"0 1 2 \" (stderr %q)", res.Stdout, res.Stderr)
	}
	if strings.Contains(res.Stdout+res.Stderr, "HOST-SECRET") {
		t.Errorf("a command read a descriptor the server inherited: %q %q", res.Stdout, res.Stderr)
	}
}
