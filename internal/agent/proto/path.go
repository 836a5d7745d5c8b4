package proto

import (
	"path/filepath"
	"strings"
)

// MaxPath is the longest path accepted, the kernel's PATH_MAX.
const MaxPath = 4096

// CheckPath validates a sandbox path: absolute, clean, no NUL, not too
// long. It is exported so the server refuses bad paths before a round trip;
// it is portable so the client side compiles on every platform.
func CheckPath(p string) error {
	switch {
	case p == "":
		return Invalidf("empty path")
	case len(p) > MaxPath:
		return &Error{Code: "ENAMETOOLONG", Msg: "path too long"}
	case strings.IndexByte(p, 0) >= 0:
		return Invalidf("path holds a NUL byte")
	case !strings.HasPrefix(p, "/"):
		return Invalidf("path must be absolute")
	case filepath.Clean(p) != p:
		return Invalidf("path must be clean (no '.', '..' or repeated '/')")
	}
	return nil
}
