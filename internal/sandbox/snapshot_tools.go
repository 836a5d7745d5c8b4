package sandbox

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
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

// errMemory refuses memory capture (SECURITY.md: what CRIU cannot restore
// of a sandbox's isolation).
var errMemory = fault.New(fault.Unsupported, "memory capture is off: CRIU cannot restore a sandbox's landlock domain (the kernel cannot read one back) nor its init's channel to the server, so a restored sandbox would run with less isolation (SECURITY.md); snapshot without memory")

// ownerCaller is c as the owner of what it names: its own key, or an admin
// (viewers observe, they do not take a tenant's data).
func ownerCaller(c auth.Caller) Caller { return Caller{KeyID: c.KeyID, Admin: c.IsAdmin()} }

func snapSummary(in SnapshotInfo) map[string]any {
	out := map[string]any{"snapshot": in.ID, "digest": in.Digest, "bytes": in.Bytes, "sandbox": in.Sandbox, "state": in.State}
	if in.State == SnapshotSealing {
		out["digest_pending"] = true // snapshot.seal names it
	}
	return out
}

func snapshotTools(m *Manager) []dispatch.Tool {
	manage := func(desc string, risk guard.Risk) dispatch.Spec {
		return dispatch.Spec{Description: desc, Risk: risk, Category: ratelimit.Manage}
	}
	read := dispatch.Spec{Risk: guard.Safe, Category: ratelimit.Read, Roles: viewers}
	listSpec, getSpec := read, read
	listSpec.Description = "List snapshots"
	getSpec.Description = "Get a snapshot"
	exportSpec := manage("Export a snapshot as a signed tar stream (HTTP only)", guard.Safe)
	exportSpec.Streams = true
	importSpec := manage("Import a snapshot export made by this server (HTTP only); its digests and signature are checked", guard.Medium)
	importSpec.Streams = true
	refTarget := func(a SnapshotRef) dispatch.Target { return dispatch.Target{Target: a.Snapshot} }
	return []dispatch.Tool{
		dispatch.Define(ToolSnapshotCreate, manage("Snapshot a sandbox's files, installed packages and settings (processes are not kept)", guard.Medium),
			func(ctx context.Context, c auth.Caller, a SnapshotCreateArgs) (SnapshotInfo, error) {
				if a.Memory {
					return SnapshotInfo{}, errMemory
				}
				return m.Snapshot(ctx, ownerCaller(c), a.ID, a.Name)
			}, dispatch.Hooks[SnapshotCreateArgs, SnapshotInfo]{
				Describe: func(a SnapshotCreateArgs) dispatch.Target {
					return dispatch.Target{Target: a.Name, Sandbox: a.ID, Detail: map[string]any{"memory": a.Memory}}
				},
				Summarize: func(_ SnapshotCreateArgs, in SnapshotInfo) map[string]any { return snapSummary(in) },
			}),
		dispatch.Define(ToolSnapshotList, listSpec, func(_ context.Context, c auth.Caller, _ NoArgs) ([]SnapshotInfo, error) {
			return m.ListSnapshots(CallerOf(c))
		}, dispatch.Hooks[NoArgs, []SnapshotInfo]{}),
		dispatch.Define(ToolSnapshotGet, getSpec, func(_ context.Context, c auth.Caller, a SnapshotRef) (SnapshotInfo, error) {
			return m.GetSnapshot(CallerOf(c), a.Snapshot)
		}, dispatch.Hooks[SnapshotRef, SnapshotInfo]{Describe: refTarget}),
		dispatch.Define(ToolSnapshotDelete, manage("Delete a snapshot (sandboxes made from it keep their files)", guard.Medium),
			func(ctx context.Context, c auth.Caller, a SnapshotRef) (SnapshotInfo, error) {
				return m.DeleteSnapshot(ctx, ownerCaller(c), a.Snapshot)
			}, dispatch.Hooks[SnapshotRef, SnapshotInfo]{Describe: refTarget,
				Summarize: func(_ SnapshotRef, in SnapshotInfo) map[string]any { return snapSummary(in) }}),
		dispatch.Define(ToolSnapshotFork, manage("Make count sandboxes from a snapshot at once, each a dispatched sandbox.create (all or none)", guard.Medium),
			func(ctx context.Context, c auth.Caller, a ForkArgs) (ForkResult, error) { return m.fork(ctx, c, a) },
			dispatch.Hooks[ForkArgs, ForkResult]{
				Describe: func(a ForkArgs) dispatch.Target {
					return dispatch.Target{Target: a.Snapshot, Detail: map[string]any{"count": a.Count}}
				},
				Summarize: func(_ ForkArgs, r ForkResult) map[string]any {
					ids := make([]string, len(r.Sandboxes))
					for i, in := range r.Sandboxes {
						ids[i] = in.ID
					}
					out := map[string]any{"snapshot": r.Snapshot, "sandboxes": ids}
					if r.SnapshotState == SnapshotSealing {
						out["digest_pending"] = true // snapshot.seal names it
					} else if r.Digest != "" {
						out["digest"] = r.Digest
					}
					return out
				},
			}),
		dispatch.Define(ToolSnapshotExport, exportSpec, func(ctx context.Context, c auth.Caller, a SnapshotRef) (*Export, error) {
			if !dispatch.Streaming(ctx) {
				return nil, fault.New(fault.Invalid, ToolSnapshotExport.Name()+" streams its data and is only available over its HTTP route")
			}
			man, err := m.snapshotOf(ownerCaller(c), a.Snapshot)
			if err != nil {
				return nil, err
			}
			// The export carries the digest: a sealing snapshot's first.
			if man, err = m.sealed(ctx, man); err != nil {
				return nil, err
			}
			return &Export{SnapshotInfo: infoOf(man), st: m.cfg.Snapshots, man: man}, nil
		}, dispatch.Hooks[SnapshotRef, *Export]{Describe: refTarget,
			Summarize: func(_ SnapshotRef, e *Export) map[string]any {
				if e == nil {
					return nil
				}
				return snapSummary(e.SnapshotInfo)
			}}),
		dispatch.Define(ToolSnapshotImport, importSpec, func(ctx context.Context, c auth.Caller, a ImportArgs) (SnapshotInfo, error) {
			if !dispatch.Streaming(ctx) || a.Body == nil {
				return SnapshotInfo{}, fault.New(fault.Invalid, ToolSnapshotImport.Name()+" reads an export from its HTTP route's body")
			}
			return m.ImportSnapshot(ctx, ownerCaller(c), a.Name, a.Body)
		}, dispatch.Hooks[ImportArgs, SnapshotInfo]{
			Describe:  func(a ImportArgs) dispatch.Target { return dispatch.Target{Target: a.Name} },
			Summarize: func(_ ImportArgs, in SnapshotInfo) map[string]any { return snapSummary(in) },
		}),
		byID(ToolHibernate, "Free a sandbox: its processes and memory go, its image moves into the snapshot store; any later use or resume restores it under its id", guard.Medium, nil,
			func(ctx context.Context, c auth.Caller, id string) (Info, error) {
				return m.Hibernate(ctx, ownerCaller(c), id)
			}),
	}
}

// ImportSnapshot keeps an export as a new snapshot of c's, within c's
// snapshot budget and the server's disk budget.
func (m *Manager) ImportSnapshot(ctx context.Context, c Caller, name string, body io.Reader) (SnapshotInfo, error) {
	st, err := m.snapStore()
	if err != nil {
		return SnapshotInfo{}, err
	}
	if err := m.snapshotRoom(st, c.KeyID, 0, true); err != nil {
		return SnapshotInfo{}, err
	}
	room := int64(0)
	if b := m.cfg.SnapshotBudget; b > 0 {
		room = max(b-st.Usage(c.KeyID, false), 1)
	}
	if b := m.cfg.DiskBudget; b > 0 {
		images, _, _ := m.DiskGuard()
		if left := max(b-images, 1); room == 0 || left < room {
			room = left
		}
	}
	man, err := st.Import(ctx, body, snapshot.ImportOptions{Owner: c.KeyID, Name: name, MaxImage: m.cfg.Max.DiskBytes, MaxBytes: room})
	if err != nil {
		return SnapshotInfo{}, err
	}
	return infoOf(man), nil
}

// forkMade sees each fork made, before the next one may start: a test's
// window into a fork under way.
var forkMade = func(int) {}

// fork makes a.Count sandboxes from a snapshot, each by a dispatched
// sandbox.create (so HALT, the policy, the manage limit, the key's
// sandboxes cap and the audit see every one); the first refusal or failure
// stops the fork and deletes the forks already made.
func (m *Manager) fork(ctx context.Context, c auth.Caller, a ForkArgs) (ForkResult, error) {
	if a.Count < 1 || a.Count > MaxForks {
		return ForkResult{}, fault.InvalidField("count", "count must be between 1 and 32")
	}
	man, err := m.snapshotOf(ownerCaller(c), a.Snapshot)
	if err != nil {
		return ForkResult{}, err
	}
	d, _, ok := dispatch.Within(ctx)
	if !ok {
		return ForkResult{}, fault.New(fault.Invalid, "a fork is made by a dispatched call")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]Info, a.Count)
	errs := make([]error, a.Count)
	sem := make(chan struct{}, forkParallel)
	var wg sync.WaitGroup
	for i := range a.Count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			spec := Spec{Snapshot: man.ID}
			if a.Name != "" {
				spec.Name = a.Name + "-" + strconv.Itoa(i+1)
			}
			out[i], errs[i] = ToolCreate.Call(ctx, d, c, spec)
			if errs[i] != nil {
				cancel() // the rest do not start
				return
			}
			forkMade(i)
		}()
	}
	wg.Wait()
	// The cause, not the cancellations it led to.
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
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
	if res.Digest, res.SnapshotState = m.snapshotSeal(man.ID); res.SnapshotState == "" {
		// Deleted meanwhile: as it was when the fork began.
		res.Digest, res.SnapshotState = man.Digest, infoOf(man).State
	}
	return res, nil
}
