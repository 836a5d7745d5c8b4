package api

import (
	"context"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// SnapshotRoutes mounts the snapshot routes: take, list, inspect, delete,
// fork, hibernate, export and import. Each calls its dispatched tool.
func (s *Server) SnapshotRoutes(d *dispatch.Dispatcher) {
	reg := func(op huma.Operation) huma.Operation {
		op.Tags = []string{"snapshots"}
		op.Security = Security
		return op
	}
	huma.Register(s.api, reg(huma.Operation{OperationID: "create-snapshot", Method: http.MethodPost, Path: "/v1/sandboxes/{id}/snapshots",
		Summary: "Snapshot a sandbox: its workspace, installed packages (a template sandbox's writable layer), template, limits and network", DefaultStatus: http.StatusCreated,
		Description: "The sandbox's processes are frozen for the copy and thawed after it. Processes are not captured (memory: true is refused; SECURITY.md says why). " +
			"The snapshot belongs to the sandbox's owner, counts against its SANDBOX_SNAPSHOT_BUDGET and the server's SANDBOX_DISK_BUDGET, and outlives the sandbox."}),
		func(ctx context.Context, in *SnapshotCreateInput) (*SnapshotOutput, error) {
			out, err := call(ctx, d, sandbox.ToolSnapshotCreate, sandbox.SnapshotCreateArgs{ID: in.ID, Name: in.Body.Name, Memory: in.Body.Memory})
			if err != nil {
				return nil, err
			}
			return &SnapshotOutput{Body: OK(out)}, nil
		})
	huma.Register(s.api, reg(huma.Operation{OperationID: "list-snapshots", Method: http.MethodGet, Path: "/v1/snapshots",
		Summary: "List the caller's snapshots (admins and viewers: all)"}),
		func(ctx context.Context, _ *struct{}) (*SnapshotListOutput, error) {
			out, err := call(ctx, d, sandbox.ToolSnapshotList, sandbox.NoArgs{})
			if err != nil {
				return nil, err
			}
			if out == nil {
				out = []sandbox.SnapshotInfo{}
			}
			return &SnapshotListOutput{Body: OK(out)}, nil
		})
	huma.Register(s.api, reg(huma.Operation{OperationID: "get-snapshot", Method: http.MethodGet, Path: "/v1/snapshots/{snapshot}",
		Summary: "Get a snapshot"}),
		func(ctx context.Context, in *SnapshotRefInput) (*SnapshotOutput, error) {
			out, err := call(ctx, d, sandbox.ToolSnapshotGet, sandbox.SnapshotRef{Snapshot: in.Snapshot})
			if err != nil {
				return nil, err
			}
			return &SnapshotOutput{Body: OK(out)}, nil
		})
	huma.Register(s.api, reg(huma.Operation{OperationID: "delete-snapshot", Method: http.MethodDelete, Path: "/v1/snapshots/{snapshot}",
		Summary: "Delete a snapshot (sandboxes made from it keep their files)"}),
		func(ctx context.Context, in *SnapshotRefInput) (*SnapshotOutput, error) {
			out, err := call(ctx, d, sandbox.ToolSnapshotDelete, sandbox.SnapshotRef{Snapshot: in.Snapshot})
			if err != nil {
				return nil, err
			}
			o := &SnapshotOutput{Body: OK(out)}
			o.Body.Message = "snapshot deleted"
			return o, nil
		})
	huma.Register(s.api, reg(huma.Operation{OperationID: "fork-snapshot", Method: http.MethodPost, Path: "/v1/snapshots/{snapshot}/fork",
		Summary: "Make count sandboxes from a snapshot at once (all or none; each is a sandbox.create the policy, HALT and the audit see)", DefaultStatus: http.StatusCreated}),
		func(ctx context.Context, in *ForkInput) (*ForkOutput, error) {
			out, err := call(ctx, d, sandbox.ToolSnapshotFork, sandbox.ForkArgs{Snapshot: in.Snapshot, Count: in.Body.Count, Name: in.Body.Name})
			if err != nil {
				return nil, err
			}
			return &ForkOutput{Body: OK(out)}, nil
		})
	huma.Register(s.api, reg(huma.Operation{OperationID: "hibernate-sandbox", Method: http.MethodPost, Path: "/v1/sandboxes/{id}/hibernate",
		Summary: "Free a sandbox: its processes end, its memory and cgroups are released and its image moves into the snapshot store (state hibernated); any later call or resume restores it under the same id"}),
		func(ctx context.Context, in *SandboxIDInput) (*SandboxOutput, error) {
			out, err := call(ctx, d, sandbox.ToolHibernate, sandbox.IDArgs{ID: in.ID})
			if err != nil {
				return nil, err
			}
			return &SandboxOutput{Body: OK(out)}, nil
		})

	s.router.Get("/v1/snapshots/{snapshot}/export", func(w http.ResponseWriter, r *http.Request) {
		e, err := call(dispatch.WithStreaming(r.Context()), d, sandbox.ToolSnapshotExport, sandbox.SnapshotRef{Snapshot: chi.URLParam(r, "snapshot")})
		if err != nil {
			WriteError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("Content-Disposition", `attachment; filename="`+e.ID+`.tar"`)
		w.Header().Set("X-Snapshot-Digest", e.Digest)
		w.WriteHeader(http.StatusOK)
		if err := e.Write(r.Context(), w); err != nil {
			// The status is sent: the cut stream (no tar end) tells.
			s.log.Warn("snapshot export cut short", "snapshot", e.ID, "err", err)
		}
	})
	s.AllowLargeBodies("/v1/snapshots/import")
	s.router.Post("/v1/snapshots/import", func(w http.ResponseWriter, r *http.Request) {
		out, err := call(dispatch.WithStreaming(r.Context()), d, sandbox.ToolSnapshotImport, sandbox.ImportArgs{Name: r.URL.Query().Get("name"), Body: r.Body})
		if err != nil {
			WriteError(w, r, err)
			return
		}
		WriteData(w, http.StatusCreated, out)
	})
	doc := s.api.OpenAPI()
	snapSchema := doc.Components.Schemas.Schema(reflect.TypeFor[Envelope[sandbox.SnapshotInfo]](), true, "SnapshotResponse")
	doc.AddOperation(&huma.Operation{OperationID: "export-snapshot", Method: http.MethodGet, Path: "/v1/snapshots/{snapshot}/export", Tags: []string{"snapshots"}, Security: Security,
		Summary:    "Export a snapshot: a tar stream of manifest.json (settings, chunk digests, a signature by this server) and its chunks",
		Parameters: []*huma.Param{{Name: "snapshot", In: "path", Required: true, Schema: StringSchema}},
		Responses: map[string]*huma.Response{"200": {Description: "the export (X-Snapshot-Digest: its digest)",
			Content: map[string]*huma.MediaType{"application/x-tar": {Schema: BinarySchema}}}}})
	doc.AddOperation(&huma.Operation{OperationID: "import-snapshot", Method: http.MethodPost, Path: "/v1/snapshots/import", Tags: []string{"snapshots"}, Security: Security,
		Summary: "Import a snapshot export as a new snapshot of the caller's",
		Description: "Every digest and the export's signature are checked before anything is kept: an export altered in any byte, or signed by another server " +
			"(SANDBOX_CLUSTER_SECRET signs a cluster's), is refused (400).",
		Parameters:  QueryParams("name"),
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/x-tar": {Schema: BinarySchema}, "application/octet-stream": {Schema: BinarySchema}}},
		Responses:   map[string]*huma.Response{"201": {Description: "the imported snapshot", Content: map[string]*huma.MediaType{"application/json": {Schema: snapSchema}}}}})
}

// SnapshotCreateInput is POST /v1/sandboxes/{id}/snapshots.
type SnapshotCreateInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		Name   string `json:"name,omitempty" maxLength:"128"`
		Memory bool   `json:"memory,omitempty" doc:"capture running processes too: refused (memory capture is off; SECURITY.md)"`
	}
}

// SnapshotRefInput names a snapshot in a path.
type SnapshotRefInput struct {
	Snapshot string `path:"snapshot" maxLength:"64"`
}

// ForkInput is POST /v1/snapshots/{snapshot}/fork.
type ForkInput struct {
	Snapshot string `path:"snapshot" maxLength:"64"`
	Body     struct {
		Count int    `json:"count" minimum:"1" maximum:"32" doc:"how many sandboxes to make"`
		Name  string `json:"name,omitempty" maxLength:"120" doc:"name prefix: the forks are name-1, name-2, …"`
	}
}

// SnapshotOutput is one snapshot.
type SnapshotOutput struct {
	Body Envelope[sandbox.SnapshotInfo]
}

// SnapshotListOutput is a list of snapshots.
type SnapshotListOutput struct {
	Body Envelope[[]sandbox.SnapshotInfo]
}

// ForkOutput is a fork's sandboxes.
type ForkOutput struct {
	Body Envelope[sandbox.ForkResult]
}
