// Package spec holds the vocabulary of package archive — formats, limits,
// results, refusals — without any of its codecs, and the request and reply
// of the extractor program (cmd/sandhold-archive) the sandbox init runs for
// each extract or pack. The init imports this package, never package
// archive: tar, zip, gzip, zstd and all of crypto stay out of every
// sandbox's PID 1 (see BENCHMARKS.md, "The extractor out of the init").
// Package archive re-exports every name here.
package spec

import (
	"fmt"
	"math"

	"github.com/sandhold/sandhold/internal/fault"
)

// Format names an archive format. Detect finds it from magic bytes.
type Format string

// The supported formats.
const (
	FormatZip    Format = "zip"
	FormatTar    Format = "tar"
	FormatTarGz  Format = "tar.gz"
	FormatTarZst Format = "tar.zst"
)

// Limits are the caps of one extraction or packing. Every field is a literal
// cap: the zero value allows nothing (it fails closed); negative values are
// refused. Start from DefaultLimits and tighten.
type Limits struct {
	// MaxEntries caps the archive entries extracted, and separately the
	// directories implied by their paths. Pack caps the objects it visits.
	MaxEntries int
	// MaxTotalBytes caps the total ACTUAL bytes written (counted while
	// decompressing, never taken from headers). Callers pass
	// min(cap, remaining disk quota).
	MaxTotalBytes int64
	// MaxEntryBytes caps the actual bytes of one file.
	MaxEntryBytes int64
	// MaxRatio caps decompressed:compressed, per entry and over the whole
	// archive, once the bytes exceed RatioFloor.
	MaxRatio int
	// RatioFloor is the number of decompressed bytes an entry (and the whole
	// archive) may produce before MaxRatio applies, so that a small, very
	// compressible file (10 KB of spaces) is not mistaken for a bomb.
	RatioFloor int64
	// MaxDepth caps the number of path components of a name.
	MaxDepth int
	// MaxPathLen caps the byte length of a name (and of a symlink target).
	MaxPathLen int
	// AllowSymlinks permits symlink entries whose targets stay inside the
	// destination (see the package doc). Default false: all are refused.
	AllowSymlinks bool
}

// DefaultLimits returns the default caps of SECURITY-RULES.md.
func DefaultLimits() Limits {
	return Limits{
		MaxEntries:    10_000,
		MaxTotalBytes: 5 << 30, // SANDBOX_MAX_DISK default; callers pass the remaining quota
		MaxEntryBytes: 1 << 30,
		MaxRatio:      100,
		RatioFloor:    1 << 20,
		MaxDepth:      32,
		MaxPathLen:    1024,
	}
}

func (l Limits) Validate() error {
	if l.MaxEntries < 0 || l.MaxTotalBytes < 0 || l.MaxEntryBytes < 0 || l.MaxRatio < 0 ||
		l.RatioFloor < 0 || l.MaxDepth < 0 || l.MaxPathLen < 0 {
		return &Error{Kind: KindInvalid, Reason: ReasonInvalidLimits, Detail: "negative limit"}
	}
	return nil
}

// Result counts what an extraction wrote or a packing emitted.
type Result struct {
	Files    int
	Dirs     int // including directories implied by entry paths
	Symlinks int
	Bytes    int64 // content bytes of regular files (counted, and checked against the headers)
	Stripped int   // entries whose setuid/setgid/sticky bits were removed
	Skipped  int   // Pack only: symlinks, special files and unrepresentable names left out
}

// Kind groups refusals into the edge's error kinds.
type Kind string

// The kinds an *Error carries.
const (
	KindInvalid   Kind = "invalid"   // malformed archive or name
	KindForbidden Kind = "forbidden" // a well-formed entry the policy refuses (links, devices)
	KindTooLarge  Kind = "too_large" // a cap was hit
	KindConflict  Kind = "conflict"  // duplicate, case collision, existing target
	KindCanceled  Kind = "canceled"  // the context ended
	KindInternal  Kind = "internal"  // an I/O failure that is not the archive's fault
)

// Reasons name the rule that refused an entry.
const (
	ReasonInvalidLimits     = "invalid_limits"
	ReasonDestination       = "invalid_destination"
	ReasonUnsupportedFormat = "unsupported_format"
	ReasonFormatMismatch    = "format_mismatch"
	ReasonEmptyArchive      = "empty_archive"
	ReasonCorrupt           = "corrupt_archive"
	ReasonEmptyName         = "empty_name"
	ReasonAbsolute          = "absolute_path"
	ReasonParentComponent   = "parent_component"
	ReasonBackslash         = "backslash"
	ReasonDriveLetter       = "drive_letter"
	ReasonControlChar       = "control_character"
	ReasonInvalidUTF8       = "invalid_utf8"
	ReasonNameTooLong       = "name_too_long"
	ReasonTooDeep           = "too_deep"
	ReasonReservedName      = "reserved_name"
	ReasonTrailingSlash     = "trailing_slash"
	ReasonSymlink           = "symlink_refused"
	ReasonSymlinkOutside    = "symlink_outside"
	ReasonWriteThrough      = "write_through_symlink"
	ReasonHardlink          = "hardlink_refused"
	ReasonSpecialFile       = "special_file"
	ReasonUnsupportedEntry  = "unsupported_entry"
	ReasonDuplicate         = "duplicate_name"
	ReasonCaseCollision     = "case_collision"
	ReasonPathConflict      = "path_conflict"
	ReasonTooManyEntries    = "too_many_entries"
	ReasonEntryTooLarge     = "entry_too_large"
	ReasonTotalTooLarge     = "total_too_large"
	ReasonRatio             = "ratio_exceeded"
	ReasonSizeMismatch      = "size_mismatch"
	ReasonChecksum          = "checksum_mismatch"
	ReasonOverlap           = "overlapping_entries"
	ReasonHeaderMismatch    = "local_header_mismatch"
	ReasonEncrypted         = "encrypted_entry"
	ReasonCompression       = "unsupported_compression"
	ReasonPrependedData     = "prepended_data"
	ReasonSourceChanged     = "source_changed"
	ReasonTargetExists      = "target_exists"
	ReasonCanceled          = "canceled"
	ReasonNoSpace           = "no_space"
	ReasonIO                = "io_error"
	ReasonChanged           = "changed_while_packing"
	// ReasonPolicy is a refusal by the caller's EntryCheck or NameCheck
	// when it gave no *Error of its own.
	ReasonPolicy = "policy"
)

// Error is every refusal of this package: which entry, which rule, which
// kind. Error() is safe to show to clients (no host paths); Err, reachable
// through errors.Unwrap, may carry operator detail such as an *os.PathError.
type Error struct {
	Entry  string // the entry's name as written in the archive ("" for the archive itself)
	Reason string // one of the Reason constants
	Kind   Kind
	Detail string // short, client-safe explanation
	Err    error  // underlying cause, for logs
}

func (e *Error) Error() string {
	s := "archive: " + e.Reason
	if e.Entry != "" {
		s += fmt.Sprintf(" (entry %q)", e.Entry)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Fault is e as the edge's error kind; its public message is prefix
// followed by e's own message, which names the entry and the rule and
// carries no host path.
func (e *Error) Fault(prefix string) error {
	kind := fault.Internal
	switch e.Kind {
	case KindInvalid:
		kind = fault.Invalid
	case KindForbidden:
		kind = fault.Forbidden
	case KindTooLarge:
		kind = fault.TooLarge
	case KindConflict:
		kind = fault.Conflict
	case KindCanceled:
		kind = fault.Timeout
	}
	return fault.Wrap(kind, e, prefix+e.Error())
}

// BlocksBytes is n blocks of size bytes (a statfs count), saturating
// instead of overflowing.
func BlocksBytes(n uint64, size int64) int64 {
	if size <= 0 {
		return 0
	}
	if n > uint64(math.MaxInt64/size) { //nolint:gosec // G115: size > 0 was checked
		return math.MaxInt64
	}
	return int64(n) * size //nolint:gosec // G115: bounded by the check above
}
