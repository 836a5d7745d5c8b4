package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
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
// made from the snapshot at its next start.
type Restore struct {
	Snapshot string `json:"snapshot"`
	// FromBase is the host id base the image's files are owned under
	// (the source sandbox's); the start maps them to the sandbox's own.
	FromBase uint32 `json:"from_base"`
	// Hibernated: the sandbox's own hibernation; its snapshot goes once
	// the sandbox runs again.
	Hibernated bool `json:"hibernated,omitempty"`
}

// Hibernated: the sandbox's state is in a snapshot, nothing of it runs and
// its image is gone from the node; the next start restores it.
const Hibernated State = "hibernated"

// snapMeta is the settings a snapshot keeps (snapshot.Content.Meta).
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
	SnapshotSealing = snapshot.StateSealing
	SnapshotReady   = "ready"
)

// startSeals has the manager audit each seal that ends (snapshot.seal,
// by the system, with the digest; a failed one is audited with its error
// and tried again after a backoff) and seals again the snapshots a
// previous run left sealing (internal/snapshot's seal.go).
func (m *Manager) startSeals() {
	st := m.cfg.Snapshots
	if st == nil {
		return
	}
	st.OnSealed(func(man *snapshot.Manifest, err error) {
		e := Event{Actor: "system", Action: "snapshot.seal", Sandbox: man.Sandbox, Verdict: "completed",
			Detail: map[string]any{"snapshot": man.ID, "owner": man.Owner, "digest": man.Digest, "bytes": man.Bytes}}
		if err != nil {
			// The record says what a client may read (as dispatch's
			// records do); the cause, with its host paths, is logged.
			e.Verdict, e.Detail["error"] = "error", fault.Public(err)
			m.log.Error("seal snapshot; it is tried again after a backoff", "snapshot", man.ID, "err", err)
		}
		m.audit(context.Background(), e)
	})
	sealing, removed := st.Recover()
	if len(sealing)+len(removed) > 0 {
		m.log.Info("snapshots left sealing by a previous run", "sealing", sealing, "removed_incomplete", removed)
	}
}

// sealed returns man once its digest exists, waiting for its seal (bounded,
// and no longer than ctx).
func (m *Manager) sealed(ctx context.Context, man *snapshot.Manifest) (*snapshot.Manifest, error) {
	if !man.Sealing() {
		return man, nil
	}
	st, err := m.snapStore()
	if err != nil {
		return nil, err
	}
	out, err := st.WaitSealed(ctx, man)
	if errors.Is(err, snapshot.ErrNotFound) {
		return nil, errNoSnapshot
	}
	return out, err
}

var errNoSnapshots = fault.New(fault.Unavailable, "this server keeps no snapshots")

func (m *Manager) snapStore() (*snapshot.Store, error) {
	if m.cfg.Snapshots == nil {
		return nil, errNoSnapshots
	}
	return m.cfg.Snapshots, nil
}

// errNoSnapshot is a snapshot the caller may not see or that is gone.
var errNoSnapshot = fault.Wrap(fault.NotFound, snapshot.ErrNotFound, "snapshot not found")

// snapshotOf returns snapshot id for c; any other is not found.
func (m *Manager) snapshotOf(c Caller, id string) (*snapshot.Manifest, error) {
	st, err := m.snapStore()
	if err != nil {
		return nil, err
	}
	man, err := st.Get(c.KeyID, c.Admin, id)
	if errors.Is(err, snapshot.ErrNotFound) || (err == nil && man.Hibernation && !c.Admin) {
		return nil, errNoSnapshot
	}
	return man, err
}

// snapshotSeal is snapshot id's state as a sandbox or fork made from it
// reports it: its digest once it is sealed (state ready), or no digest
// and state sealing while its seal runs — a fork made then holds exactly
// what the digest will cover (the seal hashes the clone the fork was
// cloned from); state "" once the snapshot is gone.
func (m *Manager) snapshotSeal(id string) (digest, state string) {
	if st := m.cfg.Snapshots; st != nil {
		if man, err := st.Get("", true, id); err == nil {
			if man.Sealing() {
				return "", SnapshotSealing
			}
			return man.Digest, SnapshotReady
		}
	}
	return "", ""
}

// SnapshotAudit adds to an audit record what it says of snapshot id's
// digest: the digest (key), or key_pending while the snapshot seals (its
// snapshot.seal record names the digest) — never an empty digest.
func (m *Manager) SnapshotAudit(out map[string]any, key, id string) {
	switch d, state := m.snapshotSeal(id); state {
	case SnapshotReady:
		out[key] = d
	case SnapshotSealing:
		out[key+"_pending"] = true
	}
}

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
	st, err := m.snapStore()
	if err != nil {
		return nil, err
	}
	if err := m.snapshotRoom(st, s.rec.Owner, s.diskUsage().UsedBytes+s.lowerBytes(), true); err != nil {
		return nil, err
	}
	if name == "" {
		name = s.rec.Name + "-" + time.Now().UTC().Format("20060102T150405Z")
	}
	var man *snapshot.Manifest
	err = s.capture(ctx, func(img *os.File, size int64) error {
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

// snapshotRoom refuses a snapshot that could hold need bytes when the
// owner's snapshots or (disk: it adds bytes on the disk) the server's disk
// have no room for it.
func (m *Manager) snapshotRoom(st *snapshot.Store, owner string, need int64, disk bool) error {
	if disk {
		if err := m.guard.Refusal(); err != nil {
			return err
		}
	}
	if b := m.cfg.SnapshotBudget; b > 0 {
		if used := st.Usage(owner, false); used+need > b {
			return fault.Errorf(fault.Conflict, "this key's snapshots hold %s of its %s (SANDBOX_SNAPSHOT_BUDGET) and this one may need %s: delete snapshots first",
				diskbudget.IBytes(used), diskbudget.IBytes(b), diskbudget.IBytes(need))
		}
	}
	if b := m.cfg.DiskBudget; b > 0 && disk {
		images, _, _ := m.DiskGuard() // workspaces, templates and snapshots
		if images+need > b {
			return fault.Errorf(fault.Conflict, "the server's disk budget cannot hold this snapshot: %s of %s in use, %s needed (SANDBOX_DISK_BUDGET)",
				diskbudget.IBytes(images), diskbudget.IBytes(b), diskbudget.IBytes(need))
		}
	}
	return nil
}

// SnapshotUsage is what the snapshots hold on the disk (the disk guard
// counts it with the images).
func (m *Manager) snapshotUsage() int64 {
	if m.cfg.Snapshots == nil {
		return 0
	}
	return m.cfg.Snapshots.Usage("", true) + m.lowerUsage()
}

// snapshotTemplates are the digests of the templates the snapshots were
// taken on (hibernated sandboxes' included).
func (m *Manager) snapshotTemplates() []string {
	st := m.cfg.Snapshots
	if st == nil {
		return nil
	}
	all, err := st.List("", true, true)
	if err != nil {
		m.log.Error("list snapshots for the template collector", "err", err)
		return nil
	}
	var out []string
	for _, man := range all {
		var meta snapMeta
		if json.Unmarshal(man.Meta, &meta) == nil {
			if _, d := template.SplitRecorded(meta.Template); d != "" {
				out = append(out, d)
			}
		}
	}
	return out
}

// ListSnapshots returns the caller's snapshots (an admin's: all).
func (m *Manager) ListSnapshots(c Caller) ([]SnapshotInfo, error) {
	st, err := m.snapStore()
	if err != nil {
		return nil, err
	}
	all, err := st.List(c.KeyID, c.Admin, false)
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
	man, err := m.snapshotOf(c, id)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if m.hibernatedOn(id) {
		return SnapshotInfo{}, fault.New(fault.Conflict, "a hibernated sandbox's snapshot goes with the sandbox: resume or delete the sandbox")
	}
	st, _ := m.snapStore()
	if _, err := st.Delete(ctx, c.KeyID, c.Admin, man.ID); err != nil {
		return SnapshotInfo{}, err
	}
	// Its forks keep its lower layer; one no fork uses goes now.
	m.collectLowers()
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
		return nil, errNoSnapshot
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
		if err := m.snapshotTemplate(c, man, spec, name, d); err != nil {
			return nil, err
		}
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

// snapshotTemplate pins spec to the template the snapshot was taken on, by
// digest, whatever its name says now (the snapshots keep it in the store:
// TemplatesInUse). One the caller cannot name any more (its name removed)
// is used only for a snapshot taken here, of a sandbox that ran on it: an
// imported snapshot never opens another key's template.
func (m *Manager) snapshotTemplate(c Caller, man *snapshot.Manifest, spec *Spec, name, digest string) error {
	st := m.cfg.Templates
	if st == nil {
		return fault.New(fault.Unavailable, "this server keeps no templates; the snapshot's template cannot be used")
	}
	if t, err := st.Resolve(template.Caller{KeyID: c.KeyID, Admin: c.Admin}, digest); err == nil {
		PinTemplate(spec, t)
		return nil
	}
	tm := st.Manifest(digest)
	if tm == nil || man.Imported {
		return fault.New(fault.NotFound, "the snapshot's template is not in this server's store for this key")
	}
	r, _ := template.ParseRef("template", name)
	PinTemplate(spec, template.Template{Name: r.Name, Tag: r.Tag, Digest: digest, Manifest: *tm})
	return nil
}

// restoreImage makes the sandbox's image from its pending restore, unless
// an earlier start did. Callers hold s.mu.
func (s *Sandbox) restoreImage(ctx context.Context, img string) error {
	if _, err := os.Lstat(img); err == nil {
		return nil
	}
	st, err := s.m.snapStore()
	if err != nil {
		return err
	}
	if s.rec.Restore.Hibernated {
		if err := s.m.stillHere(ctx, s.rec.ID); err != nil {
			return err
		}
	}
	man, err := st.Get("", true, s.rec.Restore.Snapshot)
	if errors.Is(err, snapshot.ErrNotFound) {
		return fault.New(fault.Unavailable, "the sandbox's snapshot is gone")
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	return st.Restore(ctx, man, img)
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
	st, err := m.snapStore()
	if err != nil {
		return Info{}, err
	}
	// Its image moves into the store (a rename on one file system):
	// it needs room in the key's budget, not on the disk.
	if err := m.snapshotRoom(st, s.rec.Owner, s.diskUsage().UsedBytes+s.lowerBytes(), false); err != nil {
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
	man, err := st.PrepareParked(snapshot.Info{Name: s.rec.Name + "-hibernation", Owner: s.rec.Owner, Sandbox: s.rec.ID, Hibernation: true}, fi.Size())
	if err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	prev := s.rec.Restore
	s.rec.Restore = &Restore{Snapshot: man.ID, FromBase: hostBase(s.rec.Slot), Hibernated: true}
	rec := s.rec
	s.mu.Unlock()
	if err := m.records.PutSandbox(ctx, rec); err != nil {
		s.mu.Lock()
		s.rec.Restore = prev
		s.mu.Unlock()
		m.dropSnapshot(man.ID)
		return Info{}, fmt.Errorf("save sandbox: %w", err)
	}
	// Recorded: a crash from here on leaves the image here (the resume
	// finds it) or in the store under the recorded snapshot.
	if err := st.Park(man, img); err != nil {
		m.log.Error("park hibernated image; it stays in the workspace", "id", s.rec.ID, "err", err)
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
	m.dropSnapshot(r.Snapshot)
}

// dropSnapshot removes a snapshot the server made for itself.
func (m *Manager) dropSnapshot(id string) {
	if st := m.cfg.Snapshots; st != nil {
		if _, err := st.Delete(context.Background(), "", true, id); err != nil && !errors.Is(err, snapshot.ErrNotFound) {
			m.log.Error("remove hibernation snapshot", "snapshot", id, "err", err)
		}
	}
}
