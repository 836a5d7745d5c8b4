package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns a terminal (the pty's follower) and its controller.
func openPTY(t *testing.T) (tty, ctl *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no pseudo-terminals here:", err)
	}
	t.Cleanup(func() { _ = ctl.Close() })
	if err := unix.IoctlSetPointerInt(int(ctl.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ctl.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tty.Close() })
	return tty, ctl
}

// readLines reads n lines the terminal's controller got.
func readLines(t *testing.T, ctl *os.File, n int) []string {
	t.Helper()
	sc := bufio.NewScanner(ctl)
	var out []string
	for len(out) < n && sc.Scan() {
		out = append(out, strings.TrimRight(sc.Text(), "\r"))
	}
	return out
}

// TestLogsAreTextOnATerminalAndJSONElsewhere: a person at a terminal reads
// "15:04:05 INFO  message  key=value"; a pipe (a collector, the journal)
// gets JSON lines; redaction applies to both.
func TestLogsAreTextOnATerminalAndJSONElsewhere(t *testing.T) {
	tty, ctl := openPTY(t)
	secret := "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
	NewLogger(tty, "info").Info("sandhold listening", "addr", "127.0.0.1:8080", "token", secret)
	line := readLines(t, ctl, 1)
	if len(line) != 1 || !regexp.MustCompile(`^\d\d:\d\d:\d\d INFO  sandhold listening  addr=127\.0\.0\.1:8080 token=`).MatchString(line[0]) {
		t.Fatalf("terminal line %q", line)
	}
	if strings.Contains(line[0], secret) {
		t.Fatalf("a token reached the terminal's log: %q", line[0])
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	NewLogger(w, "info").Info("sandhold listening", "addr", "127.0.0.1:8080", "token", secret)
	_ = w.Close()
	b, _ := io.ReadAll(r)
	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(b), &rec); err != nil || rec["msg"] != "sandhold listening" || rec["addr"] != "127.0.0.1:8080" {
		t.Fatalf("pipe line %q: %v", b, err)
	}
	if strings.Contains(string(b), secret) {
		t.Fatalf("a token reached the JSON log: %s", b)
	}
}

// TestStartupSaysWhatToDoNext: on a terminal the server prints the
// console's URL and the CLI's login line (a wildcard listen address as the
// loopback one); elsewhere one "next steps" record carries the same.
func TestStartupSaysWhatToDoNext(t *testing.T) {
	tty, ctl := openPTY(t)
	var logs bytes.Buffer
	d := &Daemon{addr: "0.0.0.0:8123", stderr: tty, log: NewLogger(&logs, "info")}
	d.cfg.DataDir = "/var/lib/sandhold"
	d.announce()
	got := strings.Join(readLines(t, ctl, 5), "\n")
	for _, want := range []string{"http://127.0.0.1:8123/", "sandhold login http://127.0.0.1:8123", "/var/lib/sandhold/admin.key"} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal's next steps lack %q:\n%s", want, got)
		}
	}

	d.stderr = &bytes.Buffer{}
	d.cfg.APIKey = "operator-chosen"
	d.announce()
	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &rec); err != nil || rec["msg"] != "next steps" ||
		rec["login"] != "sandhold login http://127.0.0.1:8123" || rec["admin_key"] != "$SANDBOX_API_KEY" {
		t.Fatalf("next steps record %q: %v", logs.String(), err)
	}
	if d.stderr.(*bytes.Buffer).Len() != 0 {
		t.Fatalf("text on a non-terminal stderr: %q", d.stderr)
	}
}
