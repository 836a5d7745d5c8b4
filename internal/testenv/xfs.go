package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// RequireXFS mounts a 512 MiB XFS file system with reflinks (the blocks of
// a clone are shared) on a loop device for the test and returns its mount
// point; it skips where that cannot be done (-short, not root, no
// mkfs.xfs, no loop devices). `make deps` installs xfsprogs.
func RequireXFS(t testing.TB) string {
	t.Helper()
	SkipShort(t, "mounts an XFS image on a loop device")
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop device needs root")
	}
	mkfs, err := exec.LookPath("mkfs.xfs")
	if err != nil {
		t.Skip("mkfs.xfs not installed (make deps installs xfsprogs)")
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "xfs.img"), filepath.Join(dir, "mnt")
	f, err := os.Create(img) // #nosec G304 -- a file in the test's own directory
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(512 << 20)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-m", "reflink=1", img).CombinedOutput(); err != nil { // #nosec G204 -- mkfs.xfs of the test's own image
		t.Skipf("mkfs.xfs: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil { // #nosec G204 -- the test's own image and directory
		t.Skipf("mount an XFS image: %v: %s", err, out)
	}
	t.Cleanup(func() { unmountXFS(t, mnt) })
	return mnt
}

// unmountXFS unmounts the test's file system once nothing holds it: the
// loop devices of images on it detach a moment after the test let them go
// (autoclear), and until then the unmount is refused as busy. If it is
// still busy after eventuallyBound, it is detached lazily (it goes once
// unused) and the test fails: something it made still holds it.
func unmountXFS(t testing.TB, mnt string) {
	start := time.Now()
	for poll := time.Millisecond; ; poll = min(2*poll, eventuallyMaxPoll) {
		if exec.Command("umount", mnt).Run() == nil { // #nosec G204 -- the test's own mount
			return
		}
		if time.Since(start) > eventuallyBound {
			_ = exec.Command("umount", "-l", mnt).Run() // #nosec G204 -- the test's own mount
			t.Errorf("the test's XFS file system at %s stayed busy for %s; detached lazily", mnt, eventuallyBound)
			return
		}
		time.Sleep(poll)
	}
}
