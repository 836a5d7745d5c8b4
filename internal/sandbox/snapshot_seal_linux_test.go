package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/snapshot"
	"github.com/sandhold/sandhold/internal/testenv"
)

// TestSnapshotSealsAfterItAnswers: on XFS with reflinks snapshot.create
// answers with the snapshot sealing (no digest; its audit record says the
// digest is pending) and a fork is made from it meanwhile; an export waits
// for the seal and carries its digest, which the system's snapshot.seal
// record names; the snapshot then reads ready with that digest.
func TestSnapshotSealsAfterItAnswers(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(testenv.RequireXFS(t), "data")
	m := newManager(t, withSnapshots(t, cfg), nil)
	var mu sync.Mutex
	var events []Event
	m.audit = func(_ context.Context, e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	rec := &records{}
	d := dispatch.New(dispatch.Options{Audit: rec})
	for _, tl := range Tools(m, guard.New(guard.Config{})) {
		d.MustRegister(tl)
	}
	c := auth.Caller{KeyID: owner.KeyID, Role: auth.RoleAgent}
	src := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	if r := sh(t, src, "head -c 12000000 /dev/urandom > a && echo hi > b"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("setup: %q", r.Stderr)
	}
	snap, err := ToolSnapshotCreate.Call(ctx, d, c, SnapshotCreateArgs{ID: src.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if snap.State != SnapshotSealing || snap.Digest != "" {
		t.Fatalf("snapshot.create answered state %q digest %q, want sealing without a digest", snap.State, snap.Digest)
	}
	rec.mu.Lock()
	var created map[string]any
	for _, e := range rec.entries {
		if e.Action == ToolSnapshotCreate.Name() {
			created = e.Detail
		}
	}
	rec.mu.Unlock()
	if created["snapshot"] != snap.ID || created["digest_pending"] != true {
		t.Errorf("snapshot.create's audit record: %v", created)
	}

	fork := restore(t, m, snap.ID, 1)[0]
	if r := sh(t, fork, "cat b"); r.Stdout != "hi\n" {
		t.Errorf("a fork of a sealing snapshot sees %q", r.Stdout)
	}

	e, err := ToolSnapshotExport.Call(dispatch.WithStreaming(ctx), d, c, SnapshotRef{Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	if e.State != SnapshotReady || e.Digest == "" {
		t.Fatalf("export answered state %q digest %q: it did not wait for the seal", e.State, e.Digest)
	}
	var buf bytes.Buffer
	if err := e.Write(ctx, &buf); err != nil || buf.Len() < 12000000 {
		t.Fatalf("export: %v (%d bytes)", err, buf.Len())
	}
	mu.Lock()
	var seal *Event
	for i := range events {
		if events[i].Action == "snapshot.seal" {
			seal = &events[i]
		}
	}
	mu.Unlock()
	if seal == nil || seal.Actor != "system" || seal.Verdict != "completed" || seal.Sandbox != src.ID() ||
		seal.Detail["snapshot"] != snap.ID || seal.Detail["digest"] != e.Digest {
		t.Fatalf("snapshot.seal record: %+v (export digest %s)", seal, e.Digest)
	}
	got, err := m.GetSnapshot(owner, snap.ID)
	if err != nil || got.State != SnapshotReady || got.Digest != e.Digest {
		t.Errorf("after the seal: %v %+v", err, got)
	}
}

// TestForkOfASealingSnapshotSaysItsDigestIsPending: a fork of a snapshot
// whose seal has not ended, and a sandbox made from it, answer and audit
// no digest but say it is pending (snapshot_state sealing, *_pending in
// the records); once the seal ends they carry the digest it made.
func TestForkOfASealingSnapshotSaysItsDigestIsPending(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(testenv.RequireXFS(t), "data")
	m := newManager(t, withSnapshots(t, cfg), nil)
	rec := &records{}
	d := dispatch.New(dispatch.Options{Audit: rec})
	for _, tl := range Tools(m, guard.New(guard.Config{})) {
		d.MustRegister(tl)
	}
	c := auth.Caller{KeyID: owner.KeyID, Role: auth.RoleAgent}
	src := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	if r := sh(t, src, "echo hi > b"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("setup: %q", r.Stderr)
	}
	release, restoreHook := snapshot.HoldSeals()
	t.Cleanup(restoreHook)
	snap, err := ToolSnapshotCreate.Call(ctx, d, c, SnapshotCreateArgs{ID: src.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if snap.State != SnapshotSealing {
		t.Fatalf("snapshot.create answered %q, want sealing (held)", snap.State)
	}
	lastDetail := func(action string) map[string]any {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for i := len(rec.entries) - 1; i >= 0; i-- {
			if rec.entries[i].Action == action {
				return rec.entries[i].Detail
			}
		}
		return nil
	}
	answer := func(r ForkResult) map[string]any {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}

	res, err := ToolSnapshotFork.Call(ctx, d, c, ForkArgs{Snapshot: snap.ID, Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a := answer(res); a["snapshot_state"] != SnapshotSealing || a["digest"] != nil {
		t.Errorf("a fork of a sealing snapshot answered %v: want snapshot_state sealing and no digest", a)
	}
	if f := lastDetail(ToolSnapshotFork.Name()); f["digest_pending"] != true || f["digest"] != nil {
		t.Errorf("snapshot.fork's record while sealing: %v", f)
	}
	if f := lastDetail(ToolCreate.Name()); f["snapshot"] != snap.ID || f["snapshot_digest_pending"] != true || f["snapshot_digest"] != nil {
		t.Errorf("the fork's sandbox.create record while sealing: %v", f)
	}

	release()
	var sealed SnapshotInfo
	testenv.Eventually(t, "the snapshot is sealed", func() bool {
		sealed, err = m.GetSnapshot(owner, snap.ID)
		return err == nil && sealed.State == SnapshotReady
	})
	if sealed.Digest == "" {
		t.Fatal("sealed without a digest")
	}
	res, err = ToolSnapshotFork.Call(ctx, d, c, ForkArgs{Snapshot: snap.ID, Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotState != SnapshotReady || res.Digest != sealed.Digest {
		t.Errorf("a fork of the sealed snapshot answered %q %q, want ready %s", res.SnapshotState, res.Digest, sealed.Digest)
	}
	if f := lastDetail(ToolSnapshotFork.Name()); f["digest"] != sealed.Digest || f["digest_pending"] != nil {
		t.Errorf("snapshot.fork's record once sealed: %v", f)
	}
	if f := lastDetail(ToolCreate.Name()); f["snapshot_digest"] != sealed.Digest || f["snapshot_digest_pending"] != nil {
		t.Errorf("the fork's sandbox.create record once sealed: %v", f)
	}
}

// TestTwoManagersSealOnce: two servers starting together on one shared
// snapshot directory over a snapshot a stopped server left sealing both
// recover it, and it is sealed once: one snapshot.seal record between
// them, naming the digest both then read.
func TestTwoManagersSealOnce(t *testing.T) {
	ctx := context.Background()
	xfs := testenv.RequireXFS(t)
	shared := filepath.Join(xfs, "shared-snapshots")
	open := func() *snapshot.Store {
		st, err := snapshot.Open(shared, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(xfs, "data")
	cfg.Snapshots = open()
	m0 := newManager(t, cfg, nil)
	src := create(t, m0, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	if r := sh(t, src, "echo hi > b"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("setup: %q", r.Stderr)
	}
	release, restoreHook := snapshot.HoldSeals()
	t.Cleanup(restoreHook)
	snap, err := m0.Snapshot(ctx, owner, src.ID(), "")
	if err != nil {
		t.Fatal(err)
	}
	left, err := cfg.Snapshots.Get("", true, snap.ID)
	if err != nil || !left.Sealing() {
		t.Fatalf("the snapshot: %v %+v, want sealing (held)", err, left)
	}
	m0.Close() // the server stops: the snapshot stays sealing

	var mu sync.Mutex
	var seals []Event
	node := func(name string) *Manager {
		c := testConfig(t)
		c.Snapshots = open()
		cg, err := cgroup.New(fmt.Sprintf("st%d-%s-%s", os.Getpid(), t.Name(), name))
		if err != nil {
			t.Skip("cgroups unavailable:", err)
		}
		t.Cleanup(cg.Release)
		m, err := New(ctx, c, &memRecords{}, nil, cg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		// Set before the held seals can tell (release, below).
		m.audit = func(_ context.Context, e Event) {
			if e.Action == "snapshot.seal" {
				mu.Lock()
				seals = append(seals, e)
				mu.Unlock()
			}
		}
		return m
	}
	a, b := node("a"), node("b")
	release()
	// Each node's wait ends once its own seal run has (sealed, or seen
	// the snapshot sealed by the other): every record is made by then.
	var digests []string
	for _, m := range []*Manager{a, b} {
		got, err := m.cfg.Snapshots.WaitSealed(ctx, left)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, got.Digest)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seals) != 1 {
		t.Fatalf("%d snapshot.seal records, want 1: %+v", len(seals), seals)
	}
	if d := seals[0].Detail["digest"]; d == "" || d != digests[0] || d != digests[1] || seals[0].Verdict != "completed" {
		t.Errorf("the record %+v; the nodes read digests %v", seals[0], digests)
	}
}
