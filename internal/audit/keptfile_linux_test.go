package audit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openDescriptors counts this process's descriptors open on path.
func openDescriptors(t *testing.T, path string) int {
	t.Helper()
	want, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		fi, err := os.Stat(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && os.SameFile(fi, want) {
			n++
		}
	}
	return n
}

// The lock and head files are opened once and kept (one descriptor each,
// however many batches), and Close releases them; the log still works
// after Close.
func TestLockAndHeadFilesAreKeptOpen(t *testing.T) {
	l, dir := newLog(t)
	fill(t, l, 5)
	for _, name := range []string{LockFile, HeadFile} {
		if n := openDescriptors(t, filepath.Join(dir, name)); n != 1 {
			t.Errorf("%s: %d descriptors open after 5 appends, want 1 kept", name, n)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{LockFile, HeadFile} {
		if n := openDescriptors(t, filepath.Join(dir, name)); n != 0 {
			t.Errorf("%s: %d descriptors open after Close, want 0", name, n)
		}
	}
	fill(t, l, 2)
	mustVerify(t, l, 7)
}

// A head file replaced under a running log (a rename over it, as a restore
// of the data dir does) is the one read and written next: a malformed
// replacement is not overwritten (the damage stays visible), a good one
// moves on.
func TestKeptHeadFileFollowsThePath(t *testing.T) {
	l, dir := newLog(t)
	fill(t, l, 3)
	head := filepath.Join(dir, HeadFile)
	replace := func(content string) {
		t.Helper()
		tmp := head + ".new"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, head); err != nil {
			t.Fatal(err)
		}
	}
	replace("garbage\n")
	fill(t, l, 1)
	if b, err := os.ReadFile(head); err != nil || string(b) != "garbage\n" {
		t.Fatalf("head = %q (%v): a malformed replacement was overwritten", b, err)
	}
	if res, err := l.Verify(context.Background()); err != nil || res.OK {
		t.Fatalf("verify with a malformed head = %+v %v", res, err)
	}

	recs, err := l.Query(context.Background(), Filter{})
	if err != nil || len(recs) != 4 {
		t.Fatalf("query: %d %v", len(recs), err)
	}
	replace(fmt.Sprintf("%020d %s\n", recs[1].Seq, recs[1].Hash)) // behind, as after a crash
	r, err := l.Append(context.Background(), entry(9))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(head); err != nil || string(b) != fmt.Sprintf("%020d %s\n", r.Seq, r.Hash) {
		t.Fatalf("head = %q (%v), want record %d", b, err, r.Seq)
	}
	mustVerify(t, l, 5)
}

// A lock file replaced under a running log: the log locks the file the
// path names now, so it still waits for another process that locked the
// new file (which opened it by path).
func TestKeptLockFileFollowsThePath(t *testing.T) {
	l, dir := newLog(t)
	fill(t, l, 2) // the log now keeps the old lock file open
	lock := filepath.Join(dir, LockFile)
	tmp := lock + ".new"
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, lock); err != nil {
		t.Fatal(err)
	}
	other, err := os.OpenFile(lock, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), entry(3))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the append went ahead while another process held the lock file the path names (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := unix.Flock(int(other.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mustVerify(t, l, 3)
}
