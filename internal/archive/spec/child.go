package spec

import (
	"io/fs"
	"syscall"

	"github.com/sandhold/sandhold/internal/archive/deny"
)

// ChildName is argv[0] of the extractor program: cmd/sandhold-archive, or
// a binary that links package archive (the server, a test binary) when
// the init runs it in its place; sandboxinit.Entry hands such a start to Child.
const ChildName = "sandhold-archive"

// Child is the extractor's main, set by package archive's init: nil in a
// binary without the codecs (the lean init).
var Child func() int

// Ops of ChildReq.
const (
	ChildExtract = "extract"
	ChildPack    = "pack"
)

// The extractor's descriptors: the request arrives on stdin, the reply
// leaves on stdout; the archive (extract: a regular file) or the pipe
// (pack) is descriptor 3.
const ChildFD = 3

// ChildReq is one extraction or packing, as the init sends it to the
// extractor on its standard input. The init has checked the path, the
// descriptor's type and (pack) the tree before; the extractor opens its
// root itself, inside the sandbox, as the sandbox user.
type ChildReq struct {
	Op string `json:"op"`
	// Top is the writable tree (extract) or "/" (pack) the extractor opens
	// as its *os.Root; Rel is the directory below it.
	Top    string    `json:"top"`
	Rel    string    `json:"rel"`
	Path   string    `json:"path"` // the absolute directory, for the policy
	Format Format    `json:"format,omitempty"`
	Limits Limits    `json:"limits"`
	Deny   deny.Deny `json:"deny"`
	// TimeoutMS bounds the run (the init also kills it then).
	TimeoutMS int64 `json:"timeout_ms"`
}

// ChildResp is the extractor's reply on its standard output.
type ChildResp struct {
	Result Result `json:"result"`
	// Refused is the archive code's refusal (an *Error without Err).
	Refused *Error `json:"refused,omitempty"`
	// Code (an errno name, or "" for an internal failure) and Msg are any
	// other failure.
	Failed bool   `json:"failed,omitempty"`
	Code   string `json:"code,omitempty"`
	Msg    string `json:"msg,omitempty"`
}

// PackPolicy is the sensitive-path policy for one object an archive would
// carry out: its absolute path p, its name in the archive and what its
// descriptor (or fstatat without following) says. The init's check walk
// applies it before the extractor starts, the extractor on every entry.
func PackPolicy(p, name string, fi fs.FileInfo, d deny.Deny) error {
	if d.Denied(p) {
		return &Error{Entry: name, Reason: deny.ReasonSensitive, Kind: KindForbidden,
			Detail: "the directory holds a file the sensitive-path policy refuses; archive a directory without it"}
	}
	if !d.AllowHardLinked && fi.Mode().IsRegular() && deny.WritableTree(p) != "" {
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
			return &Error{Entry: name, Reason: deny.ReasonHardLinked, Kind: KindForbidden,
				Detail: "the directory holds a file with more than one hard link (it may be a second name of a sensitive file); archive a directory without it"}
		}
	}
	return nil
}
