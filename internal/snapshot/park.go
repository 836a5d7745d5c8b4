package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// A parked snapshot is a hibernated sandbox's image itself, moved into the
// store whole: a rename when the store and the workspaces share a file
// system (no byte moves, and resuming on the same node renames it back),
// a copy of its data (holes kept, blocks cloned where the file system
// shares them) when they do not — a store on a shared file system, which
// is how another node resumes it. It is not chunked and has no digest: it
// is never listed to its owner, exported or forked; it exists until the
// sandbox resumes or is deleted.
//
// The manifest is written first (PrepareParked), the image moved after
// (Park): the caller records the snapshot in between, so a crash leaves
// either the image where it was (the resume finds it there) or in the
// store under the recorded snapshot.

func (s *Store) parkedPath(owner, id string) string {
	return filepath.Join(s.ownerDir(owner), "parked", id+".img")
}

// PrepareParked writes the manifest of a parked snapshot of an image of
// size bytes; Park moves the image in.
func (s *Store) PrepareParked(in Info, size int64) (*Manifest, error) {
	if size <= 0 || size > maxImageBytes {
		return nil, fmt.Errorf("park image: size %d out of range", size)
	}
	m := in.manifest(size)
	m.ID, m.Parked = newID(), true
	if err := s.put(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Park moves the image at img into the store under parked snapshot m.
func (s *Store) Park(m *Manifest, img string) error {
	lk, err := s.lockOwner(m.Owner, false)
	if err != nil {
		return err
	}
	defer lk.unlock()
	dst := s.parkedPath(m.Owner, m.ID)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("park image: %w", err)
	}
	if err := moveFile(img, dst); err != nil {
		return fmt.Errorf("park image: %w", err)
	}
	if fi, err := os.Stat(dst); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			m.Bytes = st.Blocks * 512
			_ = s.put(m)
		}
	}
	return nil
}

// unpark moves a parked image to dst. The caller holds the owner's lock.
func (s *Store) unpark(m *Manifest, dst string) error {
	src := s.parkedPath(m.Owner, m.ID)
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore image: the parked image of %s is gone", m.ID)
	}
	if err := moveFile(src, dst); err != nil {
		return fmt.Errorf("restore image: %w", err)
	}
	return nil
}

// moveFile renames src to dst, or — across file systems — copies it
// through a temporary file beside dst, made durable before src goes. Both
// directories are synced.
func moveFile(src, dst string) error {
	err := os.Rename(src, dst)
	if errors.Is(err, syscall.EXDEV) {
		err = copySparse(src, dst)
		if err == nil {
			err = os.Remove(src)
		}
	}
	if err != nil {
		return err
	}
	_ = syncDir(filepath.Dir(src))
	return syncDir(filepath.Dir(dst))
}

// Holds reports whether the store holds the data of snapshot m: its
// parked image, or every chunk it names. A node taking over a hibernated
// sandbox asks it first: a store that is not shared with the sandbox's
// node has the manifest's record in the cluster's database but none of
// the data.
func (s *Store) Holds(m *Manifest) bool {
	if m.Parked {
		_, err := os.Lstat(s.parkedPath(m.Owner, m.ID))
		return err == nil
	}
	if m.Sealing() {
		if _, err := os.Lstat(s.sealingPath(m.Owner, m.ID)); err == nil {
			return true
		}
		cur, err := s.read(m.ID) // sealed meanwhile
		if err != nil || cur.Sealing() {
			return false
		}
		m = cur
	}
	od := s.ownerDir(m.Owner)
	for _, c := range m.Chunks {
		if _, err := os.Lstat(chunkPath(od, c.Digest)); err != nil {
			return false
		}
	}
	return true
}
