package shell

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/outbuf"
)

// newParser is an exec session with no process, for the marker parser.
func newParser() (*Session, *command) {
	s := &Session{Kind: KindExec, nonce: "abc123", ready: make(chan struct{}), isReady: true, scroll: outbuf.NewOutput(scrollKeep)}
	c := &command{id: "7", out: outbuf.NewOutput(keepFull), done: make(chan struct{}), status: StatusRunning}
	s.cur = c
	return s, c
}

const rs, us = "\x1e", "\x1f"

func TestFeedMarkers(t *testing.T) {
	mark := func(nonce, id, rc, cwd string) string {
		return rs + "SH" + nonce + ":" + id + ":" + rc + ":" + cwd + us
	}
	for _, c := range []struct {
		name   string
		chunks []string
		out    string
		done   bool
		exit   int
		cwd    string
	}{
		{name: "plain", chunks: []string{"hello\r\n"}, out: "hello\r\n"},
		{name: "marker-ends-command", chunks: []string{"hi\r\n" + mark("abc123", "7", "3", "/tmp")}, out: "hi\r\n", done: true, exit: 3, cwd: "/tmp"},
		{name: "marker-split-across-reads", chunks: []string{"a" + rs + "SHabc", "123:7:0:/w", "ork" + us + "tail"}, out: "a", done: true, cwd: "/work"},
		{name: "wrong-nonce-is-output", chunks: []string{mark("forged", "7", "0", "/") + "x"}, out: mark("forged", "7", "0", "/") + "x"},
		{name: "other-command-id-ignored", chunks: []string{mark("abc123", "6", "0", "/a")}, cwd: "/a"},
		{name: "empty-id-prompt-ignored", chunks: []string{"x" + mark("abc123", "", "0", "/b") + "y"}, out: "xy", cwd: "/b"},
		{name: "garbage-status-is-output", chunks: []string{mark("abc123", "7", "NaN", "/")}, out: mark("abc123", "7", "NaN", "/")},
		{name: "cwd-with-colons", chunks: []string{mark("abc123", "7", "1", "/a:b:c")}, done: true, exit: 1, cwd: "/a:b:c"},
		{name: "lone-separator-then-text", chunks: []string{"a" + rs + "b" + us + "c"}, out: "a" + rs + "b" + us + "c"},
		{name: "unterminated-separator-beyond-cap", chunks: []string{rs + strings.Repeat("z", markerMax+10)}, out: rs + strings.Repeat("z", markerMax+10)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, cmd := newParser()
			for _, ch := range c.chunks {
				s.feed([]byte(ch))
			}
			got, _ := cmd.out.Text()
			// Output held back in carry is not output yet.
			if got != c.out && got+string(s.carry) != c.out {
				t.Fatalf("output %q (carry %q), want %q", got, s.carry, c.out)
			}
			select {
			case <-cmd.done:
				if !c.done {
					t.Fatal("command ended")
				}
				if *cmd.exit != c.exit {
					t.Fatalf("exit %d, want %d", *cmd.exit, c.exit)
				}
			default:
				if c.done {
					t.Fatal("command did not end")
				}
			}
			if c.cwd != "" && s.cwd != c.cwd {
				t.Fatalf("cwd %q, want %q", s.cwd, c.cwd)
			}
		})
	}
}

func TestAnsiQuoteRoundTrip(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash on the host to evaluate the quoting")
	}
	for _, c := range []struct{ name, in string }{
		{"empty", ""},
		{"quotes", `it's "q" \ back\slash`},
		{"controls", "\x00\x01\x03\x04\x1b[31m\r\n\t\x7f"},
		{"utf8", "héllo ✓ 日本"},
		{"high-bytes", "\xff\xfe\x80"},
		{"long", strings.Repeat("a'\\\x01", 2000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := strings.ReplaceAll(c.in, "\x00", "") // bash strings hold no NUL
			pieces := ansiQuote(in)
			var script strings.Builder
			for i, p := range pieces {
				if len(p) > lineChunk+8 {
					t.Fatalf("piece %d is %d bytes", i, len(p))
				}
				for _, b := range []byte(p) {
					if b < 0x20 || b >= 0x7f {
						t.Fatalf("piece %d holds byte %#x", i, b)
					}
				}
				op := "+="
				if i == 0 {
					op = "="
				}
				script.WriteString("v" + op + p + "\n")
			}
			script.WriteString(`printf %s "$v"`)
			out, err := exec.Command(bash, "--norc", "-c", script.String()).Output()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != in {
				t.Fatalf("round trip %q, want %q", out, in)
			}
		})
	}
}

func TestTruncateMiddle(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		max  int
		keep bool
	}{
		{"short", "abc", 10, true},
		{"exact", "abcdefghij", 10, true},
		{"zero-disables", strings.Repeat("x", 100), 0, true},
		{"runes-not-bytes", strings.Repeat("é", 10), 10, true},
		{"long", strings.Repeat("a", 50) + strings.Repeat("b", 50), 10, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := truncateMiddle(c.in, c.max)
			if c.keep != (got == c.in) {
				t.Fatalf("truncateMiddle(%d chars, %d) = %q", utf8.RuneCountInString(c.in), c.max, got)
			}
			if !c.keep && (!strings.HasPrefix(got, "aaaaa\n") || !strings.HasSuffix(got, "\nbbbbb") || !strings.Contains(got, "90 characters truncated")) {
				t.Fatalf("got %q", got)
			}
		})
	}
}

func TestValidPrefix(t *testing.T) {
	full := []byte("a✓")
	for i := 0; i <= len(full); i++ {
		got := validPrefix(full[:i])
		if !utf8.Valid(got) {
			t.Fatalf("prefix %d: %q not valid", i, got)
		}
		if want := i; i == 2 || i == 3 {
			if len(got) != 1 {
				t.Fatalf("prefix %d kept %q, want the incomplete rune held", i, got)
			}
		} else if len(got) != want {
			t.Fatalf("prefix %d: %q", i, got)
		}
	}
	if got := validPrefix([]byte("\xff\xff\xff\xff\xff")); len(got) != 5 {
		t.Fatalf("invalid bytes are passed on (JSON replaces them): %q", got)
	}
}

func TestParseInfo(t *testing.T) {
	out := strings.Join([]string{
		"os=Linux", "os_version=Debian GNU/Linux 12 (bookworm)", "arch=x86_64", "user=sandbox", "home=/workspace", "tz=UTC",
		"python=python3|/usr/bin/python3|Python 3.11.2", "python=python3.11|/usr/bin/python3.11|Python 3.11.2",
		"node=node|/usr/bin/node|v20.1.0", "util=git", "util=grep", "util=strange",
		"net=  sl  local_address rem_address   st", "net=   0: 0100007F:1F90 00000000:0000 0A 0",
		"net=   1: 0100007F:0050 0100007F:1234 01 0", "garbage line",
	}, "\n")
	in := parseInfo(out)
	sys := in.Detail.System
	if sys.OS != "linux" || sys.Arch != "x86_64" || sys.User != "sandbox" || in.HomeDir != "/workspace" || sys.Timezone != "UTC" {
		t.Fatalf("system %+v", sys)
	}
	if len(sys.OccupiedPorts) != 1 || sys.OccupiedPorts[0] != "8080" {
		t.Fatalf("ports %v (only LISTEN sockets count)", sys.OccupiedPorts)
	}
	py := in.Detail.Runtime.Python
	if len(py) != 1 || *py[0].Ver != "3.11.2" || strings.Join(py[0].Alias, ",") != "python3,python3.11" {
		t.Fatalf("python %+v", py)
	}
	if n := in.Detail.Runtime.NodeJS; len(n) != 1 || *n[0].Ver != "20.1.0" {
		t.Fatalf("node %+v", n)
	}
	b, _ := json.Marshal(in.Detail.Utils)
	if !bytes.Contains(b, []byte(`{"category":"vcs","tools":[{"name":"git","description":""}]}`)) || !bytes.Contains(b, []byte(`"other"`)) {
		t.Fatalf("utils %s", b)
	}
}

func TestArgsCheck(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	sp := func(v string) *string { return &v }
	for _, c := range []struct {
		name  string
		args  Checker
		field string // "" = valid
	}{
		{"shell-ok", ShellExecArgs{Command: "ls", Timeout: f(1.5), HardTimeout: f(600), NoChangeTimeout: i(1)}, ""},
		{"shell-negative-timeout", ShellExecArgs{Command: "ls", Timeout: f(-1)}, "timeout"},
		{"shell-timeout-too-long", ShellExecArgs{Command: "ls", Timeout: f(601)}, "timeout"},
		{"shell-no-change-zero", ShellExecArgs{Command: "ls", NoChangeTimeout: i(0)}, "no_change_timeout"},
		{"shell-nul", ShellExecArgs{Command: "ls\x00"}, "command"},
		{"shell-huge", ShellExecArgs{Command: strings.Repeat("x", maxCommandBytes+1)}, "command"},
		{"shell-bad-id", ShellExecArgs{Command: "ls", ID: sp("../x")}, "id"},
		{"shell-dotdot-dir", ShellExecArgs{Command: "ls", ExecDir: sp("/a/../b")}, "exec_dir"},
		{"write-too-big", ShellWriteArgs{ID: "s", Input: strings.Repeat("x", MaxInputBytes+1)}, "input"},
		{"wait-missing-id", ShellWaitArgs{}, "id"},
		{"bash-ok", BashExecArgs{Command: "ls", MaxOutputLength: i(0)}, ""},
		{"bash-huge-output", BashExecArgs{Command: "ls", MaxOutputLength: i(BashKeep + 1)}, "max_output_length"},
		{"bash-snapshot", BashCreateArgs{SnapshotPath: sp("/x")}, "snapshot_path"},
		{"kill-sigstop", BashKillArgs{SessionID: "s", Signal: "SIGSTOP"}, "signal"},
		{"kill-lowercase", BashKillArgs{SessionID: "s", Signal: "sigint"}, ""},
		{"output-wait-negative", BashOutputArgs{SessionID: "s", WaitTimeout: f(-2)}, "wait_timeout"},
		{"terminal-too-wide", TerminalArgs{Cols: 5000}, "rows"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.args.Validate()
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("unexpected %v", err)
			case c.field != "" && (err == nil || !strings.Contains(fieldOf(err), c.field)):
				t.Fatalf("err %v, want field %s", err, c.field)
			}
		})
	}
}

func TestSessionRead(t *testing.T) {
	// await reports no_change_timeout for a quiet command without waiting
	// for it to end.
	s, c := newParser()
	c.lastOut = time.Now().Add(-time.Hour)
	if st := s.await(t.Context(), c, 0, time.Millisecond, time.Minute); st != StatusNoChange {
		t.Fatalf("status %s", st)
	}
}

// TestWaitCountsQuietFromItsStart: a wait on a command that has been
// quiet for longer than the no-change window (a program waiting for the
// input a shell.write just sent) is not answered no_change_timeout at
// once; the window starts with the wait. Here the window (a minute) is
// longer than the wait's own limit, so the wait ends at its limit with the
// command still running; counted from the last output, an hour ago, it
// ended at its first check with no_change_timeout.
func TestWaitCountsQuietFromItsStart(t *testing.T) {
	s := &Session{}
	c := &command{done: make(chan struct{}), lastOut: time.Now().Add(-time.Hour), status: StatusRunning}
	if got := s.await(t.Context(), c, time.Second, time.Minute, MaxWait); got != StatusRunning {
		t.Fatalf("wait on a long-quiet command: %q, want %q (its limit reached, no no-change answer)", got, StatusRunning)
	}
	// A command that goes on printing nothing after the wait began is
	// answered no_change_timeout once the window has passed.
	if got := s.await(t.Context(), c, MaxWait, 200*time.Millisecond, MaxWait); got != StatusNoChange {
		t.Fatalf("wait with a short window: %q, want %q", got, StatusNoChange)
	}
}

// TestCommandLines runs what start types for a command in bash: the
// command runs whole, every line fits a terminal's canonical line, and a
// command that fits one line with its run is typed as one line (one
// prompt, one marker).
func TestCommandLines(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash on the host to run the lines")
	}
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	longDir := "/" + strings.Repeat("d", 2500)
	for _, c := range []struct {
		name    string
		payload string
		o       ExecOptions
		lines   int // 0: several
		want    string
	}{
		{"short", "hello", ExecOptions{}, 1, "hello"},
		{"quotes-controls", "it's \"q\" \\ \x01\x1b[31m\t✓", ExecOptions{}, 1, "it's \"q\" \\ \x01\x1b[31m\t✓"},
		{"dir", "in dir", ExecOptions{Dir: "/"}, 1, "in dir"},
		{"strict-missing-dir", "not run", ExecOptions{Dir: "/no/such/dir", Strict: true}, 1, ""},
		{"long", strings.Repeat("a'\\\x01", 2000), ExecOptions{}, 0, strings.Repeat("a'\\\x01", 2000)},
		{"last-piece-apart", strings.Repeat("x", 2980), ExecOptions{Dir: longDir}, 2, strings.Repeat("x", 2980)},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.Command = "printf %s " + quote(c.payload)
			script := commandLines("7", o)
			if !strings.HasSuffix(script, "\n") {
				t.Fatalf("the last line is not ended: %q", script)
			}
			lines := strings.Split(strings.TrimSuffix(script, "\n"), "\n")
			if c.lines == 0 && len(lines) < 2 || c.lines > 0 && len(lines) != c.lines {
				t.Fatalf("%d lines, want %d (0: several)", len(lines), c.lines)
			}
			for i, l := range lines {
				if len(l)+1 > maxLine {
					t.Fatalf("line %d is %d bytes", i, len(l)+1)
				}
			}
			out, err := exec.Command(bash, "--norc", "-c", script+`printf '|%s' "$__sh_id"`).Output()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want+"|7" {
				t.Fatalf("ran %q, want %q", out, c.want+"|7")
			}
		})
	}
}
