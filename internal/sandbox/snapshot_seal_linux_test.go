package sandbox

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
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
