package template

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/template/layer"
)

// errNotInTemplate says a file is not in a template's tree.
var errNotInTemplate = errors.New("not in the template")

const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// ReadFile reads the regular file rel (a clean relative path) of the
// template whose layers are given, lowest first, as its sandboxes see it:
// the uppermost layer that has it wins, a whiteout or an opaque directory
// above hides what is below. No symlink is followed (a symlinked
// /etc/passwd is not found): the server reads the store, never a
// sandbox's view. At most max bytes.
func (s *Store) ReadFile(layers []Layer, rel string, max int64) ([]byte, error) {
	if max < 0 {
		return nil, errors.New("read a template file: negative cap")
	}
	return s.find(layers, rel, max, false)
}

// Has says whether the template has the regular file rel (as ReadFile
// finds it, without reading it).
func (s *Store) Has(layers []Layer, rel string) bool {
	_, err := s.find(layers, rel, -1, false)
	return err == nil
}

// IsDir says whether the template has the directory rel (no symlink
// followed on the way).
func (s *Store) IsDir(layers []Layer, rel string) bool {
	_, err := s.find(layers, rel, -1, true)
	return err == nil
}

// Attr is an entry's owner and mode as a template's tree has it.
type Attr struct {
	Mode     uint32 // permission bits (with sticky)
	UID, GID int
	Dir      bool
}

// Stat reads the attributes of rel (a file or directory; no symlink
// followed on the way) as the template's sandboxes see them.
func (s *Store) Stat(layers []Layer, rel string) (Attr, bool) {
	parts := strings.Split(rel, "/")
	for i := len(layers) - 1; i >= 0; i-- {
		a, stop, err := statInLayer(s.layerPath(layers[i].Digest), parts)
		if err == nil {
			return a, true
		}
		if stop {
			return Attr{}, false
		}
	}
	return Attr{}, false
}

func statInLayer(dir string, parts []string) (Attr, bool, error) {
	if _, stop, err := readInLayer(dir, parts, -1, true); err != nil {
		if _, fstop, ferr := readInLayer(dir, parts, -1, false); ferr != nil {
			return Attr{}, stop && fstop, ferr
		}
	}
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Attr{}, true, err
	}
	defer func() { _ = unix.Close(root) }()
	fd, err := openat2(root, strings.Join(parts, "/"), unix.O_PATH)
	if err != nil {
		return Attr{}, true, err
	}
	defer func() { _ = unix.Close(fd) }()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Attr{}, true, err
	}
	return Attr{Mode: st.Mode & 0o1777, UID: int(st.Uid), GID: int(st.Gid), Dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}, true, nil
}

// find is ReadFile; with max < 0 it only looks.
func (s *Store) find(layers []Layer, rel string, max int64, dir bool) ([]byte, error) {
	parts := strings.Split(rel, "/")
	for i := len(layers) - 1; i >= 0; i-- {
		b, stop, err := readInLayer(s.layerPath(layers[i].Digest), parts, max, dir)
		if err == nil || stop {
			return b, err
		}
	}
	return nil, errNotInTemplate
}

// readInLayer looks for parts in one layer. stop says the layers below
// must not be looked at (a whiteout or opaque directory on the way, or the
// file found).
func readInLayer(dir string, parts []string, max int64, wantDir bool) ([]byte, bool, error) {
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, fmt.Errorf("open template layer: %w", err)
	}
	defer func() { _ = unix.Close(root) }()
	opaque := false
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		var st unix.Stat_t
		fd, err := openat2(root, p, unix.O_PATH)
		if errors.Is(err, unix.ENOENT) {
			return nil, opaque, errNotInTemplate
		}
		if err != nil {
			return nil, true, errNotInTemplate // a symlink on the way
		}
		err = unix.Fstat(fd, &st)
		if err == nil && i < len(parts)-1 && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			buf := make([]byte, 4)
			if n, xerr := unix.Fgetxattr(fd, layer.OpaqueXattr, buf); xerr == nil && n == 1 && buf[0] == 'y' {
				opaque = true
			}
		}
		_ = unix.Close(fd)
		if err != nil {
			return nil, true, err
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0:
			return nil, true, errNotInTemplate // a whiteout
		case i < len(parts)-1 && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return nil, true, errNotInTemplate
		case i == len(parts)-1 && wantDir:
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return nil, true, errNotInTemplate
			}
			return nil, true, nil
		case i == len(parts)-1 && st.Mode&unix.S_IFMT != unix.S_IFREG:
			return nil, true, errNotInTemplate
		}
	}
	if max < 0 {
		return nil, true, nil
	}
	fd, err := openat2(root, strings.Join(parts, "/"), unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, true, err
	}
	f := os.NewFile(uintptr(fd), "template-file") //nolint:gosec // G115: a descriptor number
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, true, err
	}
	if int64(len(b)) > max {
		return nil, true, fmt.Errorf("%s is larger than %d bytes", parts[len(parts)-1], max)
	}
	return b, true, nil
}

func openat2(dirFD int, name string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: resolveBeneath} //nolint:gosec // G115: open flags are positive
	for {
		fd, err := unix.Openat2(dirFD, name, &how)
		if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			return fd, err
		}
	}
}
