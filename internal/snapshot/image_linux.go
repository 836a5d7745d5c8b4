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
// still while it runs (the sandbox frozen, its file system frozen).
//
// Where the store's file system shares blocks with the image (XFS with
// reflink, btrfs), the snapshot is one clone of the whole image, made
// durable with a manifest that reads sealing, and Capture answers then:
// the chunks and the digest are made from that clone after the answer
// (seal.go). Elsewhere the image is chunked and hashed before the answer.
func (s *Store) Capture(ctx context.Context, img *os.File, size int64, in Info) (m *Manifest, err error) {
	if size <= 0 || size > maxImageBytes {
		return nil, fmt.Errorf("capture image: size %d out of range", size)
	}
	lk, err := s.lockOwner(in.Owner, false)
	if err != nil {
		return nil, err
	}
	m, cloned, err := s.captureClone(img, size, in)
	if err != nil || cloned {
		lk.unlock()
		if cloned {
			s.startSeal(m)
		}
		return m, err
	}
	defer lk.unlock()
	m = in.manifest(size)
	if err := s.chunkImage(ctx, img, size, m); err != nil {
		return nil, err
	}
	if err := s.finish(m); err != nil {
		return nil, err
	}
	return m, nil
}

// captureClone clones img whole into the store as sealing snapshot's
// clone (durable: fsynced, renamed, its directory synced) and writes the
// snapshot's manifest, state sealing. cloned is false (and nothing is
// left) where the file systems cannot share blocks. The caller holds the
// owner's lock.
func (s *Store) captureClone(img *os.File, size int64, in Info) (m *Manifest, cloned bool, err error) {
	f, err := os.CreateTemp(s.tmpDir(), "clone-*")
	if err != nil {
		return nil, false, fmt.Errorf("capture image: %w", err)
	}
	name := f.Name()
	defer func() {
		_ = f.Close()
		if !cloned {
			_ = os.Remove(name)
		}
	}()
	if err := unix.IoctlFileClone(int(f.Fd()), int(img.Fd())); err != nil {
		return nil, false, nil // no shared blocks here: the image is chunked now
	}
	if err := f.Truncate(size); err != nil {
		return nil, false, fmt.Errorf("capture image: %w", err)
	}
	if err := f.Sync(); err != nil {
		return nil, false, fmt.Errorf("capture image: sync clone: %w", err)
	}
	m = in.manifest(size)
	m.ID, m.State = newID(), StateSealing
	if st, err := f.Stat(); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			m.Bytes = sys.Blocks * 512
		}
	}
	dst := s.sealingPath(m.Owner, m.ID)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return nil, false, fmt.Errorf("capture image: %w", err)
	}
	if err := os.Rename(name, dst); err != nil {
		return nil, false, fmt.Errorf("capture image: %w", err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		_ = os.Remove(dst)
		return nil, false, fmt.Errorf("capture image: %w", err)
	}
	_ = syncDir(filepath.Dir(filepath.Dir(dst)))
	if err := s.put(m); err != nil {
		_ = os.Remove(dst)
		return nil, false, err
	}
	return m, true, nil
}

// chunkImage cuts the image img (size bytes) into m's chunks, each named
// by its sha256, and makes the new ones durable. Only ranges that hold
// data are read (SEEK_DATA); chunks of zeros are holes. The caller holds
// the owner's lock.
func (s *Store) chunkImage(ctx context.Context, img *os.File, size int64, m *Manifest) error {
	od := s.ownerDir(m.Owner)
	m.Chunks = nil
	var pending []pendingChunk
	defer func() {
		for _, p := range pending {
			_ = p.f.Close()
			_ = os.Remove(p.f.Name())
		}
	}()
	fd := int(img.Fd())
	// The image is read ahead of the hashing and writing (readChunks,
	// on its own goroutine), so the disk and the CPU work at once.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks, free, rerr := readChunks(ctx, img, size)
	defer func() {
		cancel()
		for range chunks { // let the reader end
		}
	}()
	clone := true // until the file system says it cannot
	seen := make(map[string]bool)
	for rc := range chunks {
		buf := rc.buf[:rc.n]
		at, n := rc.off, rc.n
		sum := sha256.Sum256(buf)
		d := hex.EncodeToString(sum[:])
		m.Chunks = append(m.Chunks, Chunk{Offset: at, Length: n, Digest: d})
		dest := chunkPath(od, d)
		if seen[d] {
			free <- rc.buf
			continue
		}
		seen[d] = true
		if _, err := os.Lstat(dest); err == nil {
			free <- rc.buf
			continue // the owner holds it already
		}
		f, err := os.CreateTemp(s.tmpDir(), "chunk-*")
		if err != nil {
			return fmt.Errorf("capture image: %w", err)
		}
		pending = append(pending, pendingChunk{f: f, dest: dest})
		if clone {
			// A clone shares the image's blocks (XFS, btrfs); elsewhere
			// the bytes just read are written.
			err := unix.IoctlFileCloneRange(int(f.Fd()), &unix.FileCloneRange{Src_fd: int64(fd), Src_offset: uint64(at), Src_length: uint64(n)}) // #nosec G115 -- offsets of one image, not negative
			if err == nil {
				free <- rc.buf
				continue
			}
			clone = false
		}
		err = writeSparse(f, buf)
		free <- rc.buf
		if err != nil {
			return fmt.Errorf("capture image: write chunk: %w", err)
		}
		// Its write-back starts now; commitChunks's fsync waits for it.
		_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	}
	if err := *rerr; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := commitChunks(pending); err != nil {
		return err
	}
	pending = nil
	return nil
}

// readChunk is one chunk read from the image.
type readChunk struct {
	off int64
	n   int64
	buf []byte
}

// readAhead is how many chunks the reader may be ahead of their use.
const readAhead = 3

// readChunks reads the image's chunks that hold data (SEEK_DATA) and are
// not all zeros, in order, into buffers the consumer hands back on free.
// The channel closes at the end, on an error (in *err once it closed) or
// when ctx ends.
func readChunks(ctx context.Context, img *os.File, size int64) (<-chan readChunk, chan<- []byte, *error) {
	out := make(chan readChunk)
	free := make(chan []byte, readAhead)
	for range readAhead {
		free <- make([]byte, ChunkSize)
	}
	var rerr error
	go func() {
		defer close(out)
		fd := int(img.Fd())
		for off := int64(0); off < size; {
			var buf []byte
			select {
			case buf = <-free:
			case <-ctx.Done():
				rerr = ctx.Err()
				return
			}
			data, err := unix.Seek(fd, off, unix.SEEK_DATA)
			if errors.Is(err, syscall.ENXIO) {
				return // nothing but holes from off to the end
			}
			if err != nil {
				rerr = fmt.Errorf("capture image: seek data: %w", err)
				return
			}
			if data >= off+ChunkSize {
				off = data - data%ChunkSize
				free <- buf
				continue
			}
			n := min(ChunkSize, size-off)
			if _, err := img.ReadAt(buf[:n], off); err != nil {
				rerr = fmt.Errorf("capture image: read: %w", err)
				return
			}
			at := off
			off += n
			if allZero(buf[:n]) {
				free <- buf
				continue
			}
			select {
			case out <- readChunk{off: at, n: n, buf: buf}:
			case <-ctx.Done():
				rerr = ctx.Err()
				return
			}
		}
	}()
	return out, free, &rerr
}

// copyData copies the data ranges (SEEK_DATA/SEEK_HOLE) of src's first
// length bytes from 0 to dst at base, in the kernel (copy_file_range: a
// clone where the file system shares blocks).
func copyData(src, dst *os.File, from, length, base int64) error {
	sfd := int(src.Fd())
	for pos := from; pos < length; {
		data, err := unix.Seek(sfd, pos, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break
		}
		if err != nil {
			return fmt.Errorf("seek data: %w", err)
		}
		hole, err := unix.Seek(sfd, data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole: %w", err)
		}
		hole = min(hole, length)
		in, out := data, base+data
		for in < hole {
			n, err := unix.CopyFileRange(sfd, &in, int(dst.Fd()), &out, int(hole-in), 0)
			if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
				// Across file systems of different kinds: through memory.
				if err := copyRange(src, dst, in, out, hole-in); err != nil {
					return err
				}
				break
			}
			if err != nil {
				return fmt.Errorf("copy: %w", err)
			}
			if n == 0 {
				return fmt.Errorf("copy: source ended early")
			}
		}
		pos = hole
	}
	return nil
}

// copyRange copies n bytes of src at in to dst at out through a buffer.
func copyRange(src, dst *os.File, in, out, n int64) error {
	buf := make([]byte, min(n, 1<<20))
	for n > 0 {
		k, err := src.ReadAt(buf[:min(n, int64(len(buf)))], in)
		if k > 0 {
			if _, werr := dst.WriteAt(buf[:k], out); werr != nil {
				return fmt.Errorf("copy: %w", werr)
			}
			in, out, n = in+int64(k), out+int64(k), n-int64(k)
		}
		if err != nil && n > 0 {
			return fmt.Errorf("copy: %w", err)
		}
	}
	return nil
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
	if m.Parked {
		return s.unpark(m, dst)
	}
	if m.Sealing() {
		// Not sealed yet: the image is its clone's (cloned back where
		// blocks are shared); sealed meanwhile: its chunks.
		src, cur, err := s.openClone(m)
		if err != nil {
			return err
		}
		if src != nil {
			defer func() { _ = src.Close() }()
			return writeImage(dst, m.ImageSize, func(f *os.File) error {
				if err := copyData(src, f, 0, m.ImageSize, 0); err != nil {
					return fmt.Errorf("restore image: %w", err)
				}
				return nil
			})
		}
		m = cur
	}
	od := s.ownerDir(m.Owner)
	return writeImage(dst, m.ImageSize, func(f *os.File) error {
		for _, c := range m.Chunks {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := copyChunk(f, chunkPath(od, c.Digest), c); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeImage makes dst (which must not exist): a sparse file of size
// bytes that fill writes, made durable under its name.
func writeImage(dst string, size int64, fill func(*os.File) error) error {
	f, err := os.CreateTemp(filepath.Dir(dst), ".image-*")
	if err != nil {
		return fmt.Errorf("write image: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		_ = f.Close()
		if !ok {
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("write image: %w", err)
	}
	if err := fill(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write image: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("write image: %w", err)
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
	if err := copyData(src, dst, 0, c.Length, c.Offset); err != nil {
		return fmt.Errorf("restore image: chunk %s: %w", c.Digest[:12], err)
	}
	return nil
}

// copySparse copies src's data (holes stay holes; copy_file_range clones
// where the file system shares blocks) into a new file dst (writeImage).
func copySparse(src, dst string) error {
	in, err := os.Open(src) //nolint:gosec // G304: the server's own image
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	return writeImage(dst, st.Size(), func(f *os.File) error { return copyData(in, f, 0, st.Size(), 0) })
}
