package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// TestClientNamesSandboxesLikeDocker: every command takes a sandbox by its
// name or a unique id prefix (with or without "sb"); a reference more
// than one sandbox answers to is refused with the candidates, one nobody
// answers to says so.
func TestClientNamesSandboxesLikeDocker(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, d, d.AdminKey())
	id := strings.TrimSpace(c.mustRun("create", "--name", "demo"))

	if out := c.mustRun("exec", "demo", "--", "echo", "by name"); out != "by name\n" {
		t.Fatalf("exec by name: %q", out)
	}
	if out := c.mustRun("exec", id[:8], "--", "echo", "by prefix"); out != "by prefix\n" {
		t.Fatalf("exec by id prefix %s: %q", id[:8], out)
	}
	if out := c.mustRun("exec", id[2:9], "--", "echo", "bare prefix"); out != "bare prefix\n" {
		t.Fatalf("exec by id prefix without sb %s: %q", id[2:9], out)
	}
	cid := strings.TrimSpace(c.mustRun("exec", "-d", "demo", "--", "echo", "logged"))
	if out := c.mustRun("logs", "-f", "demo", cid); out != "logged\n" {
		t.Fatalf("logs by name: %q", out)
	}
	src := filepath.Join(c.home, "f.txt")
	if err := os.WriteFile(src, []byte("named copy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustRun("cp", "-q", src, "demo:/workspace/")
	if out := c.mustRun("exec", "demo", "--", "cat", "/workspace/f.txt"); out != "named copy\n" {
		t.Fatalf("cp by name: %q", out)
	}

	// Two sandboxes of one name: refused, naming both; the ids still work.
	twin := strings.TrimSpace(c.mustRun("create", "--name", "demo"))
	_, errOut, code := c.run("", "exec", "demo", "--", "true")
	oneLineErr(t, errOut, code, "2 sandboxes are named demo", id, twin)
	_, errOut, code = c.run("", "exec", "nosuch", "--", "true")
	oneLineErr(t, errOut, code, "sandbox nosuch not found", "sandhold ls")

	if out := c.mustRun("rm", twin[:10]); !strings.Contains(out, "deleted "+twin[:10]+" ("+twin+")") {
		t.Fatalf("rm by prefix: %q", out)
	}
	if out := c.mustRun("rm", "demo"); !strings.Contains(out, id) {
		t.Fatalf("rm by name: %q", out)
	}
}

// TestClientExplainsHowACommandEnded: a command a limit ended exits with
// the limit's status and sandhold says on stderr which limit, its value
// and the flag that raises it; a command that is not in the sandbox exits
// 127; logs -f of a killed background command says why it ended.
func TestClientExplainsHowACommandEnded(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, d, d.AdminKey())
	c.mustRun("create", "--name", "lim", "--cpu-time", "1s", "--memory", "64MiB")
	spin := []string{"sh", "-c", "while :; do :; done"}

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"cpu", append([]string{"exec", "lim", "--"}, spin...), 152, "killed: per-command CPU limit 1s (raise with `create --cpu-time`)"},
		{"memory", []string{"exec", "lim", "--", "python3", "-c", "b = bytearray(512 << 20)"}, 137, "killed: out of memory, the sandbox's memory limit of 64 MiB (raise with `create --memory`)"},
		{"timeout", []string{"exec", "lim", "--timeout", "1", "--", "sleep", "30"}, 124, "timed out: the command ran past its wall limit of 1s"},
		{"not-found", []string{"exec", "lim", "--", "no-such-command"}, 127, "no-such-command: command not found in the sandbox"},
		{"own-status", []string{"exec", "lim", "--", "sh", "-c", "exit 3"}, 3, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := c.run("", tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, errOut)
			}
			if tc.want == "" {
				if errOut != "" {
					t.Fatalf("a command that ended by itself got a note: %q", errOut)
				}
				return
			}
			if !strings.Contains(errOut, tc.want) {
				t.Fatalf("stderr %q does not say %q", errOut, tc.want)
			}
		})
	}

	cid := strings.TrimSpace(c.mustRun(append([]string{"exec", "-d", "lim", "--"}, spin...)...))
	_, errOut, code := c.run("", "logs", "-f", "lim", cid)
	if code != 152 || !strings.Contains(errOut, "killed: per-command CPU limit 1s") {
		t.Fatalf("logs -f of a command past its CPU time: exit %d, stderr %q", code, errOut)
	}
}

// TestClientCopyChecksTheDestinationFirst: a copy into a directory that
// does not exist is refused before a byte is sent, and leaves nothing in
// the workspace (no upload in progress, no artifact) to hold its quota; a
// destination ending in / is made.
func TestClientCopyChecksTheDestinationFirst(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, d, d.AdminKey())
	c.mustRun("create", "--name", "cp")
	src := filepath.Join(c.home, "data.bin")
	if err := os.WriteFile(src, []byte(strings.Repeat("sandhold\n", 100000)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := c.run("", "cp", "-q", src, "cp:/workspace/missing/dir/data.bin")
	oneLineErr(t, errOut, code, "/workspace/missing/dir does not exist in the sandbox", "nothing was sent")
	if out := c.mustRun("exec", "cp", "--", "sh", "-c", "find /workspace/.artifacts -type f 2>/dev/null | wc -l"); strings.TrimSpace(out) != "0" {
		t.Fatalf("a refused copy left %s files in /workspace/.artifacts", strings.TrimSpace(out))
	}
	c.mustRun("cp", "-q", src, "cp:/workspace/made/here/")
	if out := c.mustRun("exec", "cp", "--", "sh", "-c", "wc -c < /workspace/made/here/data.bin; find /workspace/.artifacts -type f | wc -l"); out != "900000\n0\n" {
		t.Fatalf("copy into a new directory: %q", out)
	}
}

// TestClientWhoAndWhere: login says whose key it is; keys and audit go to
// the server once logged in (no local data dir made or read), name the
// flag behind a refused value, and the audit shows as a table on request.
func TestClientWhoAndWhere(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, nil, "")
	url := "http://" + d.Addr()
	out, errOut, code := c.run(d.AdminKey()+"\n", "login", url, "--key-stdin")
	if code != 0 || !strings.Contains(out, "logged in to "+url+" as ") || !strings.Contains(out, "role admin") {
		t.Fatalf("login: %d %q %q", code, out, errOut)
	}
	key := strings.TrimSpace(c.mustRun("keys", "create", "--name", "ci-bot", "--role", "agent"))
	if !strings.HasPrefix(key, "shk_") {
		t.Fatalf("keys create on the server: %q", key)
	}
	if list := c.mustRun("keys", "list"); !strings.Contains(list, "ci-bot") {
		t.Fatalf("keys list on the server: %q", list)
	}
	if tail := c.mustRun("audit", "tail", "-n", "5", "--format", "table"); !strings.Contains(tail, "SEQ") || !strings.Contains(tail, "keys.create") {
		t.Fatalf("audit tail as a table: %q", tail)
	}
	_, errOut, code = c.run("", "audit", "tail", "-n", "2000")
	oneLineErr(t, errOut, code, "-n: ")
	// Reads never made a data dir of the client's own.
	if _, err := os.Stat(filepath.Join(c.home, ".local", "share", "sandhold")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a client read made a data dir: %v", err)
	}

	// An agent's login says so; and a local read without a server's data
	// there says where to look instead of making one.
	ag := newCLIEnv(t, nil, "")
	if out, errOut, code := ag.run(key+"\n", "login", url, "--key-stdin"); code != 0 || !strings.Contains(out, "as ci-bot (role agent") {
		t.Fatalf("agent login: %d %q %q", code, out, errOut)
	}
	empty := filepath.Join(ag.home, "nodata")
	_, errOut, code = ag.run("", "audit", "tail", "--data-dir", empty)
	oneLineErr(t, errOut, code, "no sandhold server's data in", "sandhold login")
	if _, err := os.Stat(empty); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("audit tail --data-dir made %s: %v", empty, err)
	}
}

// TestClientApprovals: a call the policy sends to an operator exits 75
// with the approval id; once an operator denies it, the same call exits
// 77 with the operator's note (not a fresh approval); with
// --wait-approval the call waits for the decision and then runs.
func TestClientApprovals(t *testing.T) {
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	ag := admin.NewKey("agent", "agent")
	c := newCLIEnv(t, d, ag.Key)
	c.mustRun("create", "--name", "ap")
	flagged := []string{"exec", "ap", "--", "sh", "-c", "cat /etc/shadow; true"}

	_, errOut, code := c.run("", flagged...)
	if code != exitApprovalPending || !strings.Contains(errOut, "approval (id apr_") {
		t.Fatalf("flagged call: exit %d, stderr %q", code, errOut)
	}
	id := errOut[strings.Index(errOut, "apr_"):]
	id = id[:strings.IndexAny(id, ") ")]
	admin.JSON(http.MethodPost, "/v1/approvals/"+id+"/deny", map[string]any{"note": "no credential reads here"}, http.StatusOK, nil)
	_, errOut, code = c.run("", flagged...)
	if code != exitApprovalDenied || !strings.Contains(errOut, "no credential reads here") || !strings.Contains(errOut, id) {
		t.Fatalf("the denied call again: exit %d, stderr %q", code, errOut)
	}

	// --wait-approval: held until an operator approves, then it runs.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.cmd(ctx, "exec", "--wait-approval", "ap", "--", "sh", "-c", "cat /etc/gshadow; echo ran")
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pending []struct {
		ID    string `json:"id"`
		Actor string `json:"actor"`
	}
	for len(pending) == 0 {
		admin.JSON(http.MethodGet, "/v1/approvals?status=pending", nil, http.StatusOK, &pending)
		if len(pending) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	admin.JSON(http.MethodPost, "/v1/approvals/"+pending[0].ID+"/approve", map[string]any{}, http.StatusOK, nil)
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "ran") {
		t.Fatalf("exec --wait-approval: %v, stdout %q", err, out.String())
	}
}

// TestClientShellDetachesAndReattaches: Ctrl-P Ctrl-Q leaves the shell
// running, ends the client (exit 0) and prints the session id with the
// command to reattach; reattached, the shell still has its state.
func TestClientShellDetachesAndReattaches(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, d, d.AdminKey())
	c.mustRun("create", "--name", "sh")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	open := func(args ...string) (*os.File, *ptyOutput, chan error) {
		cmd := c.cmd(ctx, append([]string{"shell", "sh"}, args...)...)
		ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
		if err != nil {
			t.Skip("no pseudo-terminal on this host:", err)
		}
		t.Cleanup(func() { _ = ptmx.Close() })
		out := &ptyOutput{ch: make(chan struct{}, 1)}
		go func() { _, _ = io.Copy(out, ptmx) }()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		return ptmx, out, exited
	}
	ptmx, out, exited := open()
	if _, err := ptmx.Write([]byte("export MARK=kept-$((40+2)); echo set-$((1+1))\r")); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, 0, regexp.MustCompile(`set-2`))
	if _, err := ptmx.Write([]byte{0x10, 0x11}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("detach: %v: %q", err, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("the client did not end on Ctrl-P Ctrl-Q: %q", out.String())
	}
	// The client has ended, but the pty may still hold its last lines for
	// the copy to read: wait for the notice, not for the process.
	detached := regexp.MustCompile(`detached from shell session (\S+); reattach with: sandhold shell \S+ --session (\S+)`)
	out.waitFor(t, 0, detached)
	m := detached.FindStringSubmatch(out.String())
	if m == nil || m[1] != m[2] {
		t.Fatalf("no session id on detach: %q", out.String())
	}
	ptmx, out, exited = open("--session", m[1])
	if _, err := ptmx.Write([]byte("echo got-$MARK\r")); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, 0, regexp.MustCompile(`got-kept-42`))
	if _, err := ptmx.Write([]byte("exit\r")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		t.Logf("the reattached shell ended: %v", err)
	case <-ctx.Done():
		t.Fatal("the reattached shell did not end on exit")
	}
}
