package layer

import (
	"strings"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/archive/spec"
)

// maxComponentLen is NAME_MAX on Linux.
const maxComponentLen = 255

// cleanName validates an entry's name and returns it without `.` and empty
// components ("" is the layer's root, a `./` entry). Absolute names and
// `..` are refused, as are NUL and other control characters, invalid
// UTF-8 and backslashes (the archive rules), and components that only a
// whiteout's last component may use.
func cleanName(raw string, lim Limits) (string, *spec.Error) {
	if raw == "" {
		return "", refuse(raw, spec.ReasonEmptyName, spec.KindInvalid, "")
	}
	if len(raw) > lim.MaxPathLen {
		return "", refuse(raw, spec.ReasonNameTooLong, spec.KindInvalid, "")
	}
	if !utf8.ValidString(raw) {
		return "", refuse(raw, spec.ReasonInvalidUTF8, spec.KindInvalid, "")
	}
	for _, r := range raw {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return "", refuse(raw, spec.ReasonControlChar, spec.KindInvalid, "")
		}
		if r == '\\' {
			return "", refuse(raw, spec.ReasonBackslash, spec.KindInvalid, "")
		}
	}
	if raw[0] == '/' {
		return "", refuse(raw, spec.ReasonAbsolute, spec.KindInvalid, "")
	}
	parts := make([]string, 0, 8)
	// Bounded by len(raw) <= MaxPathLen.
	for p := range strings.SplitSeq(raw, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", refuse(raw, spec.ReasonParentComponent, spec.KindInvalid, "")
		}
		if len(p) > maxComponentLen {
			return "", refuse(raw, spec.ReasonNameTooLong, spec.KindInvalid, "a component exceeds 255 bytes")
		}
		parts = append(parts, p)
		if len(parts) > lim.MaxDepth {
			return "", refuse(raw, spec.ReasonTooDeep, spec.KindInvalid, "")
		}
	}
	for _, p := range parts[:max(len(parts)-1, 0)] {
		if strings.HasPrefix(p, whiteoutPrefix) {
			return "", refuse(raw, spec.ReasonReservedName, spec.KindInvalid, "a directory named like a whiteout")
		}
	}
	return strings.Join(parts, "/"), nil
}

// split returns a cleaned name's directory ("" at the top) and last
// component.
func split(name string) (dir, base string) {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// join is the cleaned name of base in dir.
func join(dir, base string) string {
	if dir == "" {
		return base
	}
	return dir + "/" + base
}
