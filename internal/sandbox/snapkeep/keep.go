// Package snapkeep is the sandbox manager's keeping of snapshots: the
// snapshot store (internal/snapshot) as the sandboxes use it — whose
// snapshot a caller may see, the room a key's snapshots and the server's
// disk have for one more, what the snapshots hold on the disk, the
// templates they were taken on, the seals' audit and recovery, a
// hibernation's parked image, an import's bounds, the restore of a
// sandbox's image — and the lower layers of layered forks
// (internal/sandbox/forklower) with their reference counts and their
// collection. It runs in the server, below internal/sandbox, which holds
// one Keep per manager and keeps what belongs to a sandbox's life: the
// state change of a hibernation, the start's mount of a fork's layers,
// the freeze of a capture.
package snapkeep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
	"github.com/sandhold/sandhold/internal/sandbox/forklower"
	"github.com/sandhold/sandhold/internal/snapshot"
	"github.com/sandhold/sandhold/internal/template"
)

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

// Head is what the keep reads of a snapshot's settings
// (snapshot.Content.Meta, which the sandbox writes whole with its limits
// and network): the template it was taken on (name:tag@digest) and the
// host id base its files are owned under.
type Head struct {
	Template string `json:"template,omitempty"`
	HostBase uint32 `json:"host_base"`
}

// HeadOf reads man's Head.
func HeadOf(man *snapshot.Manifest) (Head, error) {
	var h Head
	if err := json.Unmarshal(man.Meta, &h); err != nil {
		return Head{}, fmt.Errorf("snapshot %s settings: %w", man.ID, err)
	}
	return h, nil
}

// A snapshot's states (the sandbox's SnapshotInfo.State).
const (
	Sealing = snapshot.StateSealing
	Ready   = "ready"
)

// ErrNoOverlay: the host could not mount a fork's overlay (no id-mapped
// overlay, ptrace refused); the sandbox then gives the fork a copy.
var ErrNoOverlay = errors.New("fork overlay unavailable")

// Layers is a layered sandbox's workspace: the overlay (WS) of its
// snapshot's lower layer and the upper layer in its own image.
type Layers struct {
	Snapshot string
	WS       *os.File
}

// Config is what the keep needs of the manager.
type Config struct {
	// Store keeps the snapshots; nil: the server keeps none.
	Store *snapshot.Store
	// Templates keeps the templates the snapshots were taken on; nil:
	// the server keeps none.
	Templates *template.Store
	// Budget bounds what one key's snapshots hold
	// (SANDBOX_SNAPSHOT_BUDGET); 0: no bound.
	Budget int64
	// DiskBudget bounds what the server's images hold on the disk
	// (SANDBOX_DISK_BUDGET); 0: no bound.
	DiskBudget int64
	// MaxImage is the largest image an import may hold (the server's
	// maximum disk).
	MaxImage int64
	// DataDir is the server's data dir: the lower layers are in it.
	DataDir string
	Log     *slog.Logger

	// DiskRefusal is the disk guard's refusal of anything that adds
	// bytes to the disk (nil while there is room).
	DiskRefusal func() error
	// Images is what the workspaces, templates and snapshots hold on the
	// disk (the disk budget's count).
	Images func() int64
	// HibernatesIn tells whether a listed sandbox hibernates in
	// snapshot id.
	HibernatesIn func(id string) bool
	// Workspaces are the listed sandboxes' workspace dirs (a layered
	// one's marker names its lower).
	Workspaces func() []string
	// Overlay mounts a fork's overlay of lower and the upper layer in
	// upper, id-mapped to the host id base base (volume.MountForkOverlay).
	Overlay func(lower, upper *os.File, base uint32) (*os.File, error)
	// Sealed audits a seal that ended: err is nil, or what failed (the
	// keep logs it; the seal is tried again after a backoff).
	Sealed func(man *snapshot.Manifest, err error)
}

// Keep is a manager's snapshots and the lower layers of its forks.
type Keep struct {
	cfg Config
	// lowers are the snapshots' lower layers of forks (lowers_linux.go).
	lowers forklower.Lowers
}

// New returns the keep of cfg; StartSeals starts its seals' audit.
func New(cfg Config) *Keep { return &Keep{cfg: cfg} }

// ErrNoSnapshots: the server keeps no snapshots.
var ErrNoSnapshots = fault.New(fault.Unavailable, "this server keeps no snapshots")

// ErrNoSnapshot is a snapshot the caller may not see or that is gone.
var ErrNoSnapshot = fault.Wrap(fault.NotFound, snapshot.ErrNotFound, "snapshot not found")

// Store is the snapshot store, or ErrNoSnapshots.
func (k *Keep) Store() (*snapshot.Store, error) {
	if k.cfg.Store == nil {
		return nil, ErrNoSnapshots
	}
	return k.cfg.Store, nil
}

// StartSeals has Config.Sealed see each seal that ends (snapshot.seal,
// by the system, with the digest; a failed one is audited with its error
// and tried again after a backoff) and seals again the snapshots a
// previous run left sealing (internal/snapshot's seal.go).
func (k *Keep) StartSeals() {
	st := k.cfg.Store
	if st == nil {
		return
	}
	st.OnSealed(func(man *snapshot.Manifest, err error) {
		if err != nil {
			// The record says what a client may read (as dispatch's
			// records do); the cause, with its host paths, is logged.
			k.cfg.Log.Error("seal snapshot; it is tried again after a backoff", "snapshot", man.ID, "err", err)
		}
		k.cfg.Sealed(man, err)
	})
	sealing, removed := st.Recover()
	if len(sealing)+len(removed) > 0 {
		k.cfg.Log.Info("snapshots left sealing by a previous run", "sealing", sealing, "removed_incomplete", removed)
	}
}

// Sealed returns man once its digest exists, waiting for its seal
// (bounded, and no longer than ctx).
func (k *Keep) Sealed(ctx context.Context, man *snapshot.Manifest) (*snapshot.Manifest, error) {
	if !man.Sealing() {
		return man, nil
	}
	st, err := k.Store()
	if err != nil {
		return nil, err
	}
	out, err := st.WaitSealed(ctx, man)
	if errors.Is(err, snapshot.ErrNotFound) {
		return nil, ErrNoSnapshot
	}
	return out, err
}

// Of returns snapshot id for key (an admin: any key's); any other is not
// found, as is a hibernation to anyone but an admin.
func (k *Keep) Of(key string, admin bool, id string) (*snapshot.Manifest, error) {
	st, err := k.Store()
	if err != nil {
		return nil, err
	}
	man, err := st.Get(key, admin, id)
	if errors.Is(err, snapshot.ErrNotFound) || (err == nil && man.Hibernation && !admin) {
		return nil, ErrNoSnapshot
	}
	return man, err
}

// Seal is snapshot id's state as a sandbox or fork made from it reports
// it: its digest once it is sealed (state ready), or no digest and state
// sealing while its seal runs — a fork made then holds exactly what the
// digest will cover (the seal hashes the clone the fork was cloned from);
// state "" once the snapshot is gone.
func (k *Keep) Seal(id string) (digest, state string) {
	if st := k.cfg.Store; st != nil {
		if man, err := st.Get("", true, id); err == nil {
			if man.Sealing() {
				return "", Sealing
			}
			return man.Digest, Ready
		}
	}
	return "", ""
}

// Audit adds to an audit record what it says of snapshot id's digest:
// the digest (key), or key_pending while the snapshot seals (its
// snapshot.seal record names the digest) — never an empty digest.
func (k *Keep) Audit(out map[string]any, key, id string) {
	switch d, state := k.Seal(id); state {
	case Ready:
		out[key] = d
	case Sealing:
		out[key+"_pending"] = true
	}
}

// Room refuses a snapshot that could hold need bytes when the owner's
// snapshots or (disk: it adds bytes on the disk) the server's disk have
// no room for it.
func (k *Keep) Room(owner string, need int64, disk bool) error {
	st, err := k.Store()
	if err != nil {
		return err
	}
	if disk {
		if err := k.cfg.DiskRefusal(); err != nil {
			return err
		}
	}
	if b := k.cfg.Budget; b > 0 {
		if used := st.Usage(owner, false); used+need > b {
			return fault.Errorf(fault.Conflict, "this key's snapshots hold %s of its %s (SANDBOX_SNAPSHOT_BUDGET) and this one may need %s: delete snapshots first",
				diskbudget.IBytes(used), diskbudget.IBytes(b), diskbudget.IBytes(need))
		}
	}
	if b := k.cfg.DiskBudget; b > 0 && disk {
		images := k.cfg.Images() // workspaces, templates and snapshots
		if images+need > b {
			return fault.Errorf(fault.Conflict, "the server's disk budget cannot hold this snapshot: %s of %s in use, %s needed (SANDBOX_DISK_BUDGET)",
				diskbudget.IBytes(images), diskbudget.IBytes(b), diskbudget.IBytes(need))
		}
	}
	return nil
}

// Usage is what the snapshots and the lower layers hold on the disk (the
// disk guard counts it with the images).
func (k *Keep) Usage() int64 {
	if k.cfg.Store == nil {
		return 0
	}
	return k.cfg.Store.Usage("", true) + k.LowerUsage()
}

// Templates are the digests of the templates the snapshots were taken on
// (hibernated sandboxes' included).
func (k *Keep) Templates() []string {
	st := k.cfg.Store
	if st == nil {
		return nil
	}
	all, err := st.List("", true, true)
	if err != nil {
		k.cfg.Log.Error("list snapshots for the template collector", "err", err)
		return nil
	}
	var out []string
	for i := range all {
		if h, err := HeadOf(&all[i]); err == nil {
			if _, d := template.SplitRecorded(h.Template); d != "" {
				out = append(out, d)
			}
		}
	}
	return out
}

// Template is the template snapshot man was taken on (name, digest), by
// digest, whatever its name says now (the snapshots keep it in the store:
// TemplatesInUse), for key (admin: an admin's). One the caller cannot
// name any more (its name removed) is used only for a snapshot taken
// here, of a sandbox that ran on it: an imported snapshot never opens
// another key's template.
func (k *Keep) Template(key string, admin bool, man *snapshot.Manifest, name, digest string) (template.Template, error) {
	st := k.cfg.Templates
	if st == nil {
		return template.Template{}, fault.New(fault.Unavailable, "this server keeps no templates; the snapshot's template cannot be used")
	}
	if t, err := st.Resolve(template.Caller{KeyID: key, Admin: admin}, digest); err == nil {
		return t, nil
	}
	tm := st.Manifest(digest)
	if tm == nil || man.Imported {
		return template.Template{}, fault.New(fault.NotFound, "the snapshot's template is not in this server's store for this key")
	}
	r, _ := template.ParseRef("template", name)
	return template.Template{Name: r.Name, Tag: r.Tag, Digest: digest, Manifest: *tm}, nil
}

// List returns key's snapshots (an admin's: all).
func (k *Keep) List(key string, admin bool) ([]snapshot.Manifest, error) {
	st, err := k.Store()
	if err != nil {
		return nil, err
	}
	return st.List(key, admin, false)
}

// Delete removes snapshot id of key's (an admin: any); sandboxes made
// from it keep their own images (a layered fork, the snapshot's lower
// layer). A hibernated sandbox's snapshot goes with the sandbox only.
func (k *Keep) Delete(ctx context.Context, key string, admin bool, id string) (*snapshot.Manifest, error) {
	man, err := k.Of(key, admin, id)
	if err != nil {
		return nil, err
	}
	if k.cfg.HibernatesIn(id) {
		return nil, fault.New(fault.Conflict, "a hibernated sandbox's snapshot goes with the sandbox: resume or delete the sandbox")
	}
	if _, err := k.cfg.Store.Delete(ctx, key, admin, man.ID); err != nil {
		return nil, err
	}
	// Its forks keep its lower layer; one no fork uses goes now.
	k.CollectLowers()
	return man, nil
}

// Drop removes a snapshot the server made for itself (a hibernation's).
func (k *Keep) Drop(id string) {
	if st := k.cfg.Store; st != nil {
		if _, err := st.Delete(context.Background(), "", true, id); err != nil && !errors.Is(err, snapshot.ErrNotFound) {
			k.cfg.Log.Error("remove hibernation snapshot", "snapshot", id, "err", err)
		}
	}
}

// RestoreImage makes the image img from snapshot id (a sandbox's pending
// restore).
func (k *Keep) RestoreImage(ctx context.Context, id, img string) error {
	st, err := k.Store()
	if err != nil {
		return err
	}
	man, err := st.Get("", true, id)
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

// Park parks a stopped sandbox's image img (size bytes) whole in the
// store as a hibernation (a rename on one file system, a copy to a store
// elsewhere), after record has made the sandbox's record name the
// hibernation's snapshot: a crash from then on leaves the image in the
// workspace (the resume finds it) or in the store under the recorded
// snapshot. A failed record drops the snapshot; a failed move leaves the
// image in the workspace.
func (k *Keep) Park(in snapshot.Info, img string, size int64, record func(id string) error) error {
	st, err := k.Store()
	if err != nil {
		return err
	}
	man, err := st.PrepareParked(in, size)
	if err != nil {
		return err
	}
	if err := record(man.ID); err != nil {
		k.Drop(man.ID)
		return err
	}
	if err := st.Park(man, img); err != nil {
		k.cfg.Log.Error("park hibernated image; it stays in the workspace", "id", in.Sandbox, "err", err)
	}
	return nil
}

// Holds tells whether this node's store holds snapshot id's image (a dead
// node's hibernated sandbox can be taken over only then).
func (k *Keep) Holds(id string) bool {
	st := k.cfg.Store
	if st == nil {
		return false
	}
	man, err := st.Get("", true, id)
	return err == nil && st.Holds(man)
}

// Import keeps an export (body) as a new snapshot of key's named name,
// within key's snapshot budget and the server's disk budget.
func (k *Keep) Import(ctx context.Context, key, name string, body io.Reader) (*snapshot.Manifest, error) {
	if err := k.Room(key, 0, true); err != nil {
		return nil, err
	}
	st := k.cfg.Store
	room := int64(0)
	if b := k.cfg.Budget; b > 0 {
		room = max(b-st.Usage(key, false), 1)
	}
	if b := k.cfg.DiskBudget; b > 0 {
		images := k.cfg.Images()
		if left := max(b-images, 1); room == 0 || left < room {
			room = left
		}
	}
	return st.Import(ctx, body, snapshot.ImportOptions{Owner: key, Name: name, MaxImage: k.cfg.MaxImage, MaxBytes: room})
}
