package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/archive/spec"
)

// resolveBeneath: every name below the layer's directory descriptor, with
// no symlink followed and no mount crossed.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// Kinds of names a layer made, for duplicates, hardlinks and whiteouts.
const (
	kindDir = iota + 1
	kindFile
	kindLink
	kindWhiteout
)

// copyBuf is the size of one read while copying a file: large enough that
// a run of zeros (a hole) is skipped with one seek.
const copyBuf = 256 << 10

// Unpack reads the uncompressed layer tar stream r into dir, an empty
// directory of the store that the caller removes if Unpack fails. It
// returns what the layer holds; a refusal is a *spec.Error naming the
// entry and the rule.
func Unpack(ctx context.Context, r io.Reader, dir string, lim Limits) (Stats, error) {
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stats{}, &spec.Error{Reason: spec.ReasonDestination, Kind: spec.KindInternal, Detail: "cannot open the layer's directory", Err: err}
	}
	u := &unpacker{root: root, lim: lim, seen: make(map[string]uint8), buf: make([]byte, copyBuf), zero: make([]byte, copyBuf), dirFD: -1}
	defer u.close()
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return u.st, &spec.Error{Reason: spec.ReasonCanceled, Kind: spec.KindCanceled, Err: err}
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return u.st, &spec.Error{Reason: spec.ReasonCorrupt, Kind: spec.KindInvalid, Detail: "the layer is not a valid tar stream", Err: err}
		}
		if err := u.entry(hdr, tr); err != nil {
			return u.st, err
		}
	}
	return u.st, nil
}

type unpacker struct {
	root int
	lim  Limits
	st   Stats
	seen map[string]uint8
	// dirName and dirFD cache the last parent directory opened (entries
	// come sorted by directory).
	dirName string
	dirFD   int
	buf     []byte
	zero    []byte
}

func (u *unpacker) close() {
	if u.dirFD >= 0 {
		_ = unix.Close(u.dirFD)
	}
	_ = unix.Close(u.root)
}

func ioErr(entry string, err error) *spec.Error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return &spec.Error{Entry: entry, Reason: spec.ReasonNoSpace, Kind: spec.KindTooLarge, Detail: "the data dir is full", Err: err}
	}
	return &spec.Error{Entry: entry, Reason: spec.ReasonIO, Kind: spec.KindInternal, Err: err}
}

// count claims one more entry.
func (u *unpacker) count(entry string) error {
	if u.st.Entries >= u.lim.MaxEntries {
		return refuse(entry, spec.ReasonTooManyEntries, spec.KindTooLarge, fmt.Sprintf("a layer holds at most %d entries", u.lim.MaxEntries))
	}
	u.st.Entries++
	return nil
}

// owner maps an image's id into the range a sandbox maps.
func owner(id int) int {
	if id < 0 || id >= IDRange {
		return Nobody
	}
	return id
}

// perm is an entry's mode without setuid and setgid.
func (u *unpacker) perm(mode int64) uint32 {
	if mode&0o6000 != 0 {
		u.st.Stripped++
	}
	return uint32(mode) & 0o1777 //nolint:gosec // G115: masked to 11 bits
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	name, e := cleanName(hdr.Name, u.lim)
	if e != nil {
		return e
	}
	if name == "" {
		return nil // the layer's root ("./"): its attributes are the overlay's
	}
	dir, base := split(name)
	if base == opaqueMarker {
		return u.opaque(hdr.Name, dir)
	}
	if len(base) > len(whiteoutPrefix) && base[:len(whiteoutPrefix)] == whiteoutPrefix {
		return u.whiteout(hdr.Name, dir, base[len(whiteoutPrefix):])
	}
	if base == whiteoutPrefix[:len(whiteoutPrefix)-1] || base == whiteoutPrefix {
		return refuse(hdr.Name, spec.ReasonReservedName, spec.KindInvalid, "an empty whiteout")
	}
	prev := u.seen[name]
	isDir := hdr.Typeflag == tar.TypeDir
	if prev != 0 && (prev != kindDir || !isDir) {
		return refuse(hdr.Name, spec.ReasonDuplicate, spec.KindConflict, "the layer names this path twice")
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.mkdir(hdr, name, dir, base, prev == kindDir)
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse: //nolint:staticcheck // SA1019: TypeRegA still appears in old layers
		return u.file(hdr, name, dir, base, r)
	case tar.TypeSymlink:
		return u.symlink(hdr, name, dir, base)
	case tar.TypeLink:
		return u.hardlink(hdr, name, dir, base)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return refuse(hdr.Name, spec.ReasonSpecialFile, spec.KindForbidden, "device nodes and fifos are not allowed in a template")
	case tar.TypeXGlobalHeader:
		return nil
	}
	return refuse(hdr.Name, spec.ReasonUnsupportedEntry, spec.KindInvalid, fmt.Sprintf("entry type %q", hdr.Typeflag))
}

// parent returns a descriptor (O_PATH) of the cleaned directory name dir,
// making missing directories (root's, 0755). A symlink or a file on the
// way is refused: nothing is written through one.
func (u *unpacker) parent(entry, dir string) (int, error) {
	if dir == "" {
		return u.root, nil
	}
	if u.dirFD >= 0 && u.dirName == dir {
		return u.dirFD, nil
	}
	fd, err := openBeneath(u.root, dir, unix.O_PATH|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		fd, err = u.makeParents(entry, dir)
	}
	if err != nil {
		var se *spec.Error
		if errors.As(err, &se) {
			return -1, se
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
			return -1, refuse(entry, spec.ReasonWriteThrough, spec.KindForbidden, "a parent of this entry is a symlink or not a directory")
		}
		return -1, ioErr(entry, err)
	}
	if u.dirFD >= 0 {
		_ = unix.Close(u.dirFD)
	}
	u.dirName, u.dirFD = dir, fd
	return fd, nil
}

// makeParents makes each missing directory of dir, one component at a time.
func (u *unpacker) makeParents(entry, dir string) (int, error) {
	cur := ""
	fd := -1
	// Bounded by the name's depth (cleanName).
	for next := range strings.SplitSeq(dir, "/") {
		at := u.root
		if fd >= 0 {
			at = fd
		}
		err := unix.Mkdirat(at, next, 0o755)
		switch {
		case err == nil:
			u.seen[join(cur, next)] = kindDir
			if cerr := u.count(entry); cerr != nil {
				closeIf(fd)
				return -1, cerr
			}
		case errors.Is(err, unix.EEXIST):
		default:
			closeIf(fd)
			return -1, err
		}
		nfd, err := openBeneath(at, next, unix.O_PATH|unix.O_DIRECTORY)
		closeIf(fd)
		if err != nil {
			return -1, err
		}
		fd = nfd
		cur = join(cur, next)
	}
	return fd, nil
}

func closeIf(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}

func openBeneath(dirFD int, name string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: resolveBeneath} //nolint:gosec // G115: open flags are positive
	for {
		fd, err := unix.Openat2(dirFD, name, &how)
		if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			return fd, err
		}
	}
}

func (u *unpacker) mkdir(hdr *tar.Header, name, dir, base string, exists bool) error {
	at, err := u.parent(hdr.Name, dir)
	if err != nil {
		return err
	}
	if !exists {
		if err := u.count(hdr.Name); err != nil {
			return err
		}
		if err := unix.Mkdirat(at, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return ioErr(hdr.Name, err)
		}
		u.seen[name] = kindDir
	}
	fd, err := openBeneath(at, base, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return refuse(hdr.Name, spec.ReasonPathConflict, spec.KindConflict, "not a directory")
		}
		return ioErr(hdr.Name, err)
	}
	defer func() { _ = unix.Close(fd) }()
	return u.attrs(hdr, fd)
}

// attrs sets an open entry's owner, mode and times (the mode after the
// owner: chown clears set-id bits, and those are gone anyway).
func (u *unpacker) attrs(hdr *tar.Header, fd int) error {
	if err := unix.Fchown(fd, owner(hdr.Uid), owner(hdr.Gid)); err != nil {
		return ioErr(hdr.Name, err)
	}
	if err := unix.Fchmod(fd, u.perm(hdr.Mode)); err != nil {
		return ioErr(hdr.Name, err)
	}
	ts := times(hdr.ModTime)
	if err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH); err != nil {
		return ioErr(hdr.Name, err)
	}
	return nil
}

func times(t time.Time) []unix.Timespec {
	ts := unix.NsecToTimespec(t.UnixNano())
	return []unix.Timespec{ts, ts}
}

func (u *unpacker) file(hdr *tar.Header, name, dir, base string, r io.Reader) error {
	left := u.lim.MaxBytes - u.st.Bytes
	if hdr.Size < 0 || hdr.Size > left {
		// Refused before a byte is written: a 10 GB sparse file's header
		// says so.
		return refuse(hdr.Name, spec.ReasonTotalTooLarge, spec.KindTooLarge, fmt.Sprintf("the template's layers may hold at most %d bytes", u.lim.MaxBytes))
	}
	at, err := u.parent(hdr.Name, dir)
	if err != nil {
		return err
	}
	if err := u.count(hdr.Name); err != nil {
		return err
	}
	fd, err := unix.Openat(at, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.EEXIST) {
			return refuse(hdr.Name, spec.ReasonPathConflict, spec.KindConflict, "a directory made for another entry is in the way")
		}
		return ioErr(hdr.Name, err)
	}
	defer func() { _ = unix.Close(fd) }()
	u.seen[name] = kindFile
	n, err := u.copy(fd, r, left)
	if err != nil {
		var se *spec.Error
		if errors.As(err, &se) {
			se.Entry = hdr.Name
			return se
		}
		return ioErr(hdr.Name, err)
	}
	if n != hdr.Size {
		return refuse(hdr.Name, spec.ReasonSizeMismatch, spec.KindInvalid, "the entry's content is shorter than its header says")
	}
	u.st.Bytes += n
	return u.attrs(hdr, fd)
}

// copy writes r's bytes to fd, seeking over runs of zeros (the file stays
// sparse where the image's was), and counts the actual bytes against left.
func (u *unpacker) copy(fd int, r io.Reader, left int64) (int64, error) {
	var n int64
	hole := false
	for {
		k, err := io.ReadFull(r, u.buf)
		if k > 0 {
			if n += int64(k); n > left {
				return n, refuse("", spec.ReasonTotalTooLarge, spec.KindTooLarge, "the template's layers hold too many bytes")
			}
			if bytes.Equal(u.buf[:k], u.zero[:k]) {
				if _, err := unix.Seek(fd, int64(k), io.SeekCurrent); err != nil {
					return n, err
				}
				hole = true
			} else {
				if err := writeAll(fd, u.buf[:k]); err != nil {
					return n, err
				}
				hole = false
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return n, &spec.Error{Reason: spec.ReasonCorrupt, Kind: spec.KindInvalid, Detail: "reading the entry's content failed", Err: err}
		}
	}
	if hole {
		if err := unix.Ftruncate(fd, n); err != nil {
			return n, err
		}
	}
	return n, nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (u *unpacker) symlink(hdr *tar.Header, name, dir, base string) error {
	target := hdr.Linkname
	if target == "" || len(target) > u.lim.MaxPathLen || bytes.IndexByte([]byte(target), 0) >= 0 {
		return refuse(hdr.Name, spec.ReasonUnsupportedEntry, spec.KindInvalid, "a symlink without a valid target")
	}
	at, err := u.parent(hdr.Name, dir)
	if err != nil {
		return err
	}
	if err := u.count(hdr.Name); err != nil {
		return err
	}
	if err := unix.Symlinkat(target, at, base); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return refuse(hdr.Name, spec.ReasonPathConflict, spec.KindConflict, "a directory made for another entry is in the way")
		}
		return ioErr(hdr.Name, err)
	}
	u.seen[name] = kindLink
	if err := unix.Fchownat(at, base, owner(hdr.Uid), owner(hdr.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return ioErr(hdr.Name, err)
	}
	if err := unix.UtimesNanoAt(at, base, times(hdr.ModTime), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return ioErr(hdr.Name, err)
	}
	return nil
}

// hardlink links name to an earlier regular file of the same layer; any
// other target (a file of another layer, outside the layer, a symlink, a
// directory) is refused.
func (u *unpacker) hardlink(hdr *tar.Header, name, dir, base string) error {
	target, e := cleanName(hdr.Linkname, u.lim)
	if e != nil {
		e.Entry = hdr.Name
		e.Detail = "the hardlink's target: " + e.Reason
		e.Reason = spec.ReasonHardlink
		return e
	}
	if u.seen[target] != kindFile {
		return refuse(hdr.Name, spec.ReasonHardlink, spec.KindForbidden, "a hardlink must name an earlier regular file of the same layer")
	}
	at, err := u.parent(hdr.Name, dir)
	if err != nil {
		return err
	}
	if err := u.count(hdr.Name); err != nil {
		return err
	}
	src, err := openBeneath(u.root, target, unix.O_PATH)
	if err != nil {
		return refuse(hdr.Name, spec.ReasonHardlink, spec.KindForbidden, "the hardlink's target cannot be reached without following a link")
	}
	defer func() { _ = unix.Close(src) }()
	if err := unix.Linkat(src, "", at, base, unix.AT_EMPTY_PATH); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return refuse(hdr.Name, spec.ReasonPathConflict, spec.KindConflict, "a directory made for another entry is in the way")
		}
		return ioErr(hdr.Name, err)
	}
	u.seen[name] = kindFile
	return nil
}

// whiteout hides target (of dir) in the layers below: an overlay whiteout,
// a 0/0 character device.
func (u *unpacker) whiteout(entry, dir, target string) error {
	if target == "." || target == ".." || target == "" {
		return refuse(entry, spec.ReasonReservedName, spec.KindInvalid, "a whiteout of no name")
	}
	full := join(dir, target)
	if u.seen[full] != 0 {
		return refuse(entry, spec.ReasonDuplicate, spec.KindConflict, "a whiteout of a name the same layer makes")
	}
	at, err := u.parent(entry, dir)
	if err != nil {
		return err
	}
	if err := u.count(entry); err != nil {
		return err
	}
	if err := unix.Mknodat(at, target, unix.S_IFCHR, 0); err != nil {
		return ioErr(entry, err)
	}
	u.seen[full] = kindWhiteout
	u.st.Whiteouts++
	return nil
}

// opaque marks dir as hiding everything the layers below hold in it.
func (u *unpacker) opaque(entry, dir string) error {
	if dir == "" {
		return refuse(entry, spec.ReasonReservedName, spec.KindInvalid, "the layer's root cannot be opaque")
	}
	parentDir, base := split(dir)
	at, err := u.parent(entry, parentDir)
	if err != nil {
		return err
	}
	if u.seen[dir] == 0 {
		if err := u.count(entry); err != nil {
			return err
		}
		if err := unix.Mkdirat(at, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return ioErr(entry, err)
		}
		u.seen[dir] = kindDir
	} else if u.seen[dir] != kindDir {
		return refuse(entry, spec.ReasonPathConflict, spec.KindConflict, "an opaque marker in a non-directory")
	}
	fd, err := openBeneath(at, base, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return refuse(entry, spec.ReasonPathConflict, spec.KindConflict, "an opaque marker in a non-directory")
	}
	defer func() { _ = unix.Close(fd) }()
	if err := unix.Fsetxattr(fd, OpaqueXattr, []byte("y"), 0); err != nil {
		return ioErr(entry, fmt.Errorf("mark opaque (the data dir's file system needs user xattrs): %w", err))
	}
	u.st.Whiteouts++
	return nil
}
