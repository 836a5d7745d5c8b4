package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// envRunCLI makes the test binary run the CLI (main) instead of the
// tests: the client tests drive the real command as a subprocess.
const envRunCLI = "SANDHOLD_TEST_RUN_CLI"

func init() {
	if os.Getenv(envRunCLI) == "1" {
		main()
		os.Exit(0)
	}
}

// cliEnv is a client's environment: its own config and cache dirs, and
// (unless login is tested) the server's URL and a key.
type cliEnv struct {
	t    *testing.T
	vars []string
	home string
}

func newCLIEnv(t *testing.T, d *daemon.Daemon, key string) *cliEnv {
	t.Helper()
	home := t.TempDir()
	var vars []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SANDHOLD_") && !strings.HasPrefix(kv, "SANDBOX_") && !strings.HasPrefix(kv, "XDG_") {
			vars = append(vars, kv)
		}
	}
	vars = append(vars, envRunCLI+"=1", "HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
	if d != nil {
		vars = append(vars, "SANDHOLD_URL=http://"+d.Addr())
	}
	if key != "" {
		vars = append(vars, "SANDHOLD_KEY="+key)
	}
	return &cliEnv{t: t, vars: vars, home: home}
}

func (c *cliEnv) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...) // #nosec G204 -- the test binary itself
	cmd.Env = c.vars
	cmd.Dir = c.home
	return cmd
}

// run runs the CLI to the end.
func (c *cliEnv) run(stdin string, args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := c.cmd(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		c.t.Fatalf("sandhold %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func (c *cliEnv) mustRun(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run("", args...)
	if code != 0 {
		c.t.Fatalf("sandhold %v: exit %d: %s%s", args, code, out, errOut)
	}
	return out
}

// oneLineErr checks a failed command said one line containing want.
func oneLineErr(t *testing.T, errOut string, code int, want ...string) {
	t.Helper()
	if code == 0 {
		t.Fatalf("exit 0, want a failure saying %q", want)
	}
	if strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("error is not one line: %q", errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Fatalf("error %q does not say %q", errOut, w)
		}
	}
}

func TestClientLoginAndSandboxes(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, nil, "")

	// Not logged in: say how.
	_, errOut, code := c.run("", "ls")
	oneLineErr(t, errOut, code, "not logged in", "sandhold login")

	url := "http://" + d.Addr()
	// A wrong key is refused at login and nothing is saved.
	_, errOut, code = c.run("shk_wrong\n", "login", url, "--key-stdin")
	oneLineErr(t, errOut, code, "refused the key", "sandhold login")
	cfgPath := filepath.Join(c.home, "config", "sandhold", "client.json")
	if _, err := os.Stat(cfgPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused login was saved: %v", err)
	}
	out, errOut, code := c.run(d.AdminKey()+"\n", "login", url, "--key-stdin")
	if code != 0 || !strings.Contains(out, "logged in to "+url) {
		t.Fatalf("login: %d %s %s", code, out, errOut)
	}
	fi, err := os.Stat(cfgPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("login file: %v %v", fi, err)
	}
	if strings.Contains(out+errOut, d.AdminKey()) {
		t.Fatal("login echoed the key")
	}

	id := strings.TrimSpace(c.mustRun("create", "--name", "cli-demo", "--memory", "256MiB", "--pids", "32"))
	if !strings.HasPrefix(id, "sb") {
		t.Fatalf("create printed %q", id)
	}
	ls := c.mustRun("ls")
	if !strings.Contains(ls, id) || !strings.Contains(ls, "cli-demo") || !strings.Contains(ls, "256 MiB") || !strings.HasPrefix(ls, "ID") {
		t.Fatalf("ls:\n%s", ls)
	}

	// A default sandbox from login: exec without naming one.
	c.run(d.AdminKey()+"\n", "login", url, "--key-stdin", "--sandbox", id)
	if out := c.mustRun("exec", "--", "hostname"); strings.TrimSpace(out) == "" {
		t.Fatal("exec on the default sandbox printed nothing")
	}
	// cp and logs on the default sandbox too.
	local := filepath.Join(c.home, "small.txt")
	if err := os.WriteFile(local, []byte("small\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := c.mustRun("cp", "-q", local, ":/workspace/"); !strings.Contains(out, "copied 6 bytes to "+id+":/workspace/small.txt") {
		t.Fatalf("cp to the default sandbox: %q", out)
	}
	cid := strings.TrimSpace(c.mustRun("exec", "-d", "--", "cat", "/workspace/small.txt"))
	if out := c.mustRun("logs", "-f", cid); out != "small\n" {
		t.Fatalf("logs on the default sandbox: %q", out)
	}

	if out := c.mustRun("rm", id); !strings.Contains(out, "deleted "+id) {
		t.Fatalf("rm: %q", out)
	}
	// Gone: one line naming what to do.
	_, errOut, code = c.run("", "exec", id, "--", "true")
	oneLineErr(t, errOut, code, "sandbox "+id+" not found", "sandhold ls")
	_, errOut, code = c.run("", "rm", id)
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("rm of a gone sandbox: %d %q", code, errOut)
	}
}

// TestClientExecStreamsAndExits: output arrives while the command still
// runs (it cannot end before the test lets it), stdout and stderr stay
// apart, and the exit status is the command's.
func TestClientExecStreamsAndExits(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, d, d.AdminKey())
	sb := strings.TrimSpace(c.mustRun("create"))

	out, errOut, code := c.run("", "exec", sb, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if code != 7 || out != "out\n" || errOut != "err\n" {
		t.Fatalf("exec: code %d stdout %q stderr %q", code, out, errOut)
	}
	if out, _, code := c.run("in-data", "exec", "-i", sb, "--", "cat"); code != 0 || out != "in-data" {
		t.Fatalf("exec -i: %d %q", code, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.cmd(ctx, "exec", sb, "--timeout", "90", "--", "sh", "-c",
		"echo first; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo second")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var streamErr bytes.Buffer
	cmd.Stderr = &streamErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stdout)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		_ = cmd.Wait()
		t.Fatalf("first line: %q %v; stderr %q", line, err, streamErr.String())
	}
	// The command is still waiting for /workspace/go: "first" was
	// streamed, not delivered at the end.
	c.mustRun("exec", sb, "--", "touch", "/workspace/go")
	rest, _ := io.ReadAll(br)
	if string(rest) != "second\n" {
		t.Fatalf("rest: %q", rest)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exec: %v", err)
	}

	// HALT: refused, in one line that says who can lift it.
	halt := func(path, body string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.Addr()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+d.AdminKey())
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", path, res, err)
		}
		_ = res.Body.Close()
	}
	halt("/v1/control/halt", `{"reason":"drill"}`)
	_, errOut, code = c.run("", "exec", sb, "--", "true")
	oneLineErr(t, errOut, code, "halted", "drill", "unhalt")
	halt("/v1/control/unhalt", "")

	// Background and logs: the output and the exit status come back.
	cid := strings.TrimSpace(c.mustRun("exec", "-d", sb, "--", "sh", "-c", "echo a; echo b >&2; exit 3"))
	out, errOut, code = c.run("", "logs", "-f", sb, cid)
	if code != 3 || out != "a\n" || errOut != "b\n" {
		t.Fatalf("logs -f: %d %q %q", code, out, errOut)
	}
}

// TestClientRateLimitedSaysWait: the failed-auth lockout answers 429;
// the CLI says to wait, with the server's figure.
func TestClientRateLimitedSaysWait(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, d, "shk_"+strings.Repeat("A", 43))
	var errOut string
	var code int
	for range 12 {
		_, errOut, code = c.run("", "ls")
		if strings.Contains(errOut, "rate limited") {
			break
		}
		oneLineErr(t, errOut, code, "refused the key", "sandhold login")
	}
	oneLineErr(t, errOut, code, "rate limited", "wait 1m0s")
}

// progressLine is a plain progress line of cp.
var progressLine = regexp.MustCompile(`^progress (\d+)/(\d+) bytes`)

// interruptedCopy runs cp (rate-limited, so it is mid-way long enough)
// and kills it with SIGKILL once it has reported at least atLeast bytes.
// It returns the last count seen.
func interruptedCopy(t *testing.T, c *cliEnv, atLeast int64, args ...string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := c.cmd(ctx, append([]string{"cp", "--limit-rate", "20MB"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var seen int64
	for sc.Scan() {
		m := progressLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		seen, _ = strconv.ParseInt(m[1], 10, 64)
		if seen >= atLeast {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("cp was not killed mid-way (reported %d bytes): %v\n%s", seen, err, errb.String())
	}
	return seen
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p) // #nosec G304 -- test file
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// lastProgress is the last progress line of a cp's output.
func lastProgress(out string) string {
	last := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "progress ") {
			last = l
		}
	}
	return last
}

var resumedAt = regexp.MustCompile(`resuming the (?:upload|download) at byte (\d+) of (\d+)`)

// TestClientCopyResumes copies a 200 MB file in and back out, killing
// each copy after 60 MB were reported and running it again: the second
// run continues from where the server (or the local part file) stands,
// and the result is checksummed.
func TestClientCopyResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 400 MB")
	}
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, d, d.AdminKey())
	sb := strings.TrimSpace(c.mustRun("create", "--disk", "1GB"))

	const size = 200 << 20
	src := filepath.Join(c.home, "big.bin")
	f, err := os.Create(src) // #nosec G304 -- test file
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{1, 2, 3}) // #nosec G404 -- test data, not a secret
	if _, err := io.CopyN(f, rng, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := sha256File(t, src)

	// Upload, interrupted.
	seen := interruptedCopy(t, c, 60<<20, src, sb+":/workspace/in/")
	if seen >= size {
		t.Fatalf("the copy finished before the kill")
	}
	state, _ := filepath.Glob(filepath.Join(c.home, "cache", "sandhold", "transfers", "*.json"))
	if len(state) != 1 {
		t.Fatalf("resume state: %v", state)
	}
	// Resumed.
	out, errOut, code := c.run("", "cp", src, sb+":/workspace/in/")
	if code != 0 {
		t.Fatalf("resumed cp: %d %s %s", code, out, errOut)
	}
	m := resumedAt.FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("the second run did not resume: %s", errOut)
	}
	off, _ := strconv.ParseInt(m[1], 10, 64)
	if off <= 0 || off >= size {
		t.Fatalf("resumed at %d of %d", off, size)
	}
	if !strings.Contains(out, "copied 209715200 bytes to "+sb+":/workspace/in/big.bin, sha256 "+want+" (checked)") {
		t.Fatalf("cp said: %s", out)
	}
	if got := strings.Fields(c.mustRun("exec", sb, "--", "sha256sum", "/workspace/in/big.bin"))[0]; got != want {
		t.Fatalf("in the sandbox: %s, want %s", got, want)
	}
	if state, _ := filepath.Glob(filepath.Join(c.home, "cache", "sandhold", "transfers", "*.json")); len(state) != 0 {
		t.Fatalf("resume state left after success: %v", state)
	}
	t.Logf("upload killed after %d bytes reported, resumed at byte %d; %s", seen, off, lastProgress(out))

	// Download, interrupted and resumed.
	dst := filepath.Join(c.home, "back")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	seen = interruptedCopy(t, c, 60<<20, sb+":in/big.bin", dst)
	part := filepath.Join(dst, "big.bin.sandhold-part")
	if fi, err := os.Stat(part); err != nil || fi.Size() == 0 {
		t.Fatalf("no part file after the interrupted download: %v", err)
	}
	out, errOut, code = c.run("", "cp", sb+":in/big.bin", dst)
	if code != 0 {
		t.Fatalf("resumed download: %d %s %s", code, out, errOut)
	}
	m = resumedAt.FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("the download did not resume: %s", errOut)
	}
	off, _ = strconv.ParseInt(m[1], 10, 64)
	if off <= 0 || off >= size {
		t.Fatalf("download resumed at %d", off)
	}
	if got := sha256File(t, filepath.Join(dst, "big.bin")); got != want {
		t.Fatalf("downloaded %s, want %s", got, want)
	}
	if _, err := os.Stat(part); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("part file left: %v", err)
	}
	t.Logf("download killed after %d bytes reported, resumed at byte %d; %s", seen, off, lastProgress(out))

	// Both sides must be SB:PATH and local: one clear line otherwise.
	_, errOut, code = c.run("", "cp", src, dst)
	oneLineErr(t, errOut, code, "one side of cp must be SB:PATH")
}

// ptyOutput collects what a process writes to its terminal.
type ptyOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan struct{} // signalled on every write
}

func (p *ptyOutput) Write(b []byte) (int, error) {
	p.mu.Lock()
	p.buf.Write(b)
	p.mu.Unlock()
	select {
	case p.ch <- struct{}{}:
	default:
	}
	return len(b), nil
}

func (p *ptyOutput) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// waitFor waits until the output (after from) matches re.
func (p *ptyOutput) waitFor(t *testing.T, from int, re *regexp.Regexp) int {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		s := p.String()
		if loc := re.FindStringIndex(s[from:]); loc != nil {
			return from + loc[1]
		}
		select {
		case <-p.ch:
		case <-deadline:
			t.Fatalf("terminal never showed %s; it shows:\n%q", re, s[from:])
		}
	}
}

// TestClientShellPTY runs `sandhold shell` on a real pseudo-terminal:
// raw mode, the size passed on at start and on SIGWINCH, Ctrl-C goes to
// the sandbox (the client lives on), and exit ends the client with 0.
func TestClientShellPTY(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, d, d.AdminKey())
	sb := strings.TrimSpace(c.mustRun("create"))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := c.cmd(ctx, "shell", sb)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Skip("no pseudo-terminal on this host:", err)
	}
	defer func() { _ = ptmx.Close() }()
	out := &ptyOutput{ch: make(chan struct{}, 1)}
	go func() { _, _ = io.Copy(out, ptmx) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	send := func(s string) {
		if _, err := ptmx.Write([]byte(s)); err != nil {
			t.Fatalf("type %q: %v", s, err)
		}
	}

	// The shell's arithmetic proves the line ran remotely (the typed
	// text itself, echoed, holds no "42").
	send("stty size; echo hi-$((6*7))\r")
	pos := out.waitFor(t, 0, regexp.MustCompile(`30 100\r\n(?:.*\r\n)?hi-42`))

	// Resize: the kernel sends the client SIGWINCH; the sandbox's
	// terminal follows.
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		send("stty size\r")
		next := out.waitFor(t, pos, regexp.MustCompile(`stty size\r\n[^\n]*?\d+ \d+\r\n`))
		if strings.Contains(out.String()[pos:next], "40 120") {
			pos = next
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox never saw the new size: %q", out.String()[pos:])
		}
		pos = next
	}

	// Ctrl-C interrupts the remote command, not the client.
	// sh prints "started" and then becomes sleep: once "started-5" shows,
	// the foreground job is that process (bash made it so before the
	// exec), so the ^C is for it.
	send("sh -c 'echo started-$((2+3)); exec sleep 101'; echo not-$((3+4))\r")
	pos = out.waitFor(t, pos, regexp.MustCompile(`started-5`))
	send("\x03")
	// Type on only at the next prompt: bash mishandles typeahead that
	// arrives while it recovers from the interrupt.
	pos = out.waitFor(t, pos, regexp.MustCompile(`\^C(?s:.*)\$ `))
	send("echo after-$((1+1))\r")
	pos = out.waitFor(t, pos, regexp.MustCompile(`after-2`))
	if strings.Contains(out.String(), "not-7") {
		t.Fatal("Ctrl-C did not reach the sandbox's foreground command")
	}
	select {
	case err := <-exited:
		t.Fatalf("the client ended on Ctrl-C: %v", err)
	default:
	}

	send("exit\r")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("shell ended with %v: %q", err, out.String()[pos:])
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the client did not end after exit: %q", out.String())
	}
}

// TestClientAuditRemote: the remote audit commands show records with
// control characters escaped, and verify the chain on the server.
func TestClientAuditRemote(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, d, d.AdminKey())
	sb := strings.TrimSpace(c.mustRun("create"))
	hostile := "\x1b[31mred\x1b]0;title\x07\u009b2J\u202eevil"
	c.mustRun("exec", sb, "--", "echo", hostile)

	out := c.mustRun("audit", "--remote", "tail", "-n", "50")
	if strings.ContainsAny(out, "\x1b\x07\u009b\u202e") {
		t.Fatalf("a control character reached the terminal raw:\n%q", out)
	}
	// The server answers the stored strings; the client escapes them
	// (audit.JSONLine), so the operator sees the characters named.
	if !strings.Contains(out, `\u001b[31mred\u001b]0;title\u0007\u009b2J\u202eevil`) {
		t.Fatalf("the record is not shown escaped:\n%s", out)
	}
	if out := c.mustRun("audit", "--remote", "verify"); !strings.HasPrefix(out, "audit chain intact: ") {
		t.Fatalf("verify: %q", out)
	}
}

// TestClientLoginPrompt: on a terminal, login asks for the key without
// echoing it, and saves it.
func TestClientLoginPrompt(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.cmd(ctx, "login", "http://"+d.Addr())
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Skip("no pseudo-terminal on this host:", err)
	}
	defer func() { _ = ptmx.Close() }()
	out := &ptyOutput{ch: make(chan struct{}, 1)}
	go func() { _, _ = io.Copy(out, ptmx) }()
	pos := out.waitFor(t, 0, regexp.MustCompile(`API key for http://`+regexp.QuoteMeta(d.Addr())+`: `))
	if _, err := ptmx.Write([]byte(d.AdminKey() + "\r")); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, pos, regexp.MustCompile(`logged in to`))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("login: %v: %q", err, out.String())
	}
	if strings.Contains(out.String(), d.AdminKey()) || strings.Contains(out.String(), "shk_") {
		t.Fatalf("the key was echoed: %q", out.String())
	}
	if ls := c.mustRun("ls"); !strings.HasPrefix(ls, "ID") {
		t.Fatalf("ls after login: %q", ls)
	}
}
