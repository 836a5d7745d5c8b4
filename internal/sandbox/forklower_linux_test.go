package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/forklower"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
	"github.com/sandhold/sandhold/internal/testenv"
)

// forkSource makes a sandbox with files of every kind and its snapshot.
func forkSource(t *testing.T, m *Manager) (*Sandbox, SnapshotInfo) {
	t.Helper()
	src := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	setup := "mkdir -p d/e && echo hello > d/f && ln -s d/f link && ln d/f hard && chmod 4755 d/f && " +
		"echo gone > del && mkdir olddir && echo x > olddir/x && dd if=/dev/urandom of=big bs=1M count=8 2>/dev/null && sha256sum big > big.sum"
	if r := sh(t, src, setup); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("setup: %q %q", r.Stdout, r.Stderr)
	}
	snap, err := m.Snapshot(context.Background(), owner, src.ID(), "base")
	if err != nil {
		t.Fatal(err)
	}
	return src, snap
}

// restore makes n sandboxes from snapshot id.
func restore(t *testing.T, m *Manager, id string, n int) []*Sandbox {
	t.Helper()
	var out []*Sandbox
	for range n {
		info, err := m.Create(context.Background(), owner, Spec{Snapshot: id})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := m.Get(owner, info.ID)
		out = append(out, s)
	}
	return out
}

// oneFork makes a layered fork of forkSource's snapshot.
func oneFork(t *testing.T) (*Manager, SnapshotInfo, *Sandbox) {
	t.Helper()
	m := newManager(t, withSnapshots(t, testConfig(t)), nil)
	requireLayered(t, m)
	_, snap := forkSource(t, m)
	return m, snap, restore(t, m, snap.ID, 1)[0]
}

func requireLayered(t *testing.T, m *Manager) {
	t.Helper()
	testenv.SkipShort(t, "mounts a fork's overlay")
	if err := os.MkdirAll(m.workspaceRoot(), 0o700); err != nil {
		t.Fatal(err)
	}
	if !m.snaps.Layerable(m.workspaceRoot()) {
		t.Skip("the data dir's file system shares blocks: forks clone their image (TestForksCloneWhereBlocksAreShared)")
	}
}

// TestForksShareTheirSnapshotsLower: on a file system without shared
// blocks, forks of one snapshot see its files exactly through one shared
// read-only lower; each writes only into its own image (the quota holds
// there); forks are isolated from each other and the source.
func TestForksShareTheirSnapshotsLower(t *testing.T) {
	m := newManager(t, withSnapshots(t, testConfig(t)), nil)
	requireLayered(t, m)
	src, snap := forkSource(t, m)
	forks := restore(t, m, snap.ID, 3)
	check := "cat d/f; readlink link; stat -c '%a %u %h' d/f; id -u; sha256sum -c big.sum >/dev/null && echo sum-ok; test -d d/e && echo dir-ok"
	for i, f := range forks {
		if r := sh(t, f, check); r.Stdout != "hello\nd/f\n4755 1000 2\n1000\nsum-ok\ndir-ok\n" {
			t.Errorf("fork %d sees %q (stderr %q)", i, r.Stdout, r.Stderr)
		}
		dir := f.workspaceDir()
		if _, err := os.Stat(filepath.Join(dir, volume.ImageName)); err == nil {
			t.Errorf("fork %d has a copy of the snapshot's image", i)
		}
		if _, err := os.Stat(filepath.Join(dir, forklower.UpperImage)); err != nil {
			t.Errorf("fork %d has no image of its own: %v", i, err)
		}
	}
	if g, _ := filepath.Glob(filepath.Join(m.snaps.LowersDir(), "*")); len(g) != 1 {
		t.Errorf("the lowers are %v, want one image shared by the forks", g)
	}
	// Writes, a change to a lower file (copied up) and deletions, each in
	// one fork only.
	if r := sh(t, forks[0], "echo mine > only0 && echo changed >> d/f && rm del && rm -r olddir"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("fork 0 writes: %q", r.Stderr)
	}
	// One device for every file, lower or upper (find -xdev, du, git).
	if r := sh(t, forks[0], "test \"$(stat -c %d d/f)\" = \"$(stat -c %d big)\" && test \"$(stat -c %d big)\" = \"$(stat -c %d .)\" && echo one-dev"); r.Stdout != "one-dev\n" {
		t.Errorf("fork 0's files are on several devices: %q %q", r.Stdout, r.Stderr)
	}
	// A directory of the snapshot renames (rename(2), not a copy).
	if r := sh(t, forks[0], "python3 -c \"import os; os.rename('d/e', 'd/e2')\" && test -d d/e2 && echo renamed"); r.Stdout != "renamed\n" {
		t.Errorf("fork 0 cannot rename a directory of its snapshot: %q %q", r.Stdout, r.Stderr)
	}
	// A hard link of the snapshot stays one file when one name is written.
	if r := sh(t, forks[0], "cat hard; stat -c %h hard"); r.Stdout != "hello\nchanged\n2\n" {
		t.Errorf("fork 0 reads the hard link of a written file as %q", r.Stdout)
	}
	want0 := "hello\nchanged\nmine\nabsent\nabsent\n"
	probe := "cat d/f; cat only0 2>/dev/null || echo absent-only0; cat del 2>/dev/null || echo absent; ls olddir 2>/dev/null || echo absent"
	if r := sh(t, forks[0], "cat d/f; cat only0; cat del 2>/dev/null || echo absent; ls olddir 2>/dev/null || echo absent"); r.Stdout != want0 {
		t.Errorf("fork 0 sees %q, want %q", r.Stdout, want0)
	}
	for _, s := range []*Sandbox{forks[1], forks[2], src} {
		if r := sh(t, s, probe); r.Stdout != "hello\nabsent-only0\ngone\nx\n" {
			t.Errorf("%s sees another fork's writes: %q", s.ID(), r.Stdout)
		}
	}
	// A stopped fork starts again on the same layers.
	if !forks[0].stopIdle() {
		t.Fatal("fork 0 did not stop")
	}
	if r := sh(t, forks[0], "cat only0"); r.Stdout != "mine\n" {
		t.Errorf("fork 0 after a stop: %q %q", r.Stdout, r.Stderr)
	}
	// The snapshot is untouched.
	if err := checkRestorable(t, m, snap.ID, "hello\n"); err != nil {
		t.Error(err)
	}
	// The quota is the fork's own image: writes past it fail, whatever
	// the lower holds.
	r := sh(t, forks[1], "dd if=/dev/zero of=fill bs=1M count=80 2>&1; echo rc=$?")
	if !strings.Contains(r.Stdout, "No space left") {
		t.Errorf("a fork wrote past its quota: %q", r.Stdout)
	}
	if u := forks[1].diskUsage(); u.TotalBytes > 64<<20 {
		t.Errorf("fork's file system is %d bytes, over its quota", u.TotalBytes)
	}
}

// checkRestorable restores snapshot id once more and reads d/f.
func checkRestorable(t *testing.T, m *Manager, id, want string) error {
	t.Helper()
	s := restore(t, m, id, 1)[0]
	defer func() { _ = m.Delete(context.Background(), owner, s.ID()) }()
	if r := sh(t, s, "cat d/f"); r.Stdout != want {
		return fault.Errorf(fault.Internal, "a new restore of %s reads %q, want %q", id, r.Stdout, want)
	}
	return nil
}

// TestSnapshotOfAForkIsItsMergedView: a snapshot of a fork holds what the
// fork sees (its snapshot's files, its writes, its deletions), restores
// and exports on its own, and outlives the snapshot it was forked from.
func TestSnapshotOfAForkIsItsMergedView(t *testing.T) {
	ctx := context.Background()
	m, snap, fork := oneFork(t)
	if r := sh(t, fork, "echo mine > only && echo changed > d/f && rm del && rm -r olddir && mkdir olddir && echo y > olddir/y && python3 -c \"import os; os.rename('d/e', 'moved')\""); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("fork writes: %q", r.Stderr)
	}
	second, err := m.Snapshot(ctx, owner, fork.ID(), "of-fork")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.DeleteSnapshot(ctx, owner, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.cfg.DataDir, "workspaces", fork.ID(), forklower.FlatImage+volume.TmpSuffix)); err == nil {
		t.Error("the snapshot's copy of the merged view is left behind")
	}
	again := restore(t, m, second.ID, 1)[0]
	want := "changed\nmine\nchanged\nabsent\ny\nsum-ok\n1000\nmoved\n"
	got := sh(t, again, "cat d/f only; cat link; cat del 2>/dev/null || echo absent; ls olddir; sha256sum -c big.sum >/dev/null && echo sum-ok; stat -c %u only; test -d moved && ! test -e d/e && echo moved")
	if got.Stdout != want {
		t.Errorf("restore of the fork's snapshot sees %q (stderr %q), want %q", got.Stdout, got.Stderr, want)
	}
}

// TestForkLowerOutlivesItsSnapshot: deleting a snapshot that forks stand
// on is allowed (a reference count): the forks keep their lower, across
// a restart of the server too; deleting the forks leaves no lower image,
// no mount and no loop device behind.
func TestForkLowerOutlivesItsSnapshot(t *testing.T) {
	ctx := context.Background()
	cfg := withSnapshots(t, testConfig(t))
	recs := &memRecords{}
	m := newManager(t, cfg, recs)
	requireLayered(t, m)
	src, snap := forkSource(t, m)
	forks := restore(t, m, snap.ID, 2)
	sh(t, forks[0], "echo mine > only0")
	if err := m.Delete(ctx, owner, src.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DeleteSnapshot(ctx, owner, snap.ID); err != nil {
		t.Fatalf("delete a snapshot forks stand on: %v", err)
	}
	if _, err := os.Stat(forklower.Path(m.snaps.LowersDir(), snap.ID)); err != nil {
		t.Fatalf("the forks' lower went with the snapshot: %v", err)
	}
	m.Close()
	waitDetached(t, cfg.DataDir)

	m2 := newManager(t, cfg, recs)
	var again []*Sandbox
	for _, f := range forks {
		s, err := m2.Get(owner, f.ID())
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, s)
	}
	if r := sh(t, again[0], "cat d/f only0"); r.Stdout != "hello\nmine\n" {
		t.Errorf("fork 0 after a restart: %q %q", r.Stdout, r.Stderr)
	}
	if r := sh(t, again[1], "cat d/f; cat only0 2>/dev/null || echo absent"); r.Stdout != "hello\nabsent\n" {
		t.Errorf("fork 1 after a restart: %q %q", r.Stdout, r.Stderr)
	}
	if err := m2.Delete(ctx, owner, again[0].ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(forklower.Path(m2.snaps.LowersDir(), snap.ID)); err != nil {
		t.Fatalf("the lower went while a fork stands on it: %v", err)
	}
	if r := sh(t, again[1], "cat d/f"); r.Stdout != "hello\n" {
		t.Errorf("the other fork after one's delete: %q %q", r.Stdout, r.Stderr)
	}
	if err := m2.Delete(ctx, owner, again[1].ID()); err != nil {
		t.Fatal(err)
	}
	if g, _ := filepath.Glob(filepath.Join(m2.snaps.LowersDir(), "*")); len(g) != 0 {
		t.Errorf("lowers left after the last fork went: %v", g)
	}
	waitDetached(t, cfg.DataDir)
}

// TestDeletingForksKeepsTheSnapshot: the forks' lower stays while the
// snapshot exists (the next fork mounts it again) and goes with it; no
// loop device outlives the forks.
func TestDeletingForksKeepsTheSnapshot(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, withSnapshots(t, testConfig(t)), nil)
	requireLayered(t, m)
	src, snap := forkSource(t, m)
	for _, f := range restore(t, m, snap.ID, 2) {
		sh(t, f, "echo x >> d/f")
		if err := m.Delete(ctx, owner, f.ID()); err != nil {
			t.Fatal(err)
		}
	}
	waitDetached(t, m.snaps.LowersDir())
	if err := checkRestorable(t, m, snap.ID, "hello\n"); err != nil {
		t.Error(err)
	}
	if r := sh(t, src, "cat d/f"); r.Stdout != "hello\n" {
		t.Errorf("the source after its forks' writes: %q", r.Stdout)
	}
	waitDetached(t, m.snaps.LowersDir())
	if _, err := os.Stat(forklower.Path(m.snaps.LowersDir(), snap.ID)); err != nil {
		t.Errorf("the snapshot's lower went with its forks: %v", err)
	}
	if _, err := m.DeleteSnapshot(ctx, owner, snap.ID); err != nil {
		t.Fatal(err)
	}
	if g, _ := filepath.Glob(filepath.Join(m.snaps.LowersDir(), "*")); len(g) != 0 {
		t.Errorf("lowers left after the snapshot went: %v", g)
	}
}

// TestHibernateAFork: a fork hibernates into one image of its own and
// resumes with what it saw; its layers are gone.
func TestHibernateAFork(t *testing.T) {
	ctx := context.Background()
	m, _, fork := oneFork(t)
	sh(t, fork, "echo mine > only && rm del")
	if _, err := m.Hibernate(ctx, owner, fork.ID()); err != nil {
		t.Fatal(err)
	}
	if err := m.Resume(ctx, owner, fork.ID()); err != nil {
		t.Fatal(err)
	}
	if r := sh(t, fork, "cat d/f only; cat del 2>/dev/null || echo absent; sha256sum -c big.sum >/dev/null && echo sum-ok"); r.Stdout != "hello\nmine\nabsent\nsum-ok\n" {
		t.Errorf("resumed fork: %q %q", r.Stdout, r.Stderr)
	}
	for _, n := range []string{forklower.Marker, forklower.UpperImage} {
		if _, err := os.Stat(filepath.Join(fork.workspaceDir(), n)); err == nil {
			t.Errorf("a resumed fork keeps its %s", n)
		}
	}
}

// TestForksCloneWhereBlocksAreShared: on XFS with reflinks a fork's image
// is a clone of the snapshot's (cheaper than a layer); no lower is made.
func TestForksCloneWhereBlocksAreShared(t *testing.T) {
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(testenv.RequireXFS(t), "data")
	m := newManager(t, withSnapshots(t, cfg), nil)
	_, snap := forkSource(t, m)
	f := restore(t, m, snap.ID, 1)[0]
	if r := sh(t, f, "cat d/f"); r.Stdout != "hello\n" {
		t.Errorf("fork sees %q", r.Stdout)
	}
	if _, err := os.Stat(filepath.Join(f.workspaceDir(), volume.ImageName)); err != nil {
		t.Errorf("a fork on XFS has no image of its own: %v", err)
	}
	if _, err := os.Stat(m.snaps.LowersDir()); err == nil {
		t.Error("a fork on XFS made a lower layer")
	}
}

// TestForkTooFullToFlatten: a fork's writes are bounded by its own image,
// so its merged view can outgrow one image of its disk limit; a snapshot
// or hibernation of it is then refused (409), and the fork runs on.
func TestForkTooFullToFlatten(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, withSnapshots(t, testConfig(t)), nil)
	requireLayered(t, m)
	src := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	if r := sh(t, src, "head -c 40000000 /dev/urandom > a"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("setup: %q", r.Stderr)
	}
	snap, err := m.Snapshot(ctx, owner, src.ID(), "full")
	if err != nil {
		t.Fatal(err)
	}
	fork := restore(t, m, snap.ID, 1)[0]
	if r := sh(t, fork, "head -c 40000000 /dev/urandom > b && echo ok"); r.Stdout != "ok\n" {
		t.Fatalf("a fork cannot write its own limit: %q", r.Stderr)
	}
	if _, err := m.Snapshot(ctx, owner, fork.ID(), "too-big"); !fault.Is(err, fault.Conflict) {
		t.Errorf("snapshot of an over-full fork: %v", err)
	}
	if _, err := m.Hibernate(ctx, owner, fork.ID()); !fault.Is(err, fault.Conflict) {
		t.Errorf("hibernate of an over-full fork: %v", err)
	}
	if r := sh(t, fork, "rm b && wc -c < a"); r.Stdout != "40000000\n" {
		t.Errorf("the fork after the refusals: %q %q", r.Stdout, r.Stderr)
	}
	if _, err := m.Snapshot(ctx, owner, fork.ID(), "fits"); err != nil {
		t.Errorf("snapshot once it fits: %v", err)
	}
}

// TestForksCopyWhereLayersCannotMount: a host where the overlay cannot be
// mounted (no id-mapped overlay, ptrace refused) gives forks a copy of the
// image, the first one included, and layers no more of them.
func TestForksCopyWhereLayersCannotMount(t *testing.T) {
	m := newManager(t, withSnapshots(t, testConfig(t)), nil)
	requireLayered(t, m)
	_, snap := forkSource(t, m)
	old := forkOverlay
	forkOverlay = func(*os.File, *os.File, uint32) (*os.File, error) { return nil, errors.New("no overlay here") }
	t.Cleanup(func() { forkOverlay = old })
	for i, f := range restore(t, m, snap.ID, 2) {
		if r := sh(t, f, "cat d/f"); r.Stdout != "hello\n" {
			t.Errorf("fork %d sees %q %q", i, r.Stdout, r.Stderr)
		}
		for _, n := range []string{forklower.Marker, forklower.UpperImage} {
			if _, err := os.Stat(filepath.Join(f.workspaceDir(), n)); err == nil {
				t.Errorf("fork %d keeps its %s", i, n)
			}
		}
		if _, err := os.Stat(filepath.Join(f.workspaceDir(), volume.ImageName)); err != nil {
			t.Errorf("fork %d has no copy: %v", i, err)
		}
	}
	waitDetached(t, m.snaps.LowersDir())
}

// TestForkSnapshotCountsItsLower: what a snapshot of a fork may need is
// its merged view — its snapshot's files and its own writes — so the
// key's snapshot budget refuses one that fits only by its writes.
func TestForkSnapshotCountsItsLower(t *testing.T) {
	ctx := context.Background()
	cfg := withSnapshots(t, testConfig(t))
	cfg.SnapshotBudget = 30 << 20
	m := newManager(t, cfg, nil)
	requireLayered(t, m)
	src := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	if r := sh(t, src, "head -c 16000000 /dev/urandom > a"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("setup: %q", r.Stderr)
	}
	snap, err := m.Snapshot(ctx, owner, src.ID(), "16mb")
	if err != nil {
		t.Fatal(err)
	}
	fork := restore(t, m, snap.ID, 1)[0]
	sh(t, fork, "echo small > b")
	if _, err := m.Snapshot(ctx, owner, fork.ID(), "merged"); !fault.Is(err, fault.Conflict) || !strings.Contains(err.Error(), "SANDBOX_SNAPSHOT_BUDGET") {
		t.Errorf("a fork's snapshot past the budget with its lower: %v", err)
	}
}

// TestIdmapUsernsLeavesNoProcess: the child volume.IDMapUserns clones into the
// user namespace is killed and reaped before it returns: no process of it
// (stopped at its exec, or a zombie) is left among the server's children,
// and the namespace it returns is a user namespace of its own.
func TestIdmapUsernsLeavesNoProcess(t *testing.T) {
	testenv.RequireSandboxes(t)
	before := childPids(t)
	for range 3 {
		fd, err := volume.IDMapUserns(hostBase(1))
		if err != nil {
			t.Skipf("this host cannot make an id-map user namespace (forks copy here): %v", err)
		}
		var st, self unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		_ = unix.Close(fd)
		if err := unix.Stat("/proc/self/ns/user", &self); err != nil {
			t.Fatal(err)
		}
		if st.Ino == self.Ino {
			t.Fatal("volume.IDMapUserns returned the server's own user namespace")
		}
	}
	for pid := range childPids(t) {
		if before[pid] {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if strings.HasPrefix(string(cmdline), "sandhold-idmap") || strings.Contains(string(stat), ") Z ") {
			t.Errorf("an id-map child is left: pid %s, %q", pid, stat)
		}
	}
}

// childPids lists this process's children (every thread's).
func childPids(t *testing.T) map[string]bool {
	t.Helper()
	lists, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil || len(lists) == 0 {
		t.Skipf("no /proc/self/task/*/children here: %v", err)
	}
	out := make(map[string]bool)
	for _, p := range lists {
		b, _ := os.ReadFile(p)
		for _, pid := range strings.Fields(string(b)) {
			out[pid] = true
		}
	}
	return out
}
