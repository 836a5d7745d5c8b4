package shell

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/fault"
)

// Raw input: the bytes a client writes to a shell's stdin (shell.write,
// bash.write, the terminal WebSocket). A shell runs a line when a submit
// key reaches it, so the server follows each session's input as a line
// editor would and, at every submit key, has the lines it completes
// assessed and recorded before a byte of the write reaches the shell
// (shell.input, inputgate.go). This file is that model: pure, so it is
// tested and fuzzed on its own. The rule, in SECURITY.md as "the raw-input
// rule":
//
//   - On a terminal (a PTY), CR and LF submit the line (CR LF is one
//     submit). Printable text is appended; Backspace/DEL erase a character,
//     ^U the line, ^W a word; ^L and ^Z change nothing; ^V makes the next byte text. ^C and ^\ may or may not
//     drop the line (bash keeps it when the signal comes while readline
//     redisplays): a line pending at the signal, and text sent with the
//     signal in the same write, are opaque — with the cursor still at the
//     end, so ^U, or erasing the longest line it can be, empties it for
//     certain (sig, full). ^D on a non-empty line
//     submits it without ending it (in cooked mode the program gets the
//     partial line; in readline nothing happens, and the whole line is
//     assessed again at its Enter). ^O submits and recalls history.
//   - Every other key — an escape sequence (arrows, Home/End, history,
//     Alt-keys, bracketed-paste markers), Tab, ^A/^E/^R/^P/^K/^Y/^T/^X
//     and the rest — has an effect the server cannot replay (a cursor
//     move, a completion, a recalled line, a key binding): the line is
//     then *opaque*. An opaque line is recorded as typed, with each such
//     key shown as ⟨name⟩, and assessed as built at run time (flagged).
//   - On a pipe (bash.write to a command's stdin) nothing is edited: LF
//     submits, every other byte is text.
//
// What the model assumes: the line editor's default bindings. A key
// rebound by the sandbox's own user (bind, set -o vi, an .inputrc) does
// what the binding says; the command that rebound it was a gated line, and
// the audit holds every line as typed.

// inputMode is what reads the input.
type inputMode uint8

const (
	// ttyInput: a PTY, read by a line editor (readline, a terminal's
	// cooked mode).
	ttyInput inputMode = iota
	// pipeInput: a pipe, read as it is.
	pipeInput
)

// Caps, with their reasons.
const (
	// maxPendingLine bounds the line the server holds for a session
	// between writes (what was typed since the last submit): an exec
	// command is capped the same (maxCommandBytes); a write that would
	// grow the line past it is refused, never assessed in part.
	maxPendingLine = maxCommandBytes
	// maxEscape bounds an escape sequence: a longer one ends as an
	// unknown key (the line is opaque anyway).
	maxEscape = 32
)

// Line is one line of raw input a submit key completed.
type Line struct {
	// Text is the line as the shell holds it, or, for an opaque line, as
	// typed with each key the server cannot replay shown as ⟨name⟩.
	Text string `json:"text" doc:"the line as typed"`
	// Opaque: typed with keys whose effect the server cannot know.
	Opaque bool `json:"opaque,omitempty" doc:"typed with keys whose effect the server cannot replay (history, completion, cursor moves): assessed as built at run time"`
}

// discipline is what the server knows of the line being typed into one
// session since its last submit. The zero value is an empty line of a
// terminal.
type discipline struct {
	mode    inputMode
	line    []byte
	opaque  bool
	esc     []byte // an escape sequence begun and not finished
	literal bool   // ^V: the next byte is text
	afterCR bool   // the last byte was CR: an LF right after is the same submit
	intr    bool   // a ^C (or ^\) came earlier in this write, on an empty line
	utf     []byte // an incomplete UTF-8 sequence waiting for its rest
	// sig: the line is opaque only by a signal (^C, ^\), which may or
	// may not have dropped what came before it; the cursor is still at
	// the end, so the line is some suffix of full, the longest it can be.
	// Erasing keys apply to full: erased down to nothing, the line is
	// empty for certain (every suffix of it is).
	sig  bool
	full []byte
}

// submission is a line a write completes, and the offset in the write just
// after its submit key.
type submission struct {
	line Line
	end  int
}

// pending reports whether part of a line waits for its submit key.
func (d *discipline) pending() bool {
	return d.pendingLine() || len(d.esc) > 0 || d.literal || len(d.utf) > 0
}

// pendingLine reports whether the line holds anything (text or an
// unknown effect).
func (d *discipline) pendingLine() bool { return len(d.line) > 0 || d.opaque || len(d.utf) > 0 }

// feed returns the lines in completes, in order (empty lines that are not
// opaque are left out: nothing runs), and the state after in. d itself is
// not changed.
func (d *discipline) feed(in []byte) ([]submission, discipline, error) {
	n := discipline{mode: d.mode, line: slices.Clone(d.line), opaque: d.opaque, esc: slices.Clone(d.esc),
		literal: d.literal, afterCR: d.afterCR, utf: slices.Clone(d.utf), sig: d.sig, full: slices.Clone(d.full)}
	var subs []submission
	submit := func(end int, keep bool) {
		n.flushUTF()
		if len(n.line) > 0 || n.opaque {
			subs = append(subs, submission{line: Line{Text: string(n.line), Opaque: n.opaque}, end: end})
		}
		if !keep {
			n.clear()
		}
	}
	for i, b := range in {
		cr := n.afterCR
		n.afterCR = false
		if n.mode == pipeInput {
			if b == '\n' {
				submit(i+1, false)
				continue
			}
			n.line = append(n.line, b)
		} else {
			n.tty(b, cr, func(keep bool) { submit(i+1, keep) })
		}
		if len(n.line) > maxPendingLine {
			return nil, *d, fault.Errorf(fault.TooLarge, "a line of input longer than %d bytes; submit it in parts", maxPendingLine)
		}
	}
	n.intr = false
	return subs, n, nil
}

// tty takes one byte of a terminal's input; submit is called for a submit
// key (keep: the line stays, as after ^D).
func (n *discipline) tty(b byte, afterCR bool, submit func(keep bool)) {
	switch {
	case n.literal:
		n.literal = false
		n.text(b)
		return
	case len(n.esc) > 0:
		n.escape(b)
		return
	case len(n.utf) > 0 && b >= 0x80:
		n.text(b)
		return
	}
	switch b {
	case '\r':
		n.afterCR = true
		submit(false)
	case '\n':
		if !afterCR {
			submit(false)
		}
	case 0x7f, 0x08: // DEL, Backspace
		n.edit("⟨bs⟩", func(l []byte) []byte { _, sz := utf8.DecodeLastRune(l); return l[:len(l)-sz] })
	case 0x15: // ^U
		n.edit("⟨^U⟩", func(l []byte) []byte { return l[:0] })
	case 0x17: // ^W
		n.edit("⟨^W⟩", func(l []byte) []byte {
			s := strings.TrimRight(string(l), " \t")
			if i := strings.LastIndexAny(s, " \t"); i >= 0 {
				s = s[:i+1]
			} else {
				s = ""
			}
			return append(l[:0], s...)
		})
	case 0x03, 0x1c: // ^C, ^\: a signal, which may or may not drop the line
		// Seen on bash: a SIGINT that arrives while readline redisplays
		// keeps the line, and what is typed next is appended to it. So a
		// line pending at the signal is opaque (kept, marked), and so is
		// text sent with the signal in one write (readline may have read
		// part of it before the signal dropped the line).
		if n.pendingLine() {
			n.signal(fmt.Sprintf("⟨^%c⟩", b+'@'))
		} else {
			n.intr = true
		}
	case 0x04: // ^D
		if len(n.line) > 0 || n.opaque {
			submit(true)
		}
	case 0x0c, 0x1a: // ^L, ^Z
	case 0x0f: // ^O: readline's operate-and-get-next
		submit(false)
		n.key("⟨^O⟩")
	case 0x16: // ^V
		n.literal = true
	case 0x1b:
		n.esc = append(n.esc[:0], b)
	case '\t':
		n.key("⟨tab⟩")
	default:
		if b < 0x20 {
			n.key(fmt.Sprintf("⟨^%c⟩", b+'@'))
			return
		}
		n.text(b)
	}
}

// text appends a byte of text (a UTF-8 sequence is kept whole).
func (n *discipline) text(b byte) {
	if n.intr {
		n.intr = false
		n.signal("⟨^C⟩")
	}
	n.utf = append(n.utf, b)
	if !utf8.FullRune(n.utf) && len(n.utf) < utf8.UTFMax {
		return
	}
	n.flushUTF()
}

// edit applies an editing key to a line the server can replay. On a line
// opaque by a signal alone it applies to the longest line it can be
// (full): erased to nothing, the line is empty for certain; else, as on
// any opaque line (the cursor may be anywhere), it is recorded as typed.
func (n *discipline) edit(name string, apply func([]byte) []byte) {
	n.flushUTF()
	if n.sig {
		if n.full = apply(n.full); len(n.full) == 0 {
			n.clear()
			return
		}
	}
	if n.opaque {
		n.line = append(n.line, name...)
		return
	}
	if len(n.line) > 0 {
		n.line = apply(n.line)
	}
}

// key records a key whose effect the server cannot replay: the line is
// opaque from here on.
func (n *discipline) key(name string) {
	if n.intr {
		n.intr = false
		name = "⟨^C⟩" + name
	}
	n.flushUTF()
	n.opaque, n.sig, n.full = true, false, n.full[:0]
	n.line = append(n.line, name...)
}

// signal records a ^C or ^\ that may or may not drop the line: it is
// opaque from here on, and, unless a key made it opaque before, opaque
// by the signal alone (sig): the line kept (what it held, the longest it
// can be) or dropped (a suffix of what follows).
func (n *discipline) signal(name string) {
	n.flushUTF()
	if !n.opaque {
		n.opaque, n.sig, n.full = true, true, append(n.full[:0], n.line...)
	}
	n.line = append(n.line, name...)
}

// clear empties the line, certain of what it holds again.
func (n *discipline) clear() {
	n.line, n.opaque, n.sig, n.full = n.line[:0], false, false, n.full[:0]
}

func (n *discipline) flushUTF() {
	n.line = append(n.line, n.utf...)
	if n.sig {
		n.full = append(n.full, n.utf...)
	}
	n.utf = n.utf[:0]
}

// escape takes a byte of an escape sequence (ESC already held).
func (n *discipline) escape(b byte) {
	n.esc = append(n.esc, b)
	done := false
	switch {
	case len(n.esc) == 2 && b != '[' && b != 'O':
		done = true // Alt-key
	case len(n.esc) == 3 && n.esc[1] == 'O':
		done = true // SS3: one final byte
	case len(n.esc) >= 3 && n.esc[1] == '[' && b >= 0x40 && b <= 0x7e:
		done = true // CSI final byte
	case len(n.esc) >= maxEscape:
		done = true
	}
	if !done {
		return
	}
	seq := string(n.esc[1:])
	n.esc = n.esc[:0]
	n.key("⟨" + escName(seq) + "⟩")
}

// escName names an escape sequence for the record.
func escName(seq string) string {
	switch seq {
	case "[A", "OA":
		return "up"
	case "[B", "OB":
		return "down"
	case "[C", "OC":
		return "right"
	case "[D", "OD":
		return "left"
	case "[H", "OH", "[1~", "[7~":
		return "home"
	case "[F", "OF", "[4~", "[8~":
		return "end"
	case "[3~":
		return "delete"
	case "[200~":
		return "paste"
	case "[201~":
		return "/paste"
	}
	if len(seq) == 1 && seq[0] >= 0x20 && seq[0] < 0x7f {
		return "M-" + seq
	}
	return fmt.Sprintf("esc %q", seq)
}
