// Package deny holds the sensitive-path policy's matcher and the
// hard-link rule: what the init's file calls and the extractor program
// (cmd/sandhold-archive) both apply. It is its own small package so the
// extractor need not link the init's code (package agent), nor the init
// the archive codecs.
package deny

import (
	"io/fs"
	"path"
	"strings"
)

// WritableTrees are where the sandbox user can create files (the trees
// landlock leaves writable), and so where a hard link can give a file a
// second, innocent name. One list for the init and for the server.
var WritableTrees = [...]string{"/workspace", "/tmp", "/dev/shm"}

// WritableTree names the writable tree holding the absolute, clean path
// p, or "".
func WritableTree(p string) string {
	for _, t := range WritableTrees {
		if p == t || strings.HasPrefix(p, t+"/") {
			return t
		}
	}
	return ""
}

// HardLinked reports whether a file at the resolved path p with the given
// mode (fs.FileMode bits) and link count is one the file calls refuse to
// read or carry out: a regular file with more than one name in a writable
// tree, which may be a second name for a sensitive file (`ln
// .ssh/id_rsa notes.txt`) that the name-based policy would not recognise.
func HardLinked(p string, mode uint32, nlink uint64) bool {
	return nlink > 1 && fs.FileMode(mode).IsRegular() && WritableTree(p) != ""
}

// Deny lists the sensitive names a walk never reports or descends into:
// Names are base names (".env", "id_rsa"), Dirs are directory suffixes of
// one or more components (".ssh", ".config/gh"). The workspace package
// owns the table; the init only applies it, with the same matcher
// (Denied) the server uses.
type Deny struct {
	Names []string `json:"names,omitempty"`
	Dirs  []string `json:"dirs,omitempty"`
	// Paths are absolute paths denied with everything below them.
	Paths []string `json:"paths,omitempty"`
	// Procs denies /proc/<pid>, /proc/self and /proc/thread-self and
	// everything below them: the init serves the file calls, so they
	// would name the init's own memory, environment and descriptors.
	Procs bool `json:"procs,omitempty"`
	// AllowHardLinked lets grep read, and pack carry out, regular files
	// with more than one hard link in the writable trees (HardLinked).
	// The zero value refuses them: a request that forgot the field fails
	// closed.
	AllowHardLinked bool `json:"allow_hard_linked,omitempty"`
}

// Denied reports whether the absolute, clean path p is sensitive under d:
// its base name is in Names, any of its directories (p itself included)
// ends with one of Dirs, or it is one of Paths or below one.
func (d Deny) Denied(p string) bool {
	if p == "" {
		return false
	}
	if d.Procs {
		if rest, ok := strings.CutPrefix(p, "/proc/"); ok {
			first, _, _ := strings.Cut(rest, "/")
			if first == "self" || first == "thread-self" || isDigits(first) {
				return true
			}
		}
	}
	for _, x := range d.Paths {
		if x != "" && (p == x || strings.HasPrefix(p, strings.TrimSuffix(x, "/")+"/")) {
			return true
		}
	}
	for _, n := range d.Names {
		if path.Base(p) == n {
			return true
		}
	}
	for _, dir := range d.Dirs {
		dir = strings.Trim(dir, "/")
		if dir == "" {
			continue
		}
		// "/a/.config/gh/x" holds ".config/gh" as whole components.
		if strings.HasSuffix(p, "/"+dir) || strings.Contains(p+"/", "/"+dir+"/") {
			return true
		}
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ReasonSensitive and ReasonHardLinked are the refusals of the
// sensitive-path policy in archives.
const (
	ReasonSensitive  = "sensitive_path"
	ReasonHardLinked = "hard_linked_file"
)
