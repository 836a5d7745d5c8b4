package volume

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/testenv"
	"golang.org/x/sys/unix"
)

// requireE2fs skips where e2fsprogs or root are missing.
func requireE2fs(t *testing.T) {
	t.Helper()
	testenv.SkipShort(t, "formats ext4 images with e2fsprogs")
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"mkfs.ext4", "e2fsck"} {
		if _, err := Tool(tool); err != nil {
			t.Skip("needs e2fsprogs:", err)
		}
	}
}

// imageUUID reads an image's superblocks; readSupers fails unless every
// backup carries the primary's UUID with a valid checksum.
func imageUUID(t *testing.T, img string, size int64) string {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	supers, err := readSupers(f, size)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(img), err)
	}
	if len(supers) < 2 {
		t.Fatalf("%s: only %d superblock copies", filepath.Base(img), len(supers))
	}
	return string(supers[0].raw[sbUUID : sbUUID+16])
}

func fsckClean(t *testing.T, img string) {
	t.Helper()
	if err := Run(context.Background(), "e2fsck", "-fn", img); err != nil {
		t.Fatalf("e2fsck -fn %s: %v", filepath.Base(img), err)
	}
}

// Copies of one template are whole, consistent file systems, each with a
// UUID of its own (superblock and backups, checksums valid), and the
// template is formatted once.
func TestWorkspaceImagesAreTemplateCopies(t *testing.T) {
	requireE2fs(t)
	// mke2fs uses 1 KiB blocks below 512 MB and 4 KiB above: both
	// superblock layouts, each with several backups.
	for _, size := range []int64{300 << 20, 5_000_000_000} {
		t.Run(strconv.FormatInt(size>>20, 10)+"MiB", func(t *testing.T) { testTemplateCopies(t, size) })
	}
}

func testTemplateCopies(t *testing.T, size int64) {
	tm, dir, ws := &Templates{}, t.TempDir(), t.TempDir()
	seen := map[string]bool{}
	for i := range 3 {
		img := filepath.Join(ws, strconv.Itoa(i)+".img")
		if err := tm.Clone(dir, img, size, nil); err != nil {
			t.Fatal(err)
		}
		fsckClean(t, img)
		// The copy's root is empty before any mount: the template
		// has no lost+found for each sandbox to remove.
		if ls := debugfsLs(t, img); strings.Contains(ls, "lost+found") {
			t.Fatalf("copy %d has a lost+found: %s", i, ls)
		}
		u := imageUUID(t, img, size)
		if seen[u] {
			t.Fatalf("copy %d reuses a UUID", i)
		}
		seen[u] = true
		if _, err := os.Stat(img + TmpSuffix); !os.IsNotExist(err) {
			t.Fatalf("temporary copy left: %v", err)
		}
	}
	if b, c := tm.builds.Load(), tm.clones.Load(); b != 1 || c != 3 {
		t.Fatalf("builds %d clones %d, want 1 and 3", b, c)
	}
	tmpl := filepath.Join(dir, "ext4-"+templateVersion+"-"+strconv.FormatInt(size, 10)+".img")
	if seen[imageUUID(t, tmpl, size)] {
		t.Fatal("a copy kept the template's UUID")
	}
	// A new server run verifies the template on disk and reuses it.
	tm2 := &Templates{}
	if err := tm2.Clone(dir, filepath.Join(ws, "again.img"), size, nil); err != nil {
		t.Fatal(err)
	}
	if tm2.builds.Load() != 0 {
		t.Fatal("an intact template was rebuilt")
	}
}

// A template that is corrupt, missing or without its digest is rebuilt
// before any copy is made from it.
func TestWorkspaceTemplateIsRebuiltWhenBroken(t *testing.T) {
	requireE2fs(t)
	const size = 64 << 20
	tm, dir, ws := &Templates{}, t.TempDir(), t.TempDir()
	tmpl := filepath.Join(dir, "ext4-"+templateVersion+"-"+strconv.Itoa(size)+".img")
	n := 0
	copyOne := func(t *testing.T, wantBuilds int64) {
		t.Helper()
		n++
		img := filepath.Join(ws, strconv.Itoa(n)+".img")
		if err := tm.Clone(dir, img, size, nil); err != nil {
			t.Fatal(err)
		}
		if got := tm.builds.Load(); got != wantBuilds {
			t.Fatalf("builds %d, want %d", got, wantBuilds)
		}
		fsckClean(t, img)
	}
	copyOne(t, 1)
	for _, c := range []struct {
		name   string
		break_ func() error
		// The digest is read when a run first uses the template.
		newRun bool
	}{
		{"a flipped byte in the inode table area", func() error {
			f, err := os.OpenFile(tmpl, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			_, err = f.WriteAt([]byte{0xff}, 4096*3+17)
			return err
		}, false},
		{"a corrupt superblock magic", func() error {
			f, err := os.OpenFile(tmpl, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			_, err = f.WriteAt([]byte{0, 0}, superOff+sbMagic)
			return err
		}, false},
		{"template missing", func() error { return os.Remove(tmpl) }, false},
		{"digest missing", func() error { return os.Remove(tmpl + ".sha256") }, true},
		{"digest wrong", func() error { return os.WriteFile(tmpl+".sha256", []byte("00\n"), 0o600) }, true},
		{"size changed", func() error { return os.Truncate(tmpl, size+4096) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.break_(); err != nil {
				t.Fatal(err)
			}
			if c.newRun {
				tm = &Templates{}
			}
			copyOne(t, tm.builds.Load()+1)
		})
	}
}

// A copy appears under its name only complete: a failed write leaves
// nothing, a stale temporary copy from a dead server is discarded, and an
// existing image is never overwritten.
func TestWorkspaceImageIsNeverHalfWritten(t *testing.T) {
	requireE2fs(t)
	const size = 64 << 20
	tm, dir, ws := &Templates{}, t.TempDir(), t.TempDir()
	img := filepath.Join(ws, ImageName)

	err := writeCopy(img, size, true, nil, func(f *os.File) error {
		if _, err := f.WriteAt([]byte("half"), 0); err != nil {
			return err
		}
		return errors.New("died")
	})
	if err == nil {
		t.Fatal("failed fill reported success")
	}
	for _, p := range []string{img, img + TmpSuffix} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s left after a failed copy: %v", filepath.Base(p), err)
		}
	}

	if err := os.WriteFile(img+TmpSuffix, []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tm.Clone(dir, img, size, nil); err != nil {
		t.Fatal(err)
	}
	fsckClean(t, img)
	if _, err := os.Stat(img + TmpSuffix); !os.IsNotExist(err) {
		t.Fatalf("stale copy left: %v", err)
	}

	before := imageUUID(t, img, size)
	if err := tm.Clone(dir, img, size, nil); err == nil {
		t.Fatal("a copy replaced an existing image")
	}
	if imageUUID(t, img, size) != before {
		t.Fatal("the existing image changed")
	}
}

// Sizes are client input: past maxTemplates distinct sizes no template is
// made (the image is formatted per sandbox instead).
func TestWorkspaceTemplatesAreCapped(t *testing.T) {
	requireE2fs(t)
	dir, ws := t.TempDir(), t.TempDir()
	for i := range maxTemplates {
		if err := os.WriteFile(filepath.Join(dir, "ext4-old-"+strconv.Itoa(i)+".img"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tm := &Templates{}
	if err := tm.Clone(dir, filepath.Join(ws, "a.img"), 64<<20, nil); !errors.Is(err, ErrNoTemplate) {
		t.Fatalf("template past the cap on disk: %v", err)
	}
	tm = &Templates{bySize: map[int64]*wsTemplate{}}
	for i := range maxTemplates {
		tm.bySize[int64(i)] = &wsTemplate{}
	}
	if err := tm.Clone(t.TempDir(), filepath.Join(ws, "b.img"), 64<<20, nil); !errors.Is(err, ErrNoTemplate) {
		t.Fatalf("template past the cap in memory: %v", err)
	}
	// The image is still made, by mkfs, and is a good file system.
	img := filepath.Join(ws, "c.img")
	st, err := Make(img, 64<<20, 1000, tm, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(); err != nil {
		t.Fatal(err)
	}
	fsckClean(t, img)
}

// loopDIO reads whether the loop device holding img does direct I/O.
func loopDIO(t *testing.T, img string) string {
	t.Helper()
	left, err := LoopBackings(filepath.Dir(img))
	if err != nil {
		t.Fatal(err)
	}
	for dev, p := range left {
		if p == img {
			b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "dio"))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no loop device holds %s (bound: %v)", img, left)
	return ""
}

// A new image is mounted before it is durable, under its temporary name:
// until finish has run nothing is found under the image's name (a crash
// then leaves no image; the next start makes a new one), and after it the
// image is in place, no temporary copy is left, and the loop device has
// gone from buffered to direct I/O.
func TestNewImageIsNamedOnlyOnceDurable(t *testing.T) {
	requireE2fs(t)
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("needs loop devices:", err)
	}
	tm, dir, ws := &Templates{}, t.TempDir(), t.TempDir()
	img := filepath.Join(ws, ImageName)
	mnt, finish, err := Open(img, 64<<20, 1<<30+1000, tm, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mnt.Close() }()
	if finish == nil {
		t.Fatal("a new image came without its durability step")
	}
	if _, err := os.Lstat(img); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("image under its name before it is durable: %v", err)
	}
	if got := loopDIO(t, img+TmpSuffix); got != "0" {
		t.Fatalf("loop device dio %s while the image is written back, want 0 (buffered)", got)
	}
	// The mounted file system is usable before it is durable.
	if fd, err := unix.Openat(int(mnt.Fd()), "probe", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600); err != nil {
		t.Fatal("write to the new workspace:", err)
	} else {
		_ = unix.Close(fd)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(img); err != nil {
		t.Fatal("image not in place after finish:", err)
	}
	if _, err := os.Lstat(img + TmpSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary copy left: %v", err)
	}
	if got := loopDIO(t, img); got != "1" {
		t.Fatalf("loop device dio %s after finish, want 1", got)
	}
	_ = mnt.Close()
	if err := WaitDetached(img); err != nil {
		t.Fatal(err)
	}
	// A second server run finds the image and mounts it as it is (direct
	// I/O at once), with what was written before.
	mnt2, finish2, err := Open(img, 64<<20, 1<<30+1000, tm, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mnt2.Close() }()
	if finish2 != nil {
		t.Fatal("an existing image came with a durability step")
	}
	if err := unix.Faccessat(int(mnt2.Fd()), "probe", unix.F_OK, 0); err != nil {
		t.Fatal("the file written before finish is gone:", err)
	}
	if got := loopDIO(t, img); got != "1" {
		t.Fatalf("existing image's loop device dio %s, want 1", got)
	}
}

// debugfsLs lists an image's root directory without mounting it.
func debugfsLs(t *testing.T, img string) string {
	t.Helper()
	p, err := Tool("debugfs")
	if err != nil {
		t.Skip(err)
	}
	out, err := exec.Command(p, "-R", "ls -p /", img).CombinedOutput() //nolint:gosec // G204: e2fsprogs on a test image
	if err != nil {
		t.Fatalf("debugfs: %v: %s", err, out)
	}
	return string(out)
}
