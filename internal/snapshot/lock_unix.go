//go:build unix

package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// ownerLock is a held flock on an owner's pool.
type ownerLock struct{ f *os.File }

func (l ownerLock) unlock() {
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	_ = l.f.Close()
}

// lockOwner takes the owner's pool lock: shared for writers and readers of
// snapshots (their chunks stay), exclusive for collecting unused chunks.
func (s *Store) lockOwner(owner string, exclusive bool) (ownerLock, error) {
	od := s.ownerDir(owner)
	if err := os.MkdirAll(od, 0o700); err != nil {
		return ownerLock{}, fmt.Errorf("snapshot store: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(od, ".lock"), os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // G304: the store's own lock file
	if err != nil {
		return ownerLock{}, fmt.Errorf("snapshot store: %w", err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return ownerLock{}, fmt.Errorf("snapshot store: lock: %w", err)
	}
	return ownerLock{f: f}, nil
}

// errSealBusy: another process holds a clone's seal lock — on a shared
// store, most likely another node sealing it.
var errSealBusy = errors.New("sealed by another process")

// claimClone takes the exclusive flock of sealing snapshot m's clone,
// without waiting: the right to seal it, held for the whole seal (every
// attempt) by one process of the nodes that share the store, and let go
// when that process closes it or dies. It answers errSealBusy while
// another holds it, and (nil, nil) when the clone is gone (the snapshot
// sealed or deleted: nothing to seal). The clone is opened for writing
// only because NFS grants an exclusive lock to a writer; nothing writes.
func (s *Store) claimClone(m *Manifest) (*os.File, error) {
	f, err := os.OpenFile(s.sealingPath(m.Owner, m.ID), os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0) //nolint:gosec // G304: the store's own clone
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("seal snapshot %s: %w", m.ID, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errSealBusy
		}
		return nil, fmt.Errorf("seal snapshot %s: lock: %w", m.ID, err)
	}
	return f, nil
}

// diskBytes is what the files under root hold on the disk (their blocks).
func diskBytes(root string) int64 {
	var total int64
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}
