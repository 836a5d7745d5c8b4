package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/snapshot"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/testenv"
)

func withSnapshots(t *testing.T, c Config) Config {
	t.Helper()
	st, err := snapshot.Open(filepath.Join(c.DataDir, "snapshots"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Snapshots = st
	return c
}

// TestSnapshotRestoreFork: a snapshot of a running sandbox restores into
// new sandboxes of their own (host ids included), each isolated from the
// others and from the source; deleting the source keeps the snapshot.
func TestSnapshotRestoreFork(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, withSnapshots(t, testConfig(t)), nil)
	src := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	if r := sh(t, src, "mkdir -p d && echo hello > d/f && ln -s d/f link && chmod 4755 d/f && dd if=/dev/urandom of=big bs=1M count=5 2>/dev/null && sha256sum big > big.sum"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("setup: %q %q", r.Stdout, r.Stderr)
	}
	// A background writer keeps running through the snapshot (frozen).
	run(t, src, ExecRequest{Command: "while :; do date >> log; sleep 0.01; done", Background: true})
	snap, err := m.Snapshot(ctx, owner, src.ID(), "first")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Digest == "" || snap.Processes || snap.ImageSize != 64<<20 {
		t.Fatalf("snapshot %+v", snap)
	}
	if r := sh(t, src, "echo after > after"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("the source does not run after its snapshot: %q", r.Stderr)
	}

	var forks []*Sandbox
	for range 2 {
		info, err := m.Create(ctx, owner, Spec{Snapshot: snap.ID})
		if err != nil {
			t.Fatal(err)
		}
		if info.ProcessesRestored == nil || *info.ProcessesRestored || info.Snapshot != snap.ID || info.Limits.DiskBytes != 64<<20 {
			t.Fatalf("restored info %+v", info)
		}
		f, _ := m.Get(owner, info.ID)
		forks = append(forks, f)
	}
	check := "cat d/f; readlink link; stat -c '%a %u' d/f; id -u; sha256sum -c big.sum >/dev/null && echo sum-ok; test -e after || echo no-after"
	for i, f := range forks {
		r := sh(t, f, check)
		want := "hello\nd/f\n4755 1000\n1000\nsum-ok\nno-after\n"
		if r.Stdout != want {
			t.Errorf("fork %d: %q (stderr %q), want %q", i, r.Stdout, r.Stderr, want)
		}
	}
	// Fork isolation: a write in one fork is invisible to the other and
	// to the source.
	sh(t, forks[0], "echo mine > only0")
	for _, s := range []*Sandbox{forks[1], src} {
		if r := sh(t, s, "cat only0 2>/dev/null || echo absent"); r.Stdout != "absent\n" {
			t.Errorf("%s sees a fork's write: %q", s.ID(), r.Stdout)
		}
	}
	// Another tenant neither sees nor restores it.
	other := Caller{KeyID: "key-b"}
	if _, err := m.GetSnapshot(other, snap.ID); !fault.Is(err, fault.NotFound) {
		t.Errorf("another key's get: %v", err)
	}
	if _, err := m.Create(ctx, other, Spec{Snapshot: snap.ID}); !fault.Is(err, fault.NotFound) {
		t.Errorf("another key's restore: %v", err)
	}
	// Deleting the source keeps the snapshot, which still restores.
	if err := m.Delete(ctx, owner, src.ID()); err != nil {
		t.Fatal(err)
	}
	info, err := m.Create(ctx, owner, Spec{Snapshot: snap.ID})
	if err != nil {
		t.Fatalf("restore after the source's delete: %v", err)
	}
	f, _ := m.Get(owner, info.ID)
	if r := sh(t, f, "cat d/f"); r.Stdout != "hello\n" {
		t.Errorf("restore after the source's delete: %q", r.Stdout)
	}
	if _, err := m.DeleteSnapshot(ctx, owner, snap.ID); err != nil {
		t.Fatal(err)
	}
	if u := m.cfg.Snapshots.Usage(owner.KeyID, false); u != 0 {
		t.Errorf("the owner's snapshots hold %d bytes after the last went", u)
	}
}

// TestHibernateSurvivesRestart: a hibernated sandbox has no init and no
// image, keeps its id, survives a restart of the manager and resumes on
// its next use with its files.
func TestHibernateSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	cfg := withSnapshots(t, testConfig(t))
	recs := &memRecords{}
	m := newManager(t, cfg, recs)
	s := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	sh(t, s, "echo kept > f")
	id := s.ID()
	info, err := m.Hibernate(ctx, owner, id)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != Hibernated {
		t.Fatalf("state %s", info.State)
	}
	if s.cgroupGroup() != nil {
		t.Error("a hibernated sandbox keeps its cgroup")
	}
	if _, err := filepath.Glob(filepath.Join(s.workspaceDir(), "*")); err == nil {
		if g, _ := filepath.Glob(filepath.Join(s.workspaceDir(), "*")); len(g) > 0 {
			t.Errorf("a hibernated sandbox keeps files on the node: %v", g)
		}
	}
	// Its image is parked whole in the store, and nothing else — not even
	// an admin's restore — takes it from there.
	l, _ := cfg.Snapshots.List("", true, true)
	if len(l) != 1 || !l[0].Parked {
		t.Fatalf("the store holds %+v", l)
	}
	if _, err := m.Create(ctx, Caller{KeyID: "admin", Admin: true}, Spec{Snapshot: l[0].ID}); !fault.Is(err, fault.NotFound) {
		t.Errorf("an admin's restore of a hibernation: %v", err)
	}
	m.Close()

	m2 := newManager(t, cfg, recs)
	s2, err := m2.Get(owner, id)
	if err != nil {
		t.Fatal(err)
	}
	if st := s2.State(); st != Hibernated {
		t.Fatalf("after a restart: %s", st)
	}
	if err := m2.Resume(ctx, owner, id); err != nil {
		t.Fatal(err)
	}
	if r := sh(t, s2, "cat f"); r.Stdout != "kept\n" {
		t.Errorf("resumed: %q %q", r.Stdout, r.Stderr)
	}
	if rec := recs.recs[id]; rec.Restore != nil {
		t.Errorf("the record still says %+v", rec.Restore)
	}
	if l, _ := cfg.Snapshots.List("", true, true); len(l) != 0 {
		t.Errorf("the hibernation snapshot outlives the resume: %d left", len(l))
	}
}

// TestTemplateUpperSurvivesFork: what a template sandbox installed (its
// overlay's upper, in the image) is in a fork of its snapshot.
func TestTemplateUpperSurvivesFork(t *testing.T) {
	ctx := context.Background()
	m, tst, _ := templateManager(t, template.Config{})
	st, err := snapshot.Open(filepath.Join(m.cfg.DataDir, "snapshots"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.cfg.Snapshots = st
	m.snaps = newKeep(m) // the keep of the store set here
	s := create(t, m, Spec{Template: "bb:1", Limits: Limits{DiskBytes: 64 << 20}})
	sh(t, s, "mkdir -p /opt/tool && echo v1 > /opt/tool/VERSION && rm /etc/motd && echo w > /workspace/f")
	snap, err := m.Snapshot(ctx, owner, s.ID(), "")
	if err != nil {
		t.Fatal(err)
	}
	// The snapshot keeps its template: no sandbox and no name hold it
	// any more, and a collection leaves it.
	if err := m.Delete(ctx, owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := tst.Remove(template.Caller{KeyID: "admin", Admin: true}, "bb:1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tst.GC(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := m.Create(ctx, owner, Spec{Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	if info.Template != "" && !strings.HasPrefix(info.TemplateDigest, "sha256:") {
		t.Errorf("fork's template %q %q", info.Template, info.TemplateDigest)
	}
	f, _ := m.Get(owner, info.ID)
	if r := sh(t, f, "cat /opt/tool/VERSION /workspace/f; test -e /etc/motd || echo motd-gone"); r.Stdout != "v1\nw\nmotd-gone\n" {
		t.Errorf("fork of a template sandbox: %q (stderr %q)", r.Stdout, r.Stderr)
	}
}

type atomicHalt struct{ on atomic.Bool }

func (h *atomicHalt) Halted() (bool, string) { return h.on.Load(), "test" }

// TestHaltDuringForkStopsIt: a HALT that comes while a fork makes its
// sandboxes refuses the next sandbox.create, and the fork deletes the
// forks it made (all or none).
func TestHaltDuringForkStopsIt(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, withSnapshots(t, testConfig(t)), nil)
	src := create(t, m, Spec{Limits: Limits{DiskBytes: 32 << 20}})
	snap, err := m.Snapshot(ctx, owner, src.ID(), "")
	if err != nil {
		t.Fatal(err)
	}
	halt := &atomicHalt{}
	var made atomic.Int32
	forkMade = func(int) {
		made.Add(1)
		halt.on.Store(true) // the operator halts once the first fork is made
	}
	t.Cleanup(func() { forkMade = func(int) {} })
	d := dispatch.New(dispatch.Options{Halt: halt})
	for _, tl := range Tools(m, guard.New(guard.Config{})) {
		d.MustRegister(tl)
	}
	c := auth.Caller{KeyID: owner.KeyID, Role: auth.RoleAgent}
	_, err = ToolSnapshotFork.Call(ctx, d, c, ForkArgs{Snapshot: snap.ID, Count: 8})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "halt") {
		t.Fatalf("fork under a HALT: %v", err)
	}
	if made.Load() == 0 || made.Load() >= 8 {
		t.Fatalf("%d forks were made before the HALT stopped it", made.Load())
	}
	if l := m.List(owner); len(l) != 1 || l[0].ID != src.ID() {
		t.Errorf("after the stopped fork the key has %d sandboxes, want the source only", len(l))
	}
}

// TestSnapshotsCountAgainstTheBudgets: a key's snapshots are bounded by
// its snapshot budget, and every snapshot counts in the disk guard's
// reading with the images.
func TestSnapshotsCountAgainstTheBudgets(t *testing.T) {
	ctx := context.Background()
	cfg := withSnapshots(t, testConfig(t))
	cfg.SnapshotBudget = 12 << 20
	m := newManager(t, cfg, nil)
	s := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	sh(t, s, "dd if=/dev/urandom of=a bs=1M count=5 2>/dev/null")
	m.checkDisk()
	before, _, _ := m.DiskGuard()
	if _, err := m.Snapshot(ctx, owner, s.ID(), "one"); err != nil {
		t.Fatal(err)
	}
	used := cfg.Snapshots.Usage(owner.KeyID, false)
	if used < 5<<20 {
		t.Fatalf("the snapshot holds %d bytes", used)
	}
	m.checkDisk()
	if after, _, _ := m.DiskGuard(); after-before < used-(1<<20) {
		t.Errorf("the disk guard's reading grew by %d bytes with a snapshot of %d", after-before, used)
	}
	// 5 MB more would pass the 12 MB budget.
	sh(t, s, "dd if=/dev/urandom of=b bs=1M count=5 2>/dev/null")
	if _, err := m.Snapshot(ctx, owner, s.ID(), "two"); !fault.Is(err, fault.Conflict) {
		t.Fatalf("a snapshot past the key's budget: %v", err)
	}
	if u := cfg.Snapshots.Usage(owner.KeyID, false); u != used {
		t.Errorf("a refused snapshot changed the key's usage: %d → %d", used, u)
	}
	// Another key's budget is its own.
	o, err := m.Create(ctx, Caller{KeyID: "key-b"}, Spec{Limits: Limits{DiskBytes: 32 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Snapshot(ctx, Caller{KeyID: "key-b"}, o.ID, ""); err != nil {
		t.Errorf("another key's snapshot: %v", err)
	}
}

// TestRestoreOnAFreshServer: a snapshot restores on a server that never
// ran its sandbox — another data dir, only the snapshot store shared (a
// cluster's other node, or the same host rebuilt) — after the server that
// took it is gone.
func TestRestoreOnAFreshServer(t *testing.T) {
	ctx := context.Background()
	first := withSnapshots(t, testConfig(t))
	m := newManager(t, first, nil)
	src := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	if r := sh(t, src, "mkdir -p d && echo kept > d/f && ln -s d/f link"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("setup: %q", r.Stderr)
	}
	snap, err := m.Snapshot(ctx, owner, src.ID(), "portable")
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	_ = os.RemoveAll(first.DataDir + "/workspaces") // nothing of the first server's is left but the store

	fresh := testConfig(t)
	fresh.Snapshots = first.Snapshots
	m2 := newManager(t, fresh, nil)
	info, err := m2.Create(ctx, owner, Spec{Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m2.Get(owner, info.ID)
	if r := sh(t, s, "cat link; stat -c %u d/f"); r.Stdout != "kept\n1000\n" {
		t.Errorf("restored on a fresh server: %q %q", r.Stdout, r.Stderr)
	}
}

// TestSnapshotThawsOnceTheImageIsCloned: where the file system shares
// blocks (XFS with reflinks), a snapshot freezes the sandbox only for one
// clone of its image: while the snapshot reads it, a process in the
// sandbox keeps writing. The snapshot is whole all the same.
func TestSnapshotThawsOnceTheImageIsCloned(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(testenv.RequireXFS(t), "data")
	m := newManager(t, withSnapshots(t, cfg), nil)
	s := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	sh(t, s, "dd if=/dev/urandom of=big bs=1M count=8 2>/dev/null && sha256sum big > big.sum")
	run(t, s, ExecRequest{Command: "while :; do date +%s%N > tick; sleep 0.01; done", Background: true})
	s.mu.Lock()
	vol := int(s.vol.Fd())
	s.mu.Unlock()
	tick := func() string {
		fd, err := unix.Openat(vol, "tick", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return ""
		}
		defer func() { _ = unix.Close(fd) }()
		b := make([]byte, 64)
		n, _ := unix.Read(fd, b)
		return string(b[:max(n, 0)])
	}
	testenv.Eventually(t, "the writer runs", func() bool { return tick() != "" })
	seen := false
	captureHook = func(got *Sandbox) {
		if got != s {
			return
		}
		first := tick()
		testenv.Eventually(t, "the sandbox runs while its snapshot is read", func() bool { v := tick(); return v != "" && v != first })
		seen = true
	}
	t.Cleanup(func() { captureHook = func(*Sandbox) {} })
	snap, err := m.Snapshot(ctx, owner, s.ID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !seen {
		t.Fatal("the capture hook did not run")
	}
	info, err := m.Create(ctx, owner, Spec{Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := m.Get(owner, info.ID)
	if r := sh(t, f, "sha256sum -c big.sum"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("the restored data differs: %q %q", r.Stdout, r.Stderr)
	}
}

// takenRecords is memRecords of a cluster node from which another node
// took every sandbox over (HeldHere says no).
type takenRecords struct{ memRecords }

func (r *takenRecords) TakeOver(context.Context, string, string, func(Record) (Record, error)) (Record, error) {
	return Record{}, fault.New(fault.Conflict, "not in this test")
}

func (r *takenRecords) HeldHere(context.Context, string) (bool, error) { return false, nil }

// TestResumeRefusedOnceTakenOver: a node that was cut off while another
// took its hibernated sandbox over does not resume it (the image is the
// other node's now): the resume is refused and the parked image stays.
func TestResumeRefusedOnceTakenOver(t *testing.T) {
	ctx := context.Background()
	cfg := withSnapshots(t, testConfig(t))
	m := newManager(t, cfg, &takenRecords{})
	s := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	sh(t, s, "echo kept > f")
	if _, err := m.Hibernate(ctx, owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	if err := m.Resume(ctx, owner, s.ID()); !fault.Is(err, fault.Conflict) {
		t.Fatalf("resume after a take-over: %v", err)
	}
	l, _ := cfg.Snapshots.List("", true, true)
	if len(l) != 1 || !cfg.Snapshots.Holds(&l[0]) {
		t.Fatalf("the parked image left the store: %+v", l)
	}
}
