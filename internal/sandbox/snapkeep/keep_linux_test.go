package snapkeep

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/snapshot"
)

const testMeta = `{"limits":{"memory":1048576},"network":{"mode":"none"},"template":"base:1@sha256:abc","host_base":200000}`

// testKeep is a keep on a store of its own; cfg's zero funcs are ones
// that refuse nothing, count nothing and list nothing.
func testKeep(t *testing.T, cfg Config) *Keep {
	t.Helper()
	if cfg.Store == nil {
		st, err := snapshot.Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		cfg.Store = st
	}
	cfg.DataDir, cfg.Log = t.TempDir(), slog.Default()
	if cfg.DiskRefusal == nil {
		cfg.DiskRefusal = func() error { return nil }
	}
	if cfg.Images == nil {
		cfg.Images = func() int64 { return 0 }
	}
	if cfg.HibernatesIn == nil {
		cfg.HibernatesIn = func(string) bool { return false }
	}
	if cfg.Workspaces == nil {
		cfg.Workspaces = func() []string { return nil }
	}
	if cfg.Sealed == nil {
		cfg.Sealed = func(*snapshot.Manifest, error) {}
	}
	return New(cfg)
}

// testImage is a workspace image of 1 MiB in a dir of its own, its first
// bytes data.
func testImage(t *testing.T, data []byte) (dir string, f *os.File) {
	t.Helper()
	dir = t.TempDir()
	f, err := os.Create(filepath.Join(dir, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	return dir, f
}

// capture keeps a snapshot of owner's with testMeta, sealed.
func capture(t *testing.T, k *Keep, owner string) *snapshot.Manifest {
	t.Helper()
	_, f := testImage(t, []byte("hello"))
	man, err := k.cfg.Store.Capture(context.Background(), f, 1<<20, snapshot.Info{Name: "s", Owner: owner, Sandbox: "sb1", Meta: []byte(testMeta)})
	if err != nil {
		t.Fatal(err)
	}
	if man, err = k.Sealed(context.Background(), man); err != nil {
		t.Fatal(err)
	}
	return man
}

func isKind(err error, kind fault.Kind) bool {
	var fe *fault.Error
	return errors.As(err, &fe) && fe.Kind == kind
}

// TestWithoutStore: a server without a snapshot store refuses what needs
// one and counts nothing.
func TestWithoutStore(t *testing.T) {
	k := New(Config{Log: slog.Default(), DataDir: t.TempDir()})
	if _, err := k.Store(); !errors.Is(err, ErrNoSnapshots) {
		t.Errorf("Store: %v", err)
	}
	if err := k.Room("k", 1, false); !errors.Is(err, ErrNoSnapshots) {
		t.Errorf("Room: %v", err)
	}
	if _, err := k.Of("k", false, "x"); !errors.Is(err, ErrNoSnapshots) {
		t.Errorf("Of: %v", err)
	}
	if k.Usage() != 0 || k.Templates() != nil || k.Holds("x") {
		t.Error("a keep without a store counts something")
	}
	if d, state := k.Seal("x"); d != "" || state != "" {
		t.Errorf("Seal = %q, %q", d, state)
	}
}

// TestRoomCountsKeyAndDisk: the key's budget bounds every snapshot, the
// disk's guard and budget only one that adds to the disk.
func TestRoomCountsKeyAndDisk(t *testing.T) {
	guard := errors.New("guard stopped")
	images := int64(0)
	k := testKeep(t, Config{DiskRefusal: func() error { return guard }, Images: func() int64 { return images }})
	capture(t, k, "k1")
	used := k.cfg.Store.Usage("k1", false)
	if used <= 0 {
		t.Fatalf("the key's snapshot holds %d bytes", used)
	}
	k.cfg.Budget = used + 10
	if err := k.Room("k1", 10, false); err != nil {
		t.Errorf("within the key's budget: %v", err)
	}
	if err := k.Room("k1", 11, false); !isKind(err, fault.Conflict) || !strings.Contains(err.Error(), "SANDBOX_SNAPSHOT_BUDGET") {
		t.Errorf("over the key's budget: %v", err)
	}
	if err := k.Room("k2", 11, false); err != nil {
		t.Errorf("another key's budget: %v", err)
	}
	if err := k.Room("k1", 1, true); !errors.Is(err, guard) {
		t.Errorf("with the guard stopped: %v, want its refusal", err)
	}
	k.cfg.DiskRefusal = func() error { return nil }
	k.cfg.DiskBudget, images = 100, 90
	if err := k.Room("k2", 10, true); err != nil {
		t.Errorf("within the disk budget: %v", err)
	}
	if err := k.Room("k2", 11, true); !isKind(err, fault.Conflict) || !strings.Contains(err.Error(), "SANDBOX_DISK_BUDGET") {
		t.Errorf("over the disk budget: %v", err)
	}
	if err := k.Room("k2", 11, false); err != nil {
		t.Errorf("a move into the store counts against the disk budget: %v", err)
	}
	if got := k.Usage(); got != k.cfg.Store.Usage("", true) {
		t.Errorf("Usage = %d, the store holds %d (no lowers)", got, k.cfg.Store.Usage("", true))
	}
}

// TestSealHeadAndTemplates: a sealed snapshot's digest, its settings'
// head and the template it was taken on.
func TestSealHeadAndTemplates(t *testing.T) {
	k := testKeep(t, Config{})
	man := capture(t, k, "k1")
	if d, state := k.Seal(man.ID); state != Ready || d != man.Digest || d == "" {
		t.Errorf("Seal = %q, %q; want %q, ready", d, state, man.Digest)
	}
	out := map[string]any{}
	k.Audit(out, "snapshot_digest", man.ID)
	if out["snapshot_digest"] != man.Digest || out["snapshot_digest_pending"] != nil {
		t.Errorf("Audit wrote %v", out)
	}
	h, err := HeadOf(man)
	if err != nil || h != (Head{Template: "base:1@sha256:abc", HostBase: 200000}) {
		t.Errorf("HeadOf = %+v, %v", h, err)
	}
	if got := k.Templates(); len(got) != 1 || got[0] != "sha256:abc" {
		t.Errorf("Templates = %v", got)
	}
	if d, state := k.Seal("gone"); d != "" || state != "" {
		t.Errorf("a missing snapshot's Seal = %q, %q", d, state)
	}
	out = map[string]any{}
	k.Audit(out, "snapshot_digest", "gone")
	if len(out) != 0 {
		t.Errorf("Audit of a missing snapshot wrote %v", out)
	}
}

// TestOfListDelete: a key sees its own snapshots, an admin all; a
// snapshot a sandbox hibernates in is not deleted.
func TestOfListDelete(t *testing.T) {
	hibernating := ""
	k := testKeep(t, Config{HibernatesIn: func(id string) bool { return id == hibernating }})
	man := capture(t, k, "k1")
	if _, err := k.Of("k2", false, man.ID); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("another key's Of: %v", err)
	}
	if _, err := k.Of("k2", true, man.ID); err != nil {
		t.Errorf("an admin's Of: %v", err)
	}
	if l, err := k.List("k2", false); err != nil || len(l) != 0 {
		t.Errorf("another key's List = %d, %v", len(l), err)
	}
	if l, err := k.List("k1", false); err != nil || len(l) != 1 {
		t.Errorf("the owner's List = %d, %v", len(l), err)
	}
	if _, err := k.Delete(context.Background(), "k2", false, man.ID); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("another key's Delete: %v", err)
	}
	hibernating = man.ID
	if _, err := k.Delete(context.Background(), "k1", false, man.ID); !isKind(err, fault.Conflict) {
		t.Errorf("Delete of a hibernation's snapshot: %v", err)
	}
	hibernating = ""
	if _, err := k.Delete(context.Background(), "k1", false, man.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Of("k1", false, man.ID); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("Of after Delete: %v", err)
	}
}

// TestParkRestoreDrop: a hibernation is parked only once its record names
// it (a failed record leaves no snapshot), is hidden from its owner, held
// here, restored and dropped.
func TestParkRestoreDrop(t *testing.T) {
	k := testKeep(t, Config{})
	in := snapshot.Info{Name: "sb1-hibernation", Owner: "k1", Sandbox: "sb1", Hibernation: true}
	dir, f := testImage(t, []byte("parked"))
	_ = f.Close()
	img := filepath.Join(dir, "disk.img")
	refused := errors.New("record refused")
	if err := k.Park(in, img, 1<<20, func(string) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("Park with a failed record: %v", err)
	}
	if all, _ := k.cfg.Store.List("", true, true); len(all) != 0 {
		t.Fatalf("a failed record left %d snapshots", len(all))
	}
	if _, err := os.Stat(img); err != nil {
		t.Fatalf("a failed record moved the image: %v", err)
	}
	var id string
	if err := k.Park(in, img, 1<<20, func(got string) error { id = got; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the parked image is still in the workspace: %v", err)
	}
	if _, err := k.Of("k1", false, id); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("the owner sees its hibernation as a snapshot: %v", err)
	}
	if !k.Holds(id) {
		t.Error("the store does not hold the parked image")
	}
	dst := filepath.Join(t.TempDir(), "ws", "disk.img")
	if err := k.RestoreImage(context.Background(), id, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.HasPrefix(got, []byte("parked")) || len(got) != 1<<20 {
		t.Fatalf("restored %d bytes (%v)", len(got), err)
	}
	k.Drop(id)
	if k.Holds(id) {
		t.Error("a dropped hibernation is still held")
	}
	if err := k.RestoreImage(context.Background(), id, dst+"2"); !isKind(err, fault.Unavailable) {
		t.Errorf("the restore of a dropped snapshot: %v", err)
	}
}

// TestReadImage: a capture reads the whole image (or its clone), sees the
// hook, and refuses a workspace without one.
func TestReadImage(t *testing.T) {
	dir, _ := testImage(t, []byte("held"))
	hooked, thawed := 0, 0
	var got []byte
	err := ReadImage(dir, func() { thawed++ }, func() { hooked++ }, func(img *os.File, size int64) error {
		if size != 1<<20 {
			t.Errorf("size %d", size)
		}
		got = make([]byte, 4)
		_, err := img.ReadAt(got, 0)
		return err
	})
	if err != nil || string(got) != "held" || hooked != 1 || thawed > 1 {
		t.Errorf("ReadImage: %v, read %q, hook %d, thaw %d", err, got, hooked, thawed)
	}
	err = ReadImage(t.TempDir(), func() {}, func() {}, func(*os.File, int64) error { return nil })
	if !isKind(err, fault.Conflict) {
		t.Errorf("without an image: %v", err)
	}
}

type testFreezer struct{ freezes, thaws int }

func (f *testFreezer) Freeze() error { f.freezes++; return nil }
func (f *testFreezer) Thaw() error   { f.thaws++; return nil }

// TestHold: a running sandbox is frozen until its thaw, which undoes the
// freeze once however often it is called; nothing runs, nothing freezes.
func TestHold(t *testing.T) {
	f := &testFreezer{}
	thaw, err := Hold(f, nil, slog.Default(), "sb1")
	if err != nil || f.freezes != 1 || f.thaws != 0 {
		t.Fatalf("Hold: %v, %d freezes, %d thaws", err, f.freezes, f.thaws)
	}
	thaw()
	thaw()
	if f.thaws != 1 {
		t.Errorf("%d thaws, want 1", f.thaws)
	}
	thaw, err = Hold(nil, nil, slog.Default(), "sb1")
	if err != nil {
		t.Fatal(err)
	}
	thaw()
}
