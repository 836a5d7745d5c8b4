package audit

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// keptFile is a file of the data dir (the lock file, the head file) kept
// open between batches instead of opened and closed for each: on this
// project's machines an open costs more than the read or write it serves.
//
// It always acts on the file the path names now, as opening it each time
// did: current stats the path and reopens when the kept file is no longer
// the one there (removed, or replaced by a rename, as when the data dir's
// contents are restored), so a removed head file is still seen as missing
// and a replaced lock file still excludes the other processes that open it.
// A keptFile is used under Log.mu; Close releases the descriptor, and the
// next use opens the path again.
type keptFile struct {
	path     string
	f        *os.File
	fi       os.FileInfo // f's identity, from when it was opened
	writable bool        // f was opened O_RDWR (else O_RDONLY: a read-only head)
}

// current returns the open file the path names and its up-to-date stat.
// create makes it (0600) if missing and requires it writable; without
// create a missing file is (nil, nil, nil) and a file that may only be
// read is opened read-only (verify needs no more).
func (k *keptFile) current(create bool) (*os.File, os.FileInfo, error) {
	fi, err := os.Stat(k.path)
	switch {
	case err == nil && k.f != nil && os.SameFile(fi, k.fi) && (k.writable || !create):
		return k.f, fi, nil
	case errors.Is(err, os.ErrNotExist) && !create:
		k.close()
		return nil, nil, nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, nil, err
	}
	k.close()
	flag, writable := os.O_RDWR, true
	if create {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(k.path, flag, 0o600) // #nosec G304 -- a fixed name in the configured data dir, not request input
	if !create && errors.Is(err, os.ErrPermission) {
		f, err = os.Open(k.path) // #nosec G304 -- a fixed name in the configured data dir, not request input (read-only fallback)
		writable = false
	}
	if errors.Is(err, os.ErrNotExist) && !create {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	k.f, k.fi, k.writable = f, fi, writable
	return f, fi, nil
}

// close releases the descriptor, if any.
func (k *keptFile) close() {
	if k.f != nil {
		_ = k.f.Close()
		k.f, k.fi = nil, nil
	}
}

// headReadBuf is the read of a head file: a well-formed one is headLen
// bytes; a larger file is read whole, up to maxHeadFile.
const (
	headReadBuf = 256
	maxHeadFile = 1 << 20
)

// readAll reads the whole file the path names (ok=false when it does not
// exist), with one pread for a file of head size.
func (k *keptFile) readAll() (b []byte, ok bool, err error) {
	f, fi, err := k.current(false)
	if err != nil || f == nil {
		return nil, false, err
	}
	if fi.Size() > maxHeadFile {
		return nil, true, errMalformedHead
	}
	buf := make([]byte, max(headReadBuf, fi.Size()+1))
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, true, err
	}
	if n == len(buf) { // grew since the stat: read it again (the caller retries)
		return nil, true, errMalformedHead
	}
	return buf[:n], true, nil
}

// writeHeadAt rewrites the head record in place (see the package doc),
// sizing the file once if it is not headLen bytes.
func (k *keptFile) writeHeadAt(buf []byte) error {
	f, fi, err := k.current(true)
	if err != nil {
		return err
	}
	if fi.Size() != headLen {
		if err := f.Truncate(headLen); err != nil { // first write, or an old/odd file: once
			return err
		}
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		return fmt.Errorf("pwrite: %w", err)
	}
	return nil
}
