package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
)

// Answers carry strings the server does not choose — commands and paths
// an agent typed, file names a sandbox made — and people read them in
// terminals and browsers. encoding/json already writes control characters
// as \u escapes; the bidirectional formatting characters it writes raw,
// and a raw U+202E in a record shows the rest of its line reversed
// wherever the answer is shown. Every JSON answer therefore writes them
// as \u escapes too: the decoded strings are exactly the stored ones
// (JSON escaping is lossless), only their raw bytes never reach a display.

// isBidiControl reports the formatting characters that reorder text:
// ALM, LRM/RLM, the embeddings and overrides (U+202A–U+202E) and the
// isolates (U+2066–U+2069).
func isBidiControl(r rune) bool {
	switch {
	case r == 0x061C, r == 0x200E, r == 0x200F:
		return true
	case r >= 0x202A && r <= 0x202E:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// escapeBidi rewrites every bidirectional control in encoded JSON as a
// \u escape. Outside strings JSON is ASCII, so every such rune it finds
// lies inside a string, where the escape decodes to the same rune.
func escapeBidi(b []byte) []byte {
	// Every one of them is encoded starting 0xD8 (U+061C) or 0xE2.
	if bytes.IndexByte(b, 0xE2) < 0 && bytes.IndexByte(b, 0xD8) < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if isBidiControl(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// encodeJSON writes v as one JSON line, bidirectional controls escaped.
// escapeHTML is encoding/json's own option (the envelope writer keeps its
// default; huma's format turns it off).
func encodeJSON(w io.Writer, v any, escapeHTML bool) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeBidi(buf.Bytes()))
	return err
}

// jsonFormat is huma's JSON format with bidirectional controls escaped.
var jsonFormat = huma.Format{
	Marshal:   func(w io.Writer, v any) error { return encodeJSON(w, v, false) },
	Unmarshal: json.Unmarshal,
}
