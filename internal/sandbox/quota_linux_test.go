package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/testenv"
	"golang.org/x/sys/unix"
)

func requireQuota(t *testing.T) {
	t.Helper()
	testenv.RequireSandboxes(t)
	if _, err := e2tool("mkfs.ext4"); err != nil {
		t.Skip("workspace quota needs e2fsprogs:", err)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("workspace quota needs loop devices:", err)
	}
}

// waitDetached waits for the kernel to detach the loop devices of images
// below root (autoclear runs once the last user is gone).
func waitDetached(t *testing.T, root string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left, err := loopBackings(root)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("loop devices still bound to workspace images: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWorkspaceQuotaIsEnforcedByTheKernel(t *testing.T) {
	requireQuota(t)
	cfg := testConfig(t)
	rec := &memRecords{}
	m := newManager(t, cfg, rec)
	s := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})

	if m.wst.clones.Load() != 1 {
		t.Fatal("the workspace image is not a template copy")
	}
	// A fresh workspace is empty (no lost+found), owned by the sandbox user.
	if r := run(t, s, ExecRequest{Command: "ls -A /workspace; stat -c %u /workspace"}); strings.TrimSpace(r.Stdout) != "1000" {
		t.Fatalf("fresh workspace: %q", r.Stdout)
	}
	// Its file system does not prefetch every group's bitmap (memory
	// kept per idle sandbox); seen from the init's mount table.
	s.mu.Lock()
	pid := s.inst.Pid
	s.mu.Unlock()
	mi, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == "/workspace" {
			found = true
			if !strings.Contains(line, "ext4") || !strings.Contains(line, "no_prefetch_block_bitmaps") {
				t.Fatalf("workspace mount: %s", line)
			}
		}
	}
	if !found {
		t.Fatalf("no /workspace in the init's mount table:\n%s", mi)
	}
	// Writing past the quota fails with ENOSPC, whatever writes.
	r := run(t, s, ExecRequest{Command: "dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; echo rc=$?"})
	if !strings.Contains(r.Stdout, "No space left") || !strings.Contains(r.Stdout, "rc=1") {
		t.Fatalf("write past the quota: %q", r.Stdout)
	}
	total, free, err := s.StatFS(context.Background(), "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	if total > 64<<20 || total < 48<<20 || free > 1<<20 {
		t.Fatalf("statfs after filling: total %d free %d", total, free)
	}
	// Freed blocks come back (and are punched out of the image).
	run(t, s, ExecRequest{Command: "rm /workspace/big; echo keep > /workspace/keep"})
	if _, free, _ = s.StatFS(context.Background(), "/workspace"); free < 48<<20 {
		t.Fatalf("free after rm: %d", free)
	}
	// The workspace survives an init restart and a server restart: the
	// mount is made once per run and the image persists.
	s.shutdown()
	if r := run(t, s, ExecRequest{Command: "cat /workspace/keep"}); strings.TrimSpace(r.Stdout) != "keep" {
		t.Fatalf("after init restart: %q %q", r.Stdout, r.Stderr)
	}
	m.Close()
	waitDetached(t, m.workspaceRoot())
	m2 := newManager(t, cfg, rec)
	s2, err := m2.Get(owner, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r := run(t, s2, ExecRequest{Command: "cat /workspace/keep"}); strings.TrimSpace(r.Stdout) != "keep" {
		t.Fatalf("after server restart: %q %q", r.Stdout, r.Stderr)
	}
	// Delete leaves no image, no loop device and no directory behind.
	if err := m2.Delete(context.Background(), owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m2.workspaceRoot(), s.ID())); !os.IsNotExist(err) {
		t.Fatalf("workspace left after delete: %v", err)
	}
	waitDetached(t, m2.workspaceRoot())
	// No mount of it is visible on the host at any time.
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), m2.workspaceRoot()) {
		t.Fatal("a workspace is mounted in the host's namespace")
	}
}

// A pool sandbox's workspace has the default size; a client asking for
// another quota gets a sandbox built for it, never the pool's.
func TestQuotaOfPoolSandboxes(t *testing.T) {
	requireQuota(t)
	cfg := testConfig(t)
	cfg.WarmPool = 1
	m := newManager(t, cfg, nil)
	for _, c := range []struct {
		name string
		disk int64
		want int64
	}{
		{"default from the pool", 0, cfg.Default.DiskBytes},
		{"smaller, built cold", 48 << 20, 48 << 20},
		{"default again", cfg.Default.DiskBytes, cfg.Default.DiskBytes},
	} {
		t.Run(c.name, func(t *testing.T) {
			deadline := time.Now().Add(10 * time.Second)
			for m.PoolStatus().Ready < 1 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			s := create(t, m, Spec{Limits: Limits{DiskBytes: c.disk}})
			total, _, err := s.StatFS(context.Background(), "/workspace")
			if err != nil {
				t.Fatal(err)
			}
			// ext4 keeps a few percent for its metadata.
			if total > c.want || total < c.want*9/10 {
				t.Fatalf("workspace size %d, want about %d", total, c.want)
			}
		})
	}
}

// requireE2fs skips where e2fsprogs or root are missing.
func requireE2fs(t *testing.T) {
	t.Helper()
	testenv.SkipShort(t, "formats ext4 images with e2fsprogs")
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"mkfs.ext4", "e2fsck"} {
		if _, err := e2tool(tool); err != nil {
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
	if err := runTool(context.Background(), "e2fsck", "-fn", img); err != nil {
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
	tm, dir, ws := &wsTemplates{}, t.TempDir(), t.TempDir()
	seen := map[string]bool{}
	for i := range 3 {
		img := filepath.Join(ws, strconv.Itoa(i)+".img")
		if err := tm.clone(dir, img, size, nil); err != nil {
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
		if _, err := os.Stat(img + tmpSuffix); !os.IsNotExist(err) {
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
	tm2 := &wsTemplates{}
	if err := tm2.clone(dir, filepath.Join(ws, "again.img"), size, nil); err != nil {
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
	tm, dir, ws := &wsTemplates{}, t.TempDir(), t.TempDir()
	tmpl := filepath.Join(dir, "ext4-"+templateVersion+"-"+strconv.Itoa(size)+".img")
	n := 0
	copyOne := func(t *testing.T, wantBuilds int64) {
		t.Helper()
		n++
		img := filepath.Join(ws, strconv.Itoa(n)+".img")
		if err := tm.clone(dir, img, size, nil); err != nil {
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
				tm = &wsTemplates{}
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
	tm, dir, ws := &wsTemplates{}, t.TempDir(), t.TempDir()
	img := filepath.Join(ws, imageName)

	err := writeCopy(img, size, true, nil, func(f *os.File) error {
		if _, err := f.WriteAt([]byte("half"), 0); err != nil {
			return err
		}
		return errors.New("died")
	})
	if err == nil {
		t.Fatal("failed fill reported success")
	}
	for _, p := range []string{img, img + tmpSuffix} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s left after a failed copy: %v", filepath.Base(p), err)
		}
	}

	if err := os.WriteFile(img+tmpSuffix, []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tm.clone(dir, img, size, nil); err != nil {
		t.Fatal(err)
	}
	fsckClean(t, img)
	if _, err := os.Stat(img + tmpSuffix); !os.IsNotExist(err) {
		t.Fatalf("stale copy left: %v", err)
	}

	before := imageUUID(t, img, size)
	if err := tm.clone(dir, img, size, nil); err == nil {
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
	tm := &wsTemplates{}
	if err := tm.clone(dir, filepath.Join(ws, "a.img"), 64<<20, nil); !errors.Is(err, errNoTemplate) {
		t.Fatalf("template past the cap on disk: %v", err)
	}
	tm = &wsTemplates{bySize: map[int64]*wsTemplate{}}
	for i := range maxTemplates {
		tm.bySize[int64(i)] = &wsTemplate{}
	}
	if err := tm.clone(t.TempDir(), filepath.Join(ws, "b.img"), 64<<20, nil); !errors.Is(err, errNoTemplate) {
		t.Fatalf("template past the cap in memory: %v", err)
	}
	// The image is still made, by mkfs, and is a good file system.
	img := filepath.Join(ws, "c.img")
	st, err := makeImage(img, 64<<20, 1000, tm, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.commit(); err != nil {
		t.Fatal(err)
	}
	fsckClean(t, img)
}

// TestResourcesReportWorkspaceDisk: the live figures carry the workspace
// file system's use as the kernel counts it against the quota.
func TestResourcesReportWorkspaceDisk(t *testing.T) {
	requireQuota(t)
	m := newManager(t, testConfig(t), &memRecords{})
	s := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	disk := func() DiskUsage {
		for _, st := range m.Resources(Caller{Admin: true}) {
			if st.ID == s.ID() {
				return st.Disk
			}
		}
		t.Fatal("sandbox missing from the figures")
		return DiskUsage{}
	}
	run(t, s, ExecRequest{Command: "true"})
	before := disk()
	if before.TotalBytes > 64<<20 || before.TotalBytes < 48<<20 {
		t.Fatalf("total %d for a 64 MiB quota", before.TotalBytes)
	}
	run(t, s, ExecRequest{Command: "dd if=/dev/urandom of=/workspace/f bs=1M count=8 2>/dev/null; sync"})
	after := disk()
	if grown := after.UsedBytes - before.UsedBytes; grown < 8<<20 || grown > 10<<20 {
		t.Fatalf("used %d → %d after writing 8 MiB", before.UsedBytes, after.UsedBytes)
	}
}

// loopDIO reads whether the loop device holding img does direct I/O.
func loopDIO(t *testing.T, img string) string {
	t.Helper()
	left, err := loopBackings(filepath.Dir(img))
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
	requireQuota(t)
	tm, dir, ws := &wsTemplates{}, t.TempDir(), t.TempDir()
	img := filepath.Join(ws, imageName)
	mnt, finish, err := openVolume(img, 64<<20, 1<<30+1000, tm, dir, nil, nil)
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
	if got := loopDIO(t, img+tmpSuffix); got != "0" {
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
	if _, err := os.Lstat(img + tmpSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary copy left: %v", err)
	}
	if got := loopDIO(t, img); got != "1" {
		t.Fatalf("loop device dio %s after finish, want 1", got)
	}
	_ = mnt.Close()
	waitDetached(t, ws)
	// A second server run finds the image and mounts it as it is (direct
	// I/O at once), with what was written before.
	mnt2, finish2, err := openVolume(img, 64<<20, 1<<30+1000, tm, dir, nil, nil)
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

// A sandbox whose init cannot start leaves nothing behind: no workspace
// directory, no loop device (the volume was released, not left to the
// garbage collector), no cgroup.
func TestFailedStartReleasesTheWorkspaceVolume(t *testing.T) {
	requireQuota(t)
	cfg := testConfig(t)
	cfg.InitExe, cfg.InitArgs = "/bin/false", []string{}
	m := newManager(t, cfg, nil)
	// No collection may close a forgotten descriptor for the manager.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	_, err := m.Create(context.Background(), owner, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	if err == nil {
		t.Fatal("a sandbox whose init exits at once was created")
	}
	waitDetached(t, m.workspaceRoot())
	entries, err := os.ReadDir(m.workspaceRoot())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("workspace directories left: %v", entries)
	}
	// Nor a cgroup: the sandbox group, its user group and the first
	// execution group made beside the init's start.
	if left, err := cgroup.Reap(m.cg, func(string) bool { return false }); err != nil || len(left) != 0 {
		t.Fatalf("cgroups left after a failed start: %v (%v)", left, err)
	}
}

// debugfsLs lists an image's root directory without mounting it.
func debugfsLs(t *testing.T, img string) string {
	t.Helper()
	p, err := e2tool("debugfs")
	if err != nil {
		t.Skip(err)
	}
	out, err := exec.Command(p, "-R", "ls -p /", img).CombinedOutput() //nolint:gosec // G204: e2fsprogs on a test image
	if err != nil {
		t.Fatalf("debugfs: %v: %s", err, out)
	}
	return string(out)
}
