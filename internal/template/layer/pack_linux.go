package layer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/archive/spec"
)

// PackSpec says how to read an overlay's upper directory as a layer.
type PackSpec struct {
	// Upper is the upper directory (a descriptor the caller keeps open).
	Upper *os.File
	// IDBase is the first host id of the sandbox's range: a file owned by
	// host uid IDBase+k is owned by k in the layer. Owners outside the
	// range become Nobody.
	IDBase uint32
	// Exclude are top-level names left out (the mount points a sandbox
	// start makes in its writable layer: /workspace).
	Exclude []string
	Limits  Limits
}

// maxDirEntries caps one directory's entries read at once by Pack.
const maxDirEntries = 1 << 20

// Pack writes the overlay upper directory ps.Upper as an OCI layer to w:
// overlay whiteouts become `.wh.` entries, opaque directories a
// `.wh..wh..opq` entry, hardlinks within the directory hardlink entries;
// set-id bits are stripped; sockets, fifos and other devices are left out
// (counted in Skipped). Entries are sorted, so the same tree packs to the
// same bytes.
//
// The directory is a sandbox's: hostile and possibly changing while it is
// read (the caller freezes a running sandbox first). Every name is opened
// relative to its directory's descriptor without following symlinks, and a
// file is read only once fstat of the opened descriptor says it is the
// regular file that was listed.
func Pack(ctx context.Context, w io.Writer, ps PackSpec) (Stats, error) {
	p := &packer{ctx: ctx, tw: tar.NewWriter(w), ps: ps, links: make(map[[2]uint64]string)}
	fd, err := unix.Dup(int(ps.Upper.Fd())) //nolint:gosec // G115: a descriptor number
	if err != nil {
		return Stats{}, ioErr("", err)
	}
	if err := p.dir(fd, "", 0); err != nil {
		return p.st, err
	}
	if err := p.tw.Close(); err != nil {
		return p.st, ioErr("", err)
	}
	return p.st, nil
}

type packer struct {
	ctx   context.Context
	tw    *tar.Writer
	ps    PackSpec
	st    Stats
	links map[[2]uint64]string
}

func (p *packer) id(host uint32) int {
	if host >= p.ps.IDBase && host-p.ps.IDBase < IDRange {
		return int(host - p.ps.IDBase)
	}
	return Nobody
}

func (p *packer) claim(name string) error {
	if err := p.ctx.Err(); err != nil {
		return &spec.Error{Reason: spec.ReasonCanceled, Kind: spec.KindCanceled, Err: err}
	}
	if p.st.Entries >= p.ps.Limits.MaxEntries {
		return refuse(name, spec.ReasonTooManyEntries, spec.KindTooLarge, fmt.Sprintf("a layer holds at most %d entries", p.ps.Limits.MaxEntries))
	}
	if len(name) > p.ps.Limits.MaxPathLen {
		return refuse(name, spec.ReasonNameTooLong, spec.KindInvalid, "")
	}
	p.st.Entries++
	return nil
}

// dir packs the entries of the directory fd (which it closes), named rel.
func (p *packer) dir(fd int, rel string, depth int) error {
	f := os.NewFile(uintptr(fd), "upper") //nolint:gosec // G115: a descriptor number
	defer func() { _ = f.Close() }()
	if depth > p.ps.Limits.MaxDepth {
		return refuse(rel, spec.ReasonTooDeep, spec.KindInvalid, "")
	}
	names, err := f.Readdirnames(maxDirEntries)
	if err != nil && !errors.Is(err, io.EOF) {
		return ioErr(rel, err)
	}
	slices.Sort(names)
	for _, n := range names {
		if rel == "" && slices.Contains(p.ps.Exclude, n) {
			p.st.Skipped++
			continue
		}
		if err := p.entry(fd, rel, n, depth); err != nil {
			return err
		}
	}
	return nil
}

func (p *packer) header(name string, st *unix.Stat_t, typ byte) *tar.Header {
	return &tar.Header{
		Typeflag: typ,
		Name:     name,
		Mode:     int64(st.Mode & 0o1777),
		Uid:      p.id(st.Uid),
		Gid:      p.id(st.Gid),
		ModTime:  time.Unix(st.Mtim.Unix()).Truncate(time.Second),
		Format:   tar.FormatPAX,
	}
}

func (p *packer) entry(dirFD int, rel, n string, depth int) error {
	name := join(rel, n)
	var st unix.Stat_t
	if err := unix.Fstatat(dirFD, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone since the listing
		}
		return ioErr(name, err)
	}
	if st.Mode&0o6000 != 0 {
		p.st.Stripped++
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return p.directory(dirFD, name, n, &st, depth)
	case unix.S_IFREG:
		return p.file(dirFD, name, n, &st)
	case unix.S_IFLNK:
		if err := p.claim(name); err != nil {
			return err
		}
		target, err := readlinkat(dirFD, n)
		if err != nil {
			return ioErr(name, err)
		}
		h := p.header(name, &st, tar.TypeSymlink)
		h.Linkname = target
		return p.write(h)
	case unix.S_IFCHR:
		if st.Rdev == 0 {
			// An overlay whiteout.
			if err := p.claim(name); err != nil {
				return err
			}
			dir, base := split(name)
			p.st.Whiteouts++
			return p.write(&tar.Header{Typeflag: tar.TypeReg, Name: join(dir, whiteoutPrefix+base), Mode: 0o644,
				ModTime: time.Unix(st.Mtim.Unix()).Truncate(time.Second), Format: tar.FormatPAX})
		}
	}
	p.st.Skipped++
	return nil
}

func (p *packer) directory(dirFD int, name, n string, st *unix.Stat_t, depth int) error {
	if err := p.claim(name); err != nil {
		return err
	}
	fd, err := openBeneath(dirFD, n, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return ioErr(name, err)
	}
	if err := p.write(p.header(name+"/", st, tar.TypeDir)); err != nil {
		_ = unix.Close(fd)
		return err
	}
	if opaque(fd) {
		if err := p.claim(name); err != nil {
			_ = unix.Close(fd)
			return err
		}
		p.st.Whiteouts++
		if err := p.write(&tar.Header{Typeflag: tar.TypeReg, Name: name + "/" + opaqueMarker, Mode: 0o644,
			ModTime: time.Unix(st.Mtim.Unix()).Truncate(time.Second), Format: tar.FormatPAX}); err != nil {
			_ = unix.Close(fd)
			return err
		}
	}
	return p.dir(fd, name, depth+1)
}

// opaque reads an upper directory's opaque mark (user.overlay.opaque with
// userxattr; trusted.overlay.opaque for a privileged overlay).
func opaque(fd int) bool {
	buf := make([]byte, 8)
	for _, attr := range []string{OpaqueXattr, "trusted.overlay.opaque"} {
		n, err := unix.Fgetxattr(fd, attr, buf)
		if err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

func (p *packer) file(dirFD int, name, n string, st *unix.Stat_t) error {
	if err := p.claim(name); err != nil {
		return err
	}
	key := [2]uint64{st.Dev, st.Ino}
	if st.Nlink > 1 {
		if first, ok := p.links[key]; ok {
			h := p.header(name, st, tar.TypeLink)
			h.Linkname = first
			return p.write(h)
		}
	}
	fd, err := openBeneath(dirFD, n, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return ioErr(name, err)
	}
	f := os.NewFile(uintptr(fd), name) //nolint:gosec // G115: a descriptor number
	defer func() { _ = f.Close() }()
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		return ioErr(name, err)
	}
	if now.Ino != st.Ino || now.Mode&unix.S_IFMT != unix.S_IFREG {
		return refuse(name, spec.ReasonChanged, spec.KindConflict, "the file changed while the layer was packed")
	}
	if p.st.Bytes+now.Size > p.ps.Limits.MaxBytes {
		return refuse(name, spec.ReasonTotalTooLarge, spec.KindTooLarge, fmt.Sprintf("a layer holds at most %d bytes", p.ps.Limits.MaxBytes))
	}
	h := p.header(name, &now, tar.TypeReg)
	h.Size = now.Size
	if err := p.write(h); err != nil {
		return err
	}
	m, err := io.CopyN(p.tw, f, now.Size)
	if err != nil {
		if m < now.Size && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			return refuse(name, spec.ReasonChanged, spec.KindConflict, "the file shrank while the layer was packed")
		}
		return ioErr(name, err)
	}
	p.st.Bytes += m
	if st.Nlink > 1 {
		p.links[key] = name
	}
	return nil
}

func (p *packer) write(h *tar.Header) error {
	if err := p.tw.WriteHeader(h); err != nil {
		return ioErr(h.Name, err)
	}
	return nil
}

func readlinkat(dirFD int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirFD, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
