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
	return s.find(layers, rel, max)
}

// Has says whether the template has the regular file rel (as ReadFile
// finds it, without reading it).
func (s *Store) Has(layers []Layer, rel string) bool {
	_, err := s.find(layers, rel, -1)
	return err == nil
}

// find is ReadFile; with max < 0 it only looks.
func (s *Store) find(layers []Layer, rel string, max int64) ([]byte, error) {
	parts := strings.Split(rel, "/")
	for i := len(layers) - 1; i >= 0; i-- {
		b, stop, err := readInLayer(s.layerPath(layers[i].Digest), parts, max)
		if err == nil || stop {
			return b, err
		}
	}
	return nil, errNotInTemplate
}

// readInLayer looks for parts in one layer. stop says the layers below
// must not be looked at (a whiteout or opaque directory on the way, or the
// file found).
func readInLayer(dir string, parts []string, max int64) ([]byte, bool, error) {
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
