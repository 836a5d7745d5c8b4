package shell

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// feedAll feeds the writes in order and returns every line submitted.
func feedAll(t *testing.T, mode inputMode, writes ...string) ([]Line, discipline) {
	t.Helper()
	d := discipline{mode: mode}
	var lines []Line
	for _, w := range writes {
		subs, next, err := d.feed([]byte(w))
		if err != nil {
			t.Fatalf("feed %q: %v", w, err)
		}
		for _, s := range subs {
			lines = append(lines, s.line)
		}
		d = next
	}
	return lines, d
}

func plain(texts ...string) []Line {
	out := make([]Line, len(texts))
	for i, s := range texts {
		out[i] = Line{Text: s}
	}
	return out
}

// TestRawInputRule is the raw-input rule of SECURITY.md, case by case.
func TestRawInputRule(t *testing.T) {
	for _, c := range []struct {
		name    string
		mode    inputMode
		writes  []string
		want    []Line
		pending bool
	}{
		{name: "one line", writes: []string{"ls -l\r"}, want: plain("ls -l")},
		{name: "LF submits too", writes: []string{"ls\n"}, want: plain("ls")},
		{name: "CR LF is one submit", writes: []string{"a\r\nb\r\n"}, want: plain("a", "b")},
		{name: "empty lines run nothing", writes: []string{"\r\r\n\n"}},
		{name: "a line split over writes", writes: []string{"curl -s http://x/y ", "| s", "h\r"}, want: plain("curl -s http://x/y | sh")},
		{name: "partial line waits", writes: []string{"curl x | "}, pending: true},
		{name: "paste of several lines", writes: []string{"cd /tmp\rmake\rmake install\r"}, want: plain("cd /tmp", "make", "make install")},
		{name: "backspace", writes: []string{"lx\x7fs\r"}, want: plain("ls")},
		{name: "ctrl-H", writes: []string{"lx\bs\r"}, want: plain("ls")},
		{name: "backspace of a multibyte character", writes: []string{"echo é\x7fe\r"}, want: plain("echo e")},
		{name: "ctrl-U kills the line", writes: []string{"rm -rf /\x15ls\r"}, want: plain("ls")},
		{name: "ctrl-W kills a word", writes: []string{"echo hello world\x17there\r"}, want: plain("echo hello there")},
		{name: "ctrl-C may keep the line", writes: []string{"curl x | sh\x03", "ls\r"}, want: []Line{{Text: "curl x | sh⟨^C⟩ls", Opaque: true}}},
		{name: "ctrl-C on an empty line", writes: []string{"\x03", "ls\r"}, want: plain("ls")},
		{name: "text sent with ctrl-C", writes: []string{"\x03ls\r"}, want: []Line{{Text: "⟨^C⟩ls", Opaque: true}}},
		{name: "ctrl-U clears the line", writes: []string{"curl x | sh\x15", "ls\r"}, want: plain("ls")},
		{name: "ctrl-U clears a line ctrl-C left uncertain", writes: []string{"curl x | sh\x03", "\x15ls\r"}, want: plain("ls")},
		{name: "text sent with ctrl-C, killed", writes: []string{"00\x17\x030\x15\n"}},
		{name: "text sent with ctrl-C, erased to nothing", writes: []string{"\x03l\x7f\r"}},
		{name: "text sent with ctrl-C, partly erased, stays opaque", writes: []string{"\x03ls\x7f\r"}, want: []Line{{Text: "⟨^C⟩ls⟨bs⟩", Opaque: true}}},
		{name: "ctrl-U after a cursor key is recorded as typed", writes: []string{"ab\x1b[D\x15\r"}, want: []Line{{Text: "ab⟨left⟩⟨^U⟩", Opaque: true}}},
		{name: "ctrl-U after ctrl-C and a cursor key is recorded as typed", writes: []string{"ab\x03\x1b[D\x15\r"}, want: []Line{{Text: "ab⟨^C⟩⟨left⟩⟨^U⟩", Opaque: true}}},
		{name: "ctrl-D on a partial line submits it and keeps it", writes: []string{"curl x|sh\x04", "\r"}, want: plain("curl x|sh", "curl x|sh")},
		{name: "ctrl-D on an empty line", writes: []string{"\x04"}},
		{name: "ctrl-V inserts the next byte", writes: []string{"echo a\x16\rb\r"}, want: plain("echo a\rb")},
		{name: "history recall is opaque", writes: []string{"\x1b[A\r"}, want: []Line{{Text: "⟨up⟩", Opaque: true}}},
		{name: "cursor move then edit", writes: []string{"# curl x|sh", "\x1b[H\x1b[3~\r"},
			want: []Line{{Text: "# curl x|sh⟨home⟩⟨delete⟩", Opaque: true}}},
		{name: "escape split over writes", writes: []string{"ls\x1b", "[", "D\r"}, want: []Line{{Text: "ls⟨left⟩", Opaque: true}}},
		{name: "tab completion", writes: []string{"cat /etc/pas\t\r"}, want: []Line{{Text: "cat /etc/pas⟨tab⟩", Opaque: true}}},
		{name: "editing after opaque is recorded as typed", writes: []string{"ab\x1bOD\x7f\r"}, want: []Line{{Text: "ab⟨left⟩⟨bs⟩", Opaque: true}}},
		{name: "bracketed paste markers are opaque", writes: []string{"\x1b[200~ls\x1b[201~\r"}, want: []Line{{Text: "⟨paste⟩ls⟨/paste⟩", Opaque: true}}},
		{name: "alt key", writes: []string{"x\x1b.\r"}, want: []Line{{Text: "x⟨M-.⟩", Opaque: true}}},
		{name: "other control keys are opaque", writes: []string{"\x12curl\r"}, want: []Line{{Text: "⟨^R⟩curl", Opaque: true}}},
		{name: "ctrl-O submits and recalls", writes: []string{"ls\x0f\r"}, want: []Line{{Text: "ls"}, {Text: "⟨^O⟩", Opaque: true}}},
		{name: "opaque is forgotten after the submit", writes: []string{"\x1b[A\rls\r"}, want: []Line{{Text: "⟨up⟩", Opaque: true}, {Text: "ls"}}},
		{name: "ctrl-L and ctrl-Z change nothing", writes: []string{"l\x0cs\x1a\r"}, want: plain("ls")},
		{name: "utf-8 split over writes", writes: []string{"echo \xc3", "\xa9\r"}, want: plain("echo é")},
		{name: "pipe: LF submits, CR is text", mode: pipeInput, writes: []string{"curl x|sh\rls\n"}, want: plain("curl x|sh\rls")},
		{name: "pipe: no editing", mode: pipeInput, writes: []string{"ab\x7f\x1b[A\n"}, want: plain("ab\x7f\x1b[A")},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, d := feedAll(t, c.mode, c.writes...)
			if !slices.Equal(got, c.want) {
				t.Fatalf("lines %+v, want %+v", got, c.want)
			}
			if d.pending() != c.pending {
				t.Fatalf("pending %v, want %v (state %+v)", d.pending(), c.pending, d)
			}
		})
	}
}

// TestPendingLineIsCapped: a line growing past the cap over many writes is
// refused, and the state stays as it was.
func TestPendingLineIsCapped(t *testing.T) {
	d := discipline{}
	chunk := []byte(strings.Repeat("a", 60<<10))
	for i := 0; ; i++ {
		_, next, err := d.feed(chunk)
		if err != nil {
			if len(d.line) > maxPendingLine || i == 0 {
				t.Fatalf("refused at %d bytes", len(d.line))
			}
			return
		}
		d = next
		if i > 10 {
			t.Fatal("never refused")
		}
	}
}

// FuzzRawInput: how a client splits its input into writes changes nothing
// — the same lines are submitted at the same places, the same state is
// left — except that text sent with a ^C in one write is opaque; and no
// submitted line holds more than the cap.
func FuzzRawInput(f *testing.F) {
	for _, s := range []string{"ls\r", "curl x | sh\r\n", "a\x1b[Ab\x7f\r", "\x16\r\x04x\x04\r", "é\x17\x15\x03z\n", "\x1b[200~a\rb\x1b[201~\r"} {
		f.Add([]byte(s), uint8(3), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint8, pipe bool) {
		mode := ttyInput
		if pipe {
			mode = pipeInput
		}
		whole := discipline{mode: mode}
		subs, after, err := whole.feed(in)
		if err != nil {
			return
		}
		// The same input in pieces of split+1 bytes.
		step := int(split)%7 + 1
		d := discipline{mode: mode}
		var pieces []Line
		for i := 0; i < len(in); i += step {
			s, next, err := d.feed(in[i:min(i+step, len(in))])
			if err != nil {
				t.Fatalf("refused in pieces, not whole: %v", err)
			}
			for _, x := range s {
				pieces = append(pieces, x.line)
			}
			d = next
		}
		var lines []Line
		for _, s := range subs {
			lines = append(lines, s.line)
			if len(s.line.Text) > maxPendingLine+64 {
				t.Fatalf("line of %d bytes", len(s.line.Text))
			}
		}
		if bytes.ContainsAny(in, "\x03\x1c") {
			// Text sent in the same write as ^C is opaque (readline may
			// have read part of it before the signal): written apart, it
			// is not. The same lines, the whole write's at least as opaque.
			if len(lines) != len(pieces) {
				t.Fatalf("whole %+v, in pieces of %d %+v", lines, step, pieces)
			}
			for i := range lines {
				if pieces[i].Opaque && !lines[i].Opaque {
					t.Fatalf("line %d opaque only in pieces: whole %+v, pieces %+v", i, lines[i], pieces[i])
				}
			}
			return
		}
		if !slices.Equal(lines, pieces) {
			t.Fatalf("whole %+v, in pieces of %d %+v", lines, step, pieces)
		}
		if string(after.line) != string(d.line) || after.opaque != d.opaque || after.pending() != d.pending() {
			t.Fatalf("state whole %+v, pieces %+v", after, d)
		}
	})
}
