package audit

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Rendering records for people.
//
// A record stores what happened byte for byte (the hash covers the real
// bytes), and the API returns it so: GET /v1/audit, MCP and tools/call's
// audit.query answer the stored strings in JSON, whose escaping is lossless
// (a tab is \t, a backslash followed by t is \\t). A command with a
// newline, an ESC sequence (\x1b[2J clears a terminal) or a bidi override
// (U+202E reorders what follows) printed raw could clear the operator's
// screen, fake further records on new lines or show a command other than
// the one that ran; so every rendering for a person — `sandhold audit
// tail` (local and --remote), the CLI's other output, the console — shows
// server text through Escape or JSONLine, which make every such character
// visible as an escape and double the backslash, so an escape written by
// the rendering and one that was in the record never look alike.

// Escape is the unambiguous rendering of s for a person: every backslash
// doubled, then Visible. `a<TAB>b` reads a\tb and the typed `a\tb` reads
// a\\tb.
func Escape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return Visible(s)
	}
	return Visible(strings.ReplaceAll(s, `\`, `\\`))
}

// JSONLine renders v (a record) as one line of JSON whose every character
// is printable: encoding/json escapes C0 controls (and the backslash, and
// the quote) but leaves DEL, the C1 controls (U+0080–U+009F, which some
// terminals obey as escape introducers) and bidirectional overrides raw;
// those are \u-escaped here. Outside strings a JSON document is ASCII
// punctuation, so every such rune is inside a string, where \uXXXX is valid
// and decodes to the same string.
func JSONLine(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	s := string(b)
	if !needsEscape(s) {
		return s, nil
	}
	var out strings.Builder
	out.Grow(len(s) + 16)
	for _, r := range s {
		if r != utf8.RuneError && !Hidden(r) {
			out.WriteRune(r)
			continue
		}
		if r > 0xFFFF {
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&out, `\u%04x`, r)
	}
	return out.String(), nil
}

// Visible returns s with every character that could change how the text
// around it is shown escaped as visible text: C0 and C1 controls and DEL
// (\n, \r, \t, \x1b, \u009b …), format characters (bidi embeddings,
// overrides and isolates U+202A–U+202E, U+2066–U+2069, marks U+200E/F and
// U+061C, zero-width characters, the soft hyphen, the BOM, tag characters),
// the line and paragraph separators U+2028/U+2029, and bytes that are not
// UTF-8 (\xff). A backslash is left alone, so Visible alone is ambiguous
// (a tab and a typed backslash-t read alike): it is for text shown beside
// its own source, not for records; Escape is the rendering of a record.
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
