package sandboxtools

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// errMemory refuses memory capture (SECURITY.md: what CRIU cannot restore
// of a sandbox's isolation).
var errMemory = fault.New(fault.Unsupported, "memory capture is off: CRIU cannot restore a sandbox's landlock domain (the kernel cannot read one back) nor its init's channel to the server, so a restored sandbox would run with less isolation (SECURITY.md); snapshot without memory")

// ownerCaller is c as the owner of what it names: its own key, or an admin
// (viewers observe, they do not take a tenant's data).
func ownerCaller(c auth.Caller) sandbox.Caller {
	return sandbox.Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}
}

func snapSummary(in sandbox.SnapshotInfo) map[string]any {
	out := map[string]any{"snapshot": in.ID, "digest": in.Digest, "bytes": in.Bytes, "sandbox": in.Sandbox, "state": in.State}
	if in.State == sandbox.SnapshotSealing {
		out["digest_pending"] = true // snapshot.seal names it
	}
	return out
}

func snapshotTools(m *sandbox.Manager) []dispatch.Tool {
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
	refTarget := func(a sandbox.SnapshotRef) dispatch.Target { return dispatch.Target{Target: a.Snapshot} }
	return []dispatch.Tool{
		dispatch.Define(sandbox.ToolSnapshotCreate, manage("Snapshot a sandbox's files, installed packages and settings (processes are not kept)", guard.Medium),
			func(ctx context.Context, c auth.Caller, a sandbox.SnapshotCreateArgs) (sandbox.SnapshotInfo, error) {
				if a.Memory {
					return sandbox.SnapshotInfo{}, errMemory
				}
				return m.Snapshot(ctx, ownerCaller(c), a.ID, a.Name)
			}, dispatch.Hooks[sandbox.SnapshotCreateArgs, sandbox.SnapshotInfo]{
				Describe: func(a sandbox.SnapshotCreateArgs) dispatch.Target {
					return dispatch.Target{Target: a.Name, Sandbox: a.ID, Detail: map[string]any{"memory": a.Memory}}
				},
				Summarize: func(_ sandbox.SnapshotCreateArgs, in sandbox.SnapshotInfo) map[string]any { return snapSummary(in) },
			}),
		dispatch.Define(sandbox.ToolSnapshotList, listSpec, func(_ context.Context, c auth.Caller, _ sandbox.NoArgs) ([]sandbox.SnapshotInfo, error) {
			return m.ListSnapshots(sandbox.CallerOf(c))
		}, dispatch.Hooks[sandbox.NoArgs, []sandbox.SnapshotInfo]{}),
		dispatch.Define(sandbox.ToolSnapshotGet, getSpec, func(_ context.Context, c auth.Caller, a sandbox.SnapshotRef) (sandbox.SnapshotInfo, error) {
			return m.GetSnapshot(sandbox.CallerOf(c), a.Snapshot)
		}, dispatch.Hooks[sandbox.SnapshotRef, sandbox.SnapshotInfo]{Describe: refTarget}),
		dispatch.Define(sandbox.ToolSnapshotDelete, manage("Delete a snapshot (sandboxes made from it keep their files)", guard.Medium),
			func(ctx context.Context, c auth.Caller, a sandbox.SnapshotRef) (sandbox.SnapshotInfo, error) {
				return m.DeleteSnapshot(ctx, ownerCaller(c), a.Snapshot)
			}, dispatch.Hooks[sandbox.SnapshotRef, sandbox.SnapshotInfo]{Describe: refTarget,
				Summarize: func(_ sandbox.SnapshotRef, in sandbox.SnapshotInfo) map[string]any { return snapSummary(in) }}),
		dispatch.Define(sandbox.ToolSnapshotFork, manage("Make count sandboxes from a snapshot at once, each a dispatched sandbox.create (all or none)", guard.Medium),
			m.Fork,
			dispatch.Hooks[sandbox.ForkArgs, sandbox.ForkResult]{
				Describe: func(a sandbox.ForkArgs) dispatch.Target {
					return dispatch.Target{Target: a.Snapshot, Detail: map[string]any{"count": a.Count}}
				},
				Summarize: func(_ sandbox.ForkArgs, r sandbox.ForkResult) map[string]any {
					ids := make([]string, len(r.Sandboxes))
					for i, in := range r.Sandboxes {
						ids[i] = in.ID
					}
					out := map[string]any{"snapshot": r.Snapshot, "sandboxes": ids}
					if r.SnapshotState == sandbox.SnapshotSealing {
						out["digest_pending"] = true // snapshot.seal names it
					} else if r.Digest != "" {
						out["digest"] = r.Digest
					}
					return out
				},
			}),
		dispatch.Define(sandbox.ToolSnapshotExport, exportSpec, func(ctx context.Context, c auth.Caller, a sandbox.SnapshotRef) (*sandbox.Export, error) {
			if !dispatch.Streaming(ctx) {
				return nil, fault.New(fault.Invalid, sandbox.ToolSnapshotExport.Name()+" streams its data and is only available over its HTTP route")
			}
			return m.ExportSnapshot(ctx, ownerCaller(c), a.Snapshot)
		}, dispatch.Hooks[sandbox.SnapshotRef, *sandbox.Export]{Describe: refTarget,
			Summarize: func(_ sandbox.SnapshotRef, e *sandbox.Export) map[string]any {
				if e == nil {
					return nil
				}
				return snapSummary(e.SnapshotInfo)
			}}),
		dispatch.Define(sandbox.ToolSnapshotImport, importSpec, func(ctx context.Context, c auth.Caller, a sandbox.ImportArgs) (sandbox.SnapshotInfo, error) {
			if !dispatch.Streaming(ctx) || a.Body == nil {
				return sandbox.SnapshotInfo{}, fault.New(fault.Invalid, sandbox.ToolSnapshotImport.Name()+" reads an export from its HTTP route's body")
			}
			return m.ImportSnapshot(ctx, ownerCaller(c), a.Name, a.Body)
		}, dispatch.Hooks[sandbox.ImportArgs, sandbox.SnapshotInfo]{
			Describe:  func(a sandbox.ImportArgs) dispatch.Target { return dispatch.Target{Target: a.Name} },
			Summarize: func(_ sandbox.ImportArgs, in sandbox.SnapshotInfo) map[string]any { return snapSummary(in) },
		}),
		byID(sandbox.ToolHibernate, "Free a sandbox: its processes and memory go, its image moves into the snapshot store; any later use or resume restores it under its id", guard.Medium, nil,
			func(ctx context.Context, c auth.Caller, id string) (sandbox.Info, error) {
				return m.Hibernate(ctx, ownerCaller(c), id)
			}),
	}
}
