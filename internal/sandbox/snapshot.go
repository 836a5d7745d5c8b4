package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
	"github.com/sandhold/sandhold/internal/sandbox/snapkeep"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
	"github.com/sandhold/sandhold/internal/snapshot"
	"github.com/sandhold/sandhold/internal/template"
)

// Snapshots (internal/snapshot keeps them) are a sandbox's writable state:
// its workspace image — the workspace and, for a template sandbox, its
// root's writable layer — with its template, limits and network. A
// snapshot is taken with every process of the sandbox frozen and the image
// flushed (snapshot_linux.go); a sandbox made from one (Spec.Snapshot, a
// fork) gets a copy of the image and starts a fresh init: files and
// installed packages are as they were, processes are not (memory capture is
// refused: SECURITY.md says why). A restored sandbox is a new sandbox of
// its caller's: its own id, host ids, egress state, tickets and keys;
// nothing of the source's server-side state is cloned.
//
// Hibernate stops a sandbox and parks its image whole in the snapshot
// store (a rename on one file system, a copy to a store elsewhere): no
// process, no memory, no image in its workspace. Its record says
// hibernated (and survives restarts); its next start — any call that
// needs it, or resume — moves the image back first.

// Restore is a sandbox's pending restore from a snapshot: the image is
// made from the snapshot at its next start (internal/sandbox/snapkeep).
type Restore = snapkeep.Restore

// Hibernated: the sandbox's state is in a snapshot, nothing of it runs and
// its image is gone from the node; the next start restores it.
const Hibernated State = "hibernated"

// snapMeta is the settings a snapshot keeps (snapshot.Content.Meta); the
// keep reads its template and host id base (snapkeep.Head).
type snapMeta struct {
	Limits   Limits  `json:"limits"`
	Network  Network `json:"network"`
	Template string  `json:"template,omitempty"`
	Browser  bool    `json:"browser,omitempty"`
	HostBase uint32  `json:"host_base"`
}

// SnapshotInfo is a snapshot as clients see it.
type SnapshotInfo struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Owner          string    `json:"owner"`
	Sandbox        string    `json:"sandbox" doc:"the sandbox it was taken of (which may since be deleted)"`
	Created        time.Time `json:"created"`
	State          string    `json:"state" enum:"sealing,ready" doc:"ready: its digest exists; sealing: taken and durable (a clone of the image) but its digest is still being computed — restore and fork work, export waits"`
	Digest         string    `json:"digest" doc:"sha256 of the snapshot's content: image size, chunks and settings (empty while sealing)"`
	Bytes          int64     `json:"bytes" doc:"data the snapshot holds (chunks shared with the owner's other snapshots are stored once)"`
	ImageSize      int64     `json:"image_size" doc:"the workspace image's size: the restored sandbox's limits.disk"`
	Template       string    `json:"template"`
	TemplateDigest string    `json:"template_digest,omitempty"`
	Limits         Limits    `json:"limits"`
	Network        Network   `json:"network"`
	// Processes is always false: memory capture is off, so a restore
	// starts the sandbox's processes afresh.
	Processes bool `json:"processes" doc:"whether running processes were captured: false — a restored sandbox's files and packages are as they were, its processes are not"`
}

func infoOf(m *snapshot.Manifest) SnapshotInfo {
	in := SnapshotInfo{ID: m.ID, Name: m.Name, Owner: m.Owner, Sandbox: m.Sandbox, Created: m.Created,
		State: SnapshotReady, Digest: m.Digest, Bytes: m.Bytes, ImageSize: m.ImageSize}
	if m.Sealing() {
		in.State = SnapshotSealing
	}
	var meta snapMeta
	if json.Unmarshal(m.Meta, &meta) == nil {
		in.Limits, in.Network = meta.Limits, meta.Network
		in.Template, in.TemplateDigest = template.SplitRecorded(meta.Template)
	}
	return in
}

// A snapshot's states (SnapshotInfo.State).
const (
	SnapshotSealing = snapkeep.Sealing
	SnapshotReady   = snapkeep.Ready
)

// newKeep is the manager's snapshot keep (internal/sandbox/snapkeep): it
// audits each seal that ends (snapshot.seal, by the system, with the
// digest; a failed one with its error).
func newKeep(m *Manager) *snapkeep.Keep {
	return snapkeep.New(snapkeep.Config{
		Store: m.cfg.Snapshots, Templates: m.cfg.Templates, Budget: m.cfg.SnapshotBudget, DiskBudget: m.cfg.DiskBudget, MaxImage: m.cfg.Max.DiskBytes,
		DataDir: m.cfg.DataDir, Log: m.log,
		DiskRefusal: m.guard.Refusal,
		Images: func() int64 {
			images, _, _ := m.DiskGuard()
			return images
		},
		HibernatesIn: m.hibernatedOn,
		Overlay: func(lower, upper *os.File, base uint32) (*os.File, error) {
			return forkOverlay(lower, upper, base)
		},
		Workspaces: func() []string {
			var dirs []string
			for _, s := range m.All() {
				dirs = append(dirs, s.workspaceDir())
			}
			return dirs
		},
		Sealed: func(man *snapshot.Manifest, err error) {
			e := Event{Actor: "system", Action: "snapshot.seal", Sandbox: man.Sandbox, Verdict: "completed",
				Detail: map[string]any{"snapshot": man.ID, "owner": man.Owner, "digest": man.Digest, "bytes": man.Bytes}}
			if err != nil {
				e.Verdict, e.Detail["error"] = "error", fault.Public(err)
			}
			m.audit(context.Background(), e)
		},
	})
}

// snapshotOf returns snapshot id for c; any other is not found.
func (m *Manager) snapshotOf(c Caller, id string) (*snapshot.Manifest, error) {
	return m.snaps.Of(c.KeyID, c.Admin, id)
}

// SnapshotAudit adds to an audit record what it says of snapshot id's
// digest (snapkeep.Keep.Audit).
func (m *Manager) SnapshotAudit(out map[string]any, key, id string) { m.snaps.Audit(out, key, id) }

// Snapshot captures sandbox id's writable state as a new snapshot of the
// sandbox's owner.
func (m *Manager) Snapshot(ctx context.Context, c Caller, id, name string) (SnapshotInfo, error) {
	if len(name) > 128 {
		return SnapshotInfo{}, fault.InvalidField("name", "name longer than 128 characters")
	}
	s, err := m.Lookup(ctx, c, id)
	if err != nil {
		return SnapshotInfo{}, err
	}
	man, err := m.snapshot(ctx, s, name)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return infoOf(man), nil
}

func (m *Manager) snapshot(ctx context.Context, s *Sandbox, name string) (*snapshot.Manifest, error) {
	if err := m.snaps.Room(s.rec.Owner, s.diskUsage().UsedBytes+s.lowerBytes(), true); err != nil {
		return nil, err
	}
	st := m.cfg.Snapshots
	if name == "" {
		name = s.rec.Name + "-" + time.Now().UTC().Format("20060102T150405Z")
	}
	var man *snapshot.Manifest
	err := s.capture(ctx, func(img *os.File, size int64) error {
		meta, err := json.Marshal(snapMeta{Limits: s.rec.Spec.Limits, Network: s.rec.Spec.Network, Template: s.rec.Spec.Template,
			Browser: s.rec.Spec.Browser, HostBase: hostBase(s.rec.Slot)})
		if err != nil {
			return err
		}
		man, err = st.Capture(ctx, img, size, snapshot.Info{Name: name, Owner: s.rec.Owner, Sandbox: s.rec.ID, Meta: meta})
		return err
	})
	if err != nil {
		return nil, err
	}
	return man, nil
}

// snapshotUsage is what the snapshots and the forks' lower layers hold on
// the disk (the disk guard counts it with the images).
func (m *Manager) snapshotUsage() int64 { return m.snaps.Usage() }

// snapshotTemplates are the digests of the templates the snapshots were
// taken on (hibernated sandboxes' included).
func (m *Manager) snapshotTemplates() []string { return m.snaps.Templates() }

// ListSnapshots returns the caller's snapshots (an admin's: all).
func (m *Manager) ListSnapshots(c Caller) ([]SnapshotInfo, error) {
	all, err := m.snaps.List(c.KeyID, c.Admin)
	if err != nil {
		return nil, err
	}
	out := make([]SnapshotInfo, 0, len(all))
	for i := range all {
		out = append(out, infoOf(&all[i]))
	}
	return out, nil
}

// GetSnapshot returns one of the caller's snapshots.
func (m *Manager) GetSnapshot(c Caller, id string) (SnapshotInfo, error) {
	man, err := m.snapshotOf(c, id)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return infoOf(man), nil
}

// DeleteSnapshot removes one of the caller's snapshots; sandboxes made
// from it keep their own images (a layered fork, the snapshot's lower
// layer: forklower_linux.go).
func (m *Manager) DeleteSnapshot(ctx context.Context, c Caller, id string) (SnapshotInfo, error) {
	man, err := m.snaps.Delete(ctx, c.KeyID, c.Admin, id)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return infoOf(man), nil
}

// hibernatedOn tells whether a listed sandbox hibernates in snapshot id.
func (m *Manager) hibernatedOn(id string) bool {
	for _, s := range m.All() {
		s.mu.Lock()
		r := s.rec.Restore
		s.mu.Unlock()
		if r != nil && r.Hibernated && r.Snapshot == id {
			return true
		}
	}
	return false
}

// fromSnapshot makes spec a restore of its snapshot for c: the snapshot's
// template, network and limits where spec sets none; its disk is the
// image's size (a different one is refused). It returns the restore to
// record.
func (m *Manager) fromSnapshot(c Caller, spec *Spec) (*Restore, error) {
	man, err := m.snapshotOf(c, spec.Snapshot)
	if err != nil {
		return nil, err
	}
	if man.Hibernation {
		// A hibernated sandbox's own state, even to an admin: its resume
		// moves the parked image back, a restore would take it away.
		return nil, snapkeep.ErrNoSnapshot
	}
	var meta snapMeta
	if err := json.Unmarshal(man.Meta, &meta); err != nil {
		return nil, fmt.Errorf("snapshot %s settings: %w", man.ID, err)
	}
	if spec.Template != "" {
		return nil, fault.InvalidField("template", "a sandbox made from a snapshot runs on the snapshot's template; give no template")
	}
	if d := spec.Limits.DiskBytes; d != 0 && d != man.ImageSize {
		return nil, fault.InvalidField("limits.disk", fmt.Sprintf("a sandbox made from this snapshot has its image's size, %s", diskbudget.IBytes(man.ImageSize)))
	}
	if name, d := template.SplitRecorded(meta.Template); d != "" {
		t, err := m.snaps.Template(c.KeyID, c.Admin, man, name, d)
		if err != nil {
			return nil, err
		}
		PinTemplate(spec, t)
	}
	l := &spec.Limits
	l.DiskBytes = man.ImageSize
	for _, f := range []struct{ v, from *int64 }{
		{&l.MemoryBytes, &meta.Limits.MemoryBytes}, {&l.CPUMilli, &meta.Limits.CPUMilli}, {&l.Pids, &meta.Limits.Pids},
	} {
		if *f.v == 0 {
			*f.v = *f.from
		}
	}
	if l.CPUTime == 0 {
		l.CPUTime = meta.Limits.CPUTime
	}
	if spec.Network.Mode == "" {
		spec.Network = meta.Network
	}
	spec.Browser = spec.Browser || meta.Browser
	return &Restore{Snapshot: man.ID, FromBase: meta.HostBase}, nil
}

// restoreImage makes the sandbox's image from its pending restore, unless
// an earlier start did. Callers hold s.mu.
func (s *Sandbox) restoreImage(ctx context.Context, img string) error {
	if _, err := os.Lstat(img); err == nil {
		return nil
	}
	if _, err := s.m.snaps.Store(); err != nil {
		return err
	}
	if s.rec.Restore.Hibernated {
		if err := s.m.stillHere(ctx, s.rec.ID); err != nil {
			return err
		}
	}
	return s.m.snaps.RestoreImage(ctx, s.rec.Restore.Snapshot, img)
}

// Hibernate parks sandbox id's image in the snapshot store under its own
// id and frees it: its processes end, its memory and cgroups go, its image
// leaves the workspace.
func (m *Manager) Hibernate(ctx context.Context, c Caller, id string) (Info, error) {
	s, err := m.Lookup(ctx, c, id)
	if err != nil {
		return Info{}, err
	}
	if s.diskBytes() <= 0 {
		return Info{}, fault.New(fault.Unsupported, "a sandbox without a workspace image (no disk quota) cannot hibernate")
	}
	s.mu.Lock()
	switch {
	case s.state == Hibernated:
		s.mu.Unlock()
		return s.Info(), nil
	case s.hibernating:
		s.mu.Unlock()
		return Info{}, fault.New(fault.Conflict, "sandbox is hibernating already")
	}
	s.hibernating = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.hibernating = false
		s.mu.Unlock()
	}()
	// Its image moves into the store (a rename on one file system):
	// it needs room in the key's budget, not on the disk.
	if err := m.snaps.Room(s.rec.Owner, s.diskUsage().UsedBytes+s.lowerBytes(), false); err != nil {
		return Info{}, err
	}
	m.beforeStop(s, "hibernate")
	s.shutdown()
	// A fork's layers become one image of its own first (forklower_linux.go).
	if err := s.unlayer(ctx); err != nil {
		return Info{}, err
	}
	// The image is parked whole once its file system is unmounted and
	// its loop device gone (the image is then clean and nothing holds it).
	s.releaseVolume()
	img := s.imagePath()
	fi, err := os.Stat(img)
	if err != nil {
		return Info{}, fault.New(fault.Conflict, "the sandbox has no workspace image yet")
	}
	if err := volume.WaitDetached(img); err != nil {
		// Stopped, its workspace whole: the next use starts it.
		return Info{}, err
	}
	in := snapshot.Info{Name: s.rec.Name + "-hibernation", Owner: s.rec.Owner, Sandbox: s.rec.ID, Hibernation: true}
	if err := m.snaps.Park(in, img, fi.Size(), func(id string) error {
		s.mu.Lock()
		prev := s.rec.Restore
		s.rec.Restore = &Restore{Snapshot: id, FromBase: hostBase(s.rec.Slot), Hibernated: true}
		rec := s.rec
		s.mu.Unlock()
		if err := m.records.PutSandbox(ctx, rec); err != nil {
			s.mu.Lock()
			s.rec.Restore = prev
			s.mu.Unlock()
			return fmt.Errorf("save sandbox: %w", err)
		}
		return nil
	}); err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	s.state = Hibernated
	s.mu.Unlock()
	return s.Info(), nil
}

// resumed finishes a hibernated sandbox's first start: its record loses
// the restore and the hibernation snapshot goes.
func (m *Manager) resumed(ctx context.Context, s *Sandbox, r *Restore) {
	s.mu.Lock()
	rec := s.rec
	s.mu.Unlock()
	if err := m.records.PutSandbox(ctx, rec); err != nil {
		m.log.Error("save resumed sandbox", "id", rec.ID, "err", err)
		return
	}
	m.snaps.Drop(r.Snapshot)
}
