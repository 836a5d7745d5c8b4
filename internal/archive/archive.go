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
	"io/fs"

	"github.com/sandhold/sandhold/internal/archive/spec"
)

// The vocabulary lives in package spec (which the sandbox init imports
// without the codecs); these are the same types and values.
type (
	Format = spec.Format
	Limits = spec.Limits
	Result = spec.Result
	Kind   = spec.Kind
	Error  = spec.Error
)

// DefaultLimits returns the default caps of SECURITY-RULES.md.
func DefaultLimits() Limits { return spec.DefaultLimits() }

// The formats, kinds and reasons of package spec.
const (
	FormatZip               = spec.FormatZip
	FormatTar               = spec.FormatTar
	FormatTarGz             = spec.FormatTarGz
	FormatTarZst            = spec.FormatTarZst
	KindInvalid             = spec.KindInvalid
	KindForbidden           = spec.KindForbidden
	KindTooLarge            = spec.KindTooLarge
	KindConflict            = spec.KindConflict
	KindCanceled            = spec.KindCanceled
	KindInternal            = spec.KindInternal
	ReasonInvalidLimits     = spec.ReasonInvalidLimits
	ReasonDestination       = spec.ReasonDestination
	ReasonUnsupportedFormat = spec.ReasonUnsupportedFormat
	ReasonFormatMismatch    = spec.ReasonFormatMismatch
	ReasonEmptyArchive      = spec.ReasonEmptyArchive
	ReasonCorrupt           = spec.ReasonCorrupt
	ReasonEmptyName         = spec.ReasonEmptyName
	ReasonAbsolute          = spec.ReasonAbsolute
	ReasonParentComponent   = spec.ReasonParentComponent
	ReasonBackslash         = spec.ReasonBackslash
	ReasonDriveLetter       = spec.ReasonDriveLetter
	ReasonControlChar       = spec.ReasonControlChar
	ReasonInvalidUTF8       = spec.ReasonInvalidUTF8
	ReasonNameTooLong       = spec.ReasonNameTooLong
	ReasonTooDeep           = spec.ReasonTooDeep
	ReasonReservedName      = spec.ReasonReservedName
	ReasonTrailingSlash     = spec.ReasonTrailingSlash
	ReasonSymlink           = spec.ReasonSymlink
	ReasonSymlinkOutside    = spec.ReasonSymlinkOutside
	ReasonWriteThrough      = spec.ReasonWriteThrough
	ReasonHardlink          = spec.ReasonHardlink
	ReasonSpecialFile       = spec.ReasonSpecialFile
	ReasonUnsupportedEntry  = spec.ReasonUnsupportedEntry
	ReasonDuplicate         = spec.ReasonDuplicate
	ReasonCaseCollision     = spec.ReasonCaseCollision
	ReasonPathConflict      = spec.ReasonPathConflict
	ReasonTooManyEntries    = spec.ReasonTooManyEntries
	ReasonEntryTooLarge     = spec.ReasonEntryTooLarge
	ReasonTotalTooLarge     = spec.ReasonTotalTooLarge
	ReasonRatio             = spec.ReasonRatio
	ReasonSizeMismatch      = spec.ReasonSizeMismatch
	ReasonChecksum          = spec.ReasonChecksum
	ReasonOverlap           = spec.ReasonOverlap
	ReasonHeaderMismatch    = spec.ReasonHeaderMismatch
	ReasonEncrypted         = spec.ReasonEncrypted
	ReasonCompression       = spec.ReasonCompression
	ReasonPrependedData     = spec.ReasonPrependedData
	ReasonSourceChanged     = spec.ReasonSourceChanged
	ReasonTargetExists      = spec.ReasonTargetExists
	ReasonCanceled          = spec.ReasonCanceled
	ReasonNoSpace           = spec.ReasonNoSpace
	ReasonIO                = spec.ReasonIO
	ReasonChanged           = spec.ReasonChanged
	ReasonPolicy            = spec.ReasonPolicy
)

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
