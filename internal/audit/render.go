package audit

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Rendering records for people.
//
// A record stores what happened byte for byte (the hash covers the real
// bytes), so a command with a newline, an ESC sequence (\x1b[2J clears a
// terminal) or a bidi override (U+202E reorders what follows) is stored as
// given. Printed raw, such a record can clear the operator's screen, fake
// further records on new lines or show a command other than the one that
// ran. Every rendering — `sandhold audit tail`, GET /v1/audit, MCP and
// tools/call's audit.query, a dashboard — therefore shows records through
// Display, which makes every such character visible as an escape.

// Visible returns s with every character that could change how the text
// around it is shown escaped as visible text: C0 and C1 controls and DEL
// (\n, \r, \t, \x1b, \u009b …), format characters (bidi embeddings,
// overrides and isolates U+202A–U+202E, U+2066–U+2069, marks U+200E/F and
// U+061C, zero-width characters, the soft hyphen, the BOM, tag characters),
// the line and paragraph separators U+2028/U+2029, and bytes that are not
// UTF-8 (\xff). A backslash is left alone, so ordinary commands read as
// typed; the stored record, not its rendering, is the evidence.
func Visible(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && Hidden(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case Hidden(r) && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case Hidden(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Hidden reports the characters Visible escapes: controls (Cc), format
// characters (Cf: bidi, zero-width, tags) and the line/paragraph
// separators (Zl, Zp). Every renderer of server text uses this one set.
func Hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || Hidden(r) {
			return true
		}
		i += size
	}
	return false
}

// Display returns a copy of r for showing to a person or a client: every
// string, including the detail's keys and values at any depth, through
// Visible. Hash and PrevHash are unchanged; they are verified against the
// stored record (Verify), never against a rendering.
func (r Record) Display() Record {
	out := r
	out.Actor, out.Role, out.ClientAddr = Visible(r.Actor), Visible(r.Role), Visible(r.ClientAddr)
	out.Action, out.Target, out.Sandbox, out.Verdict = Visible(r.Action), Visible(r.Target), Visible(r.Sandbox), Visible(r.Verdict)
	if r.Detail != nil {
		out.Detail, _ = visibleValue(r.Detail, 0).(map[string]any)
	}
	return out
}

// maxRenderDepth bounds the walk of a detail object (they are JSON decoded
// from the store, so finite, but a hostile nesting must not exhaust the
// stack); deeper values are replaced by a marker.
const maxRenderDepth = 32

func visibleValue(v any, depth int) any {
	if depth > maxRenderDepth {
		return "…"
	}
	switch x := v.(type) {
	case string:
		return Visible(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = visibleValue(e, depth+1)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[Visible(k)] = visibleValue(e, depth+1)
		}
		return out
	default:
		return v
	}
}
