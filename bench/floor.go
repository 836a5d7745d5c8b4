package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The floor of an audited exec (issue 34): sandhold answers no call before
// its audit record is durable, so no exec can cost less than a bare
// fork/exec of the command plus one durable write of a small page on the
// file system that holds the data dir. The benchmark measures that floor in
// the same run as the exec round trip and reports the ratio of the two.

// floorPageSize is the durable write of the floor: one 4 KB page, the
// size of an audit record's WAL frame and its page.
const floorPageSize = 4096

// syncer writes one page at offset 0 of a file in dir and fdatasyncs it,
// as a commit of one small record does.
type syncer struct {
	f    *os.File
	page []byte
}

// newSyncer creates the file in dir (the server's data dir, so the same
// file system and disk) with one page already allocated: the measured
// write then overwrites it, as a WAL reused after a checkpoint does.
func newSyncer(dir string) (*syncer, error) {
	f, err := os.OpenFile(filepath.Join(dir, "bench-floor.page"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600) //nolint:gosec // G304: the benchmark's own temp dir
	if err != nil {
		return nil, fmt.Errorf("floor page: %w", err)
	}
	s := &syncer{f: f, page: make([]byte, floorPageSize)}
	if err := s.sync(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return s, nil
}

// sync rewrites the page (a different byte each time, so the kernel has
// a dirty page to write) and waits for it to be on disk.
func (s *syncer) sync() error {
	s.page[0]++
	if _, err := s.f.WriteAt(s.page, 0); err != nil {
		return fmt.Errorf("floor page: %w", err)
	}
	if err := fdatasync(s.f); err != nil {
		return fmt.Errorf("floor page: fdatasync: %w", err)
	}
	return nil
}

func (s *syncer) close() { _ = s.f.Close() }

// floorOp is one sample of the floor: a bare fork/exec of /bin/true, then
// one durable 4 KB write.
func (s *syncer) floorOp() error {
	if err := exec.Command("/bin/true").Run(); err != nil {
		return err
	}
	return s.sync()
}
