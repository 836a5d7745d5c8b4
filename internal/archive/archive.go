// Package archive extracts and packs zip and tar archives inside a sandbox
// without letting a hostile archive escape or exhaust the destination.
//
// Attacks it stops: zip-slip (`../x`, absolute, backslash and drive-letter
// names), symlink-then-write-through (`a -> /etc` followed by `a/passwd`),
// hardlinks out of the tree, device/fifo/socket entries, setuid bits,
// decompression bombs (ratio, total and per-entry caps counted on the real
// decompressed bytes, never on header claims), entry-count bombs (refused
// before anything is allocated per entry, also for zip central directories),
// overlapping-entry zip bombs, local headers that disagree with the central
// directory, headers that lie about sizes, duplicate and case-colliding
// names, and an archive file swapped between the validation and the writing
// pass.
//
// # Extraction model
//
// Extract runs two passes over the archive. Pass one reads every entry and
// decompresses every byte into a counter, enforcing every cap while counting;
// nothing is written. Only if pass one accepts the whole archive does pass
// two start: it extracts into a fresh staging directory
// `.sandhold-extract-<random>` created INSIDE the destination directory (not
// its parent: the destination may be a mount point such as /workspace, where
// a rename from the parent would fail with EXDEV and the staged bytes would
// escape the workspace quota), re-checking every entry against the pass-one
// manifest and re-enforcing every cap. Then each top-level entry is renamed
// into place with renameat2(RENAME_NOREPLACE) on directory descriptors. If
// any top-level name already exists in the destination the extraction is
// refused with a conflict error (checked before staging and again,
// atomically, by the no-replace rename); nothing is merged. On any refusal,
// error or cancellation the already-moved entries are moved back, the staging
// directory is removed, and a destination directory that Extract created is
// removed again: no file is left behind. The move renames across
// directories, so under Landlock ABI >= 2 the sandbox's ruleset must grant
// LANDLOCK_ACCESS_FS_REFER on the destination tree; without it the rename
// fails with EXDEV and the extraction is refused (cleanly).
//
// All file system access goes through an *os.Root opened on the destination
// directory, so no name is ever joined onto a host path, and a symlink
// planted concurrently by the sandbox's own processes cannot lead a write
// outside the destination. What the root does NOT protect: a process of the
// same user racing inside the destination can rename or replace staged files
// (within the destination) while Extract runs; the directory permission
// pass (Root.Chmod) may then act on a different entry inside the destination.
//
// # Policy (documented choices)
//
//   - Entry count: MaxEntries caps the archive's entries that create
//     something, and separately the directories implied by paths (`a/b/c`
//     implies a and a/b), so a deep-path archive creates at most
//     2*MaxEntries objects rather than MaxEntries*MaxDepth.
//   - Hardlinks are always refused (even ones to earlier entries).
//   - Symlinks are refused unless Limits.AllowSymlinks. When allowed, a target
//     must be relative, must stay inside the destination when resolved
//     lexically from the link's directory, and may only pass through
//     directories of the same archive (never through another symlink or a
//     name the archive does not create). Symlinks are created last, after
//     every file and directory, and no entry may have a symlink entry as a
//     parent, so nothing is ever written through a symlink.
//   - Modes: setuid, setgid and sticky bits are stripped (and counted in
//     Result.Stripped); permissions are masked with modeMask (0755, as a
//     umask of 022: no group/other write). Directories always keep owner
//     rwx so the owner can manage them. Ownership, times, xattrs and PAX
//     records are never applied: files belong to the calling user.
//   - Nested archives are written as plain files and never extracted.
//   - Names: `.` and empty components are dropped (`./a//b` is `a/b`); a
//     `./` root entry is ignored; names must be valid UTF-8 without control
//     characters; the top-level prefix `.sandhold-extract-` is reserved.
//   - Files are not fsynced one by one; the all-or-nothing guarantee is
//     about what becomes visible, not about durability across a crash.
package archive

import (
	"errors"
	"fmt"
	"io/fs"

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

func (l Limits) validate() error {
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

func refuse(entry string, kind Kind, reason, detail string) *Error {
	return &Error{Entry: entry, Kind: kind, Reason: reason, Detail: detail}
}

// asError returns err as an *Error, naming entry when err is not one already.
func asError(entry string, err error, kind Kind, reason string) error {
	if err == nil {
		return nil
	}
	var ae *Error
	if errors.As(err, &ae) {
		return err
	}
	return &Error{Entry: entry, Kind: kind, Reason: reason, Err: err}
}

// modeMask caps permissions like a umask of 022: no group/other write and
// never setuid, setgid or sticky.
const modeMask fs.FileMode = 0o755

// specialBits are the bits that are stripped and counted.
const specialBits = fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// stagingPrefix names the staging directory; archive entries may not use it.
const stagingPrefix = ".sandhold-extract-"

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
