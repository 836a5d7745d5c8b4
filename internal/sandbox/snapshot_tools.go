package sandbox

import (
	"context"
	"io"
	"strconv"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/snapkeep"
	"github.com/sandhold/sandhold/internal/snapshot"
)

// Tool names of snapshots.
var (
	ToolSnapshotCreate = dispatch.Ref[SnapshotCreateArgs, SnapshotInfo]("snapshot.create")
	ToolSnapshotList   = dispatch.Ref[NoArgs, []SnapshotInfo]("snapshot.list")
	ToolSnapshotGet    = dispatch.Ref[SnapshotRef, SnapshotInfo]("snapshot.get")
	ToolSnapshotDelete = dispatch.Ref[SnapshotRef, SnapshotInfo]("snapshot.delete")
	ToolSnapshotFork   = dispatch.Ref[ForkArgs, ForkResult]("snapshot.fork")
	ToolSnapshotExport = dispatch.Ref[SnapshotRef, *Export]("snapshot.export")
	ToolSnapshotImport = dispatch.Ref[ImportArgs, SnapshotInfo]("snapshot.import")
	ToolHibernate      = dispatch.Ref[IDArgs, Info]("sandbox.hibernate")
)

// Caps of the snapshot tools, with their reasons.
const (
	// MaxForks bounds one fork: each is a whole sandbox (a cold start
	// and a copy of the image).
	MaxForks = 32
	// forkParallel is how many forks start at once: the copies and init
	// starts share the host's cores and disk.
	forkParallel = 4
)

// SnapshotCreateArgs is snapshot.create's arguments.
type SnapshotCreateArgs struct {
	ID     string `json:"id" required:"true" doc:"the sandbox to snapshot"`
	Name   string `json:"name,omitempty" maxLength:"128"`
	Memory bool   `json:"memory,omitempty" doc:"capture running processes too (CRIU): refused, see SECURITY.md"`
}

// SnapshotRef names a snapshot.
type SnapshotRef struct {
	Snapshot string `json:"snapshot" required:"true"`
}

// ForkArgs is snapshot.fork's arguments.
type ForkArgs struct {
	Snapshot string `json:"snapshot" required:"true"`
	Count    int    `json:"count" minimum:"1" maximum:"32" doc:"how many sandboxes to make (1–32)"`
	Name     string `json:"name,omitempty" maxLength:"120" doc:"name prefix; each fork is name-N"`
}

// ForkResult is snapshot.fork's answer. Digest is the snapshot's once it
// is sealed; while it seals there is none, and SnapshotState says so.
type ForkResult struct {
	Snapshot      string `json:"snapshot"`
	SnapshotState string `json:"snapshot_state" enum:"sealing,ready" doc:"the snapshot's state when the forks were made: ready — digest is its digest; sealing — its digest is still being computed and this answer has none (GET /v1/snapshots/{snapshot} gives it once ready, and the snapshot.seal audit record names it); the forks hold exactly what that digest covers"`
	Digest        string `json:"digest,omitempty" doc:"sha256 of the snapshot's content; absent while snapshot_state is sealing"`
	Sandboxes     []Info `json:"sandboxes"`
	// ProcessesRestored is false: the forks start fresh inits.
	ProcessesRestored bool `json:"processes_restored" doc:"false: files and packages are restored, processes are not (memory capture is off)"`
}

// ImportArgs is snapshot.import's arguments; Body is the export (a tar
// stream), over the HTTP route only.
type ImportArgs struct {
	Name string    `json:"name,omitempty" maxLength:"128"`
	Body io.Reader `json:"-"`
}

// Export is snapshot.export's answer: Write sends the tar stream.
type Export struct {
	SnapshotInfo
	st  *snapshot.Store
	man *snapshot.Manifest
}

// Write streams the export to w.
func (e *Export) Write(ctx context.Context, w io.Writer) error { return e.st.Export(ctx, e.man, w) }

// ExportSnapshot is snapshot.export's run: the export of c's snapshot id
// (its owner's, or any for an admin), to be streamed. The export carries
// the digest: a sealing snapshot's seal is waited for first.
func (m *Manager) ExportSnapshot(ctx context.Context, c Caller, id string) (*Export, error) {
	man, err := m.snapshotOf(c, id)
	if err != nil {
		return nil, err
	}
	if man, err = m.snaps.Sealed(ctx, man); err != nil {
		return nil, err
	}
	return &Export{SnapshotInfo: infoOf(man), st: m.cfg.Snapshots, man: man}, nil
}

// ImportSnapshot keeps an export as a new snapshot of c's, within c's
// snapshot budget and the server's disk budget.
func (m *Manager) ImportSnapshot(ctx context.Context, c Caller, name string, body io.Reader) (SnapshotInfo, error) {
	man, err := m.snaps.Import(ctx, c.KeyID, name, body)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return infoOf(man), nil
}

// forkMade sees each fork made, before the next one may start: a test's
// window into a fork under way.
var forkMade = func(int) {}

// Fork makes a.Count sandboxes from a snapshot, each by a dispatched
// sandbox.create (so HALT, the policy, the manage limit, the key's
// sandboxes cap and the audit see every one); the first refusal or failure
// stops the fork and deletes the forks already made.
func (m *Manager) Fork(ctx context.Context, c auth.Caller, a ForkArgs) (ForkResult, error) {
	if a.Count < 1 || a.Count > MaxForks {
		return ForkResult{}, fault.InvalidField("count", "count must be between 1 and 32")
	}
	man, err := m.snapshotOf(Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, a.Snapshot)
	if err != nil {
		return ForkResult{}, err
	}
	d, _, ok := dispatch.Within(ctx)
	if !ok {
		return ForkResult{}, fault.New(fault.Invalid, "a fork is made by a dispatched call")
	}
	out := make([]Info, a.Count)
	first := snapkeep.MakeForks(ctx, a.Count, forkParallel, func(ctx context.Context, i int) error {
		spec := Spec{Snapshot: man.ID}
		if a.Name != "" {
			spec.Name = a.Name + "-" + strconv.Itoa(i+1)
		}
		var err error
		if out[i], err = ToolCreate.Call(ctx, d, c, spec); err != nil {
			return err
		}
		forkMade(i)
		return nil
	})
	if first != nil {
		for _, in := range out {
			if in.ID != "" {
				if err := m.Delete(context.WithoutCancel(ctx), Caller{Admin: true}, in.ID); err != nil {
					m.log.Error("delete a fork after a failed fork", "id", in.ID, "err", err)
				}
			}
		}
		return ForkResult{}, first
	}
	// The digest as it is now: a seal that ended during the fork gives it.
	res := ForkResult{Snapshot: man.ID, Sandboxes: out}
	if res.Digest, res.SnapshotState = m.snaps.Seal(man.ID); res.SnapshotState == "" {
		// Deleted meanwhile: as it was when the fork began.
		res.Digest, res.SnapshotState = man.Digest, infoOf(man).State
	}
	return res, nil
}
