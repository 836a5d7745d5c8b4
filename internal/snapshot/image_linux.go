package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// zeros is compared against to find chunks with nothing in them.
var zeros = make([]byte, 64<<10)

func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// Capture stores the image img (size bytes) as a new snapshot of in.Owner,
// deduplicated against the owner's chunks. The caller keeps the image
// still while it runs (the sandbox frozen, its file system frozen). Only
// ranges that hold data are read (SEEK_DATA); chunks of zeros are holes.
func (s *Store) Capture(ctx context.Context, img *os.File, size int64, in Info) (m *Manifest, err error) {
	if size <= 0 || size > maxImageBytes {
		return nil, fmt.Errorf("capture image: size %d out of range", size)
	}
	lk, err := s.lockOwner(in.Owner, false)
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	od := s.ownerDir(in.Owner)
	m = in.manifest(size)
	var pending []pendingChunk
	defer func() {
		for _, p := range pending {
			_ = p.f.Close()
			_ = os.Remove(p.f.Name())
		}
	}()
	buf := make([]byte, ChunkSize)
	fd := int(img.Fd())
	clone := true // until the file system says it cannot
	seen := make(map[string]bool)
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break // nothing but holes from off to the end
		}
		if err != nil {
			return nil, fmt.Errorf("capture image: seek data: %w", err)
		}
		if data >= off+ChunkSize {
			off = data - data%ChunkSize
			continue
		}
		n := min(ChunkSize, size-off)
		if _, err := img.ReadAt(buf[:n], off); err != nil {
			return nil, fmt.Errorf("capture image: read: %w", err)
		}
		at := off
		off += n
		if allZero(buf[:n]) {
			continue
		}
		sum := sha256.Sum256(buf[:n])
		d := hex.EncodeToString(sum[:])
		m.Chunks = append(m.Chunks, Chunk{Offset: at, Length: n, Digest: d})
		dest := chunkPath(od, d)
		if seen[d] {
			continue
		}
		seen[d] = true
		if _, err := os.Lstat(dest); err == nil {
			continue // the owner holds it already
		}
		f, err := os.CreateTemp(s.tmpDir(), "chunk-*")
		if err != nil {
			return nil, fmt.Errorf("capture image: %w", err)
		}
		pending = append(pending, pendingChunk{f: f, dest: dest})
		if clone {
			// A clone shares the image's blocks (XFS, btrfs); elsewhere
			// the bytes just read are written.
			err := unix.IoctlFileCloneRange(int(f.Fd()), &unix.FileCloneRange{Src_fd: int64(fd), Src_offset: uint64(at), Src_length: uint64(n)}) // #nosec G115 -- offsets of one image, not negative
			if err == nil {
				continue
			}
			clone = false
		}
		if err := writeSparse(f, buf[:n]); err != nil {
			return nil, fmt.Errorf("capture image: write chunk: %w", err)
		}
	}
	if err := commitChunks(pending); err != nil {
		return nil, err
	}
	pending = nil
	if err := s.finish(m); err != nil {
		return nil, err
	}
	return m, nil
}

// writeSparse writes b to f leaving runs of zeros as holes (a chunk of a
// sparse image is mostly zeros), at the granularity of zeros.
func writeSparse(f *os.File, b []byte) error {
	for off := 0; off < len(b); off += len(zeros) {
		end := min(off+len(zeros), len(b))
		if allZero(b[off:end]) {
			continue
		}
		if _, err := f.WriteAt(b[off:end], int64(off)); err != nil {
			return err
		}
	}
	return f.Truncate(int64(len(b)))
}

// Restore writes snapshot m's image to dst (which must not exist): a
// sparse file of the image's size with each chunk copied — cloned where
// the file system shares blocks — in the kernel, made durable under its
// name.
func (s *Store) Restore(ctx context.Context, m *Manifest, dst string) error {
	lk, err := s.lockOwner(m.Owner, false)
	if err != nil {
		return err
	}
	defer lk.unlock()
	f, err := os.CreateTemp(filepath.Dir(dst), ".restore-*")
	if err != nil {
		return fmt.Errorf("restore image: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		_ = f.Close()
		if !ok {
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Truncate(m.ImageSize); err != nil {
		return fmt.Errorf("restore image: %w", err)
	}
	od := s.ownerDir(m.Owner)
	for _, c := range m.Chunks {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := copyChunk(f, chunkPath(od, c.Digest), c); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("restore image: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("restore image: %w", err)
	}
	ok = true
	return syncDir(filepath.Dir(dst))
}

func copyChunk(dst *os.File, path string, c Chunk) error {
	src, err := os.Open(path) //nolint:gosec // G304: the store's own chunk
	if err != nil {
		return fmt.Errorf("restore image: chunk %s: %w", c.Digest[:12], err)
	}
	defer func() { _ = src.Close() }()
	st, err := src.Stat()
	if err != nil || st.Size() != c.Length {
		return fmt.Errorf("restore image: chunk %s has the wrong size", c.Digest[:12])
	}
	// Only the chunk's data is copied: its holes stay holes.
	sfd := int(src.Fd())
	for pos := int64(0); pos < c.Length; {
		data, err := unix.Seek(sfd, pos, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break
		}
		if err != nil {
			return fmt.Errorf("restore image: seek chunk: %w", err)
		}
		hole, err := unix.Seek(sfd, data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("restore image: seek chunk: %w", err)
		}
		hole = min(hole, c.Length)
		in, out := data, c.Offset+data
		for in < hole {
			// copy_file_range clones on a file system that shares
			// blocks, copies in the kernel elsewhere.
			n, err := unix.CopyFileRange(sfd, &in, int(dst.Fd()), &out, int(hole-in), 0)
			if err != nil {
				return fmt.Errorf("restore image: copy chunk: %w", err)
			}
			if n == 0 {
				return fmt.Errorf("restore image: chunk %s ended early", c.Digest[:12])
			}
		}
		pos = hole
	}
	return nil
}
