package archive

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxComponentLen is NAME_MAX on Linux: a longer component cannot be created.
const maxComponentLen = 255

// cleanName validates an entry name and returns it with `.` and empty
// components dropped. An empty result means the destination root itself
// (a `./` entry); callers decide whether that is allowed.
func cleanName(raw string, isDir bool, lim Limits) (string, *Error) {
	if raw == "" {
		return "", refuse(raw, KindInvalid, ReasonEmptyName, "")
	}
	if len(raw) > lim.MaxPathLen {
		return "", refuse(raw, KindInvalid, ReasonNameTooLong, "")
	}
	if e := checkChars(raw); e != nil {
		return "", e
	}
	if raw[0] == '/' {
		return "", refuse(raw, KindInvalid, ReasonAbsolute, "")
	}
	if len(raw) >= 2 && raw[1] == ':' && isASCIILetter(raw[0]) {
		return "", refuse(raw, KindInvalid, ReasonDriveLetter, "")
	}
	if !isDir && strings.HasSuffix(raw, "/") {
		return "", refuse(raw, KindInvalid, ReasonTrailingSlash, "a non-directory entry ends in /")
	}
	var b strings.Builder
	b.Grow(len(raw))
	depth := 0
	// The loop is bounded by len(raw) <= MaxPathLen.
	for p := range strings.SplitSeq(raw, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", refuse(raw, KindInvalid, ReasonParentComponent, "")
		}
		if len(p) > maxComponentLen {
			return "", refuse(raw, KindInvalid, ReasonNameTooLong, "a component exceeds 255 bytes")
		}
		if depth == 0 && strings.HasPrefix(p, stagingPrefix) {
			return "", refuse(raw, KindInvalid, ReasonReservedName, "")
		}
		depth++
		if depth > lim.MaxDepth {
			return "", refuse(raw, KindInvalid, ReasonTooDeep, "")
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(p)
	}
	return b.String(), nil
}

// checkChars refuses invalid UTF-8, C0/C1 control characters (NUL
// included) and backslashes.
func checkChars(s string) *Error {
	if !utf8.ValidString(s) {
		return refuse(s, KindInvalid, ReasonInvalidUTF8, "")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return refuse(s, KindInvalid, ReasonControlChar, "")
		}
		if r == '\\' {
			return refuse(s, KindInvalid, ReasonBackslash, "")
		}
	}
	return nil
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// foldKey maps every rune to the smallest member of its simple case-folding
// orbit, so names equal up to case (`A.txt`, `a.txt`, `K`/Kelvin sign) share a key.
func foldKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		m := r
		// SimpleFold orbits have at most a handful of members.
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < m {
				m = f
			}
		}
		b.WriteRune(m)
	}
	return b.String()
}

// parentOf returns the directory part of a cleaned name ("" for top level).
func parentOf(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return ""
}
