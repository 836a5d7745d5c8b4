package transfer

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names (the audit actions).
const (
	ToolUpload         = "file.upload"
	ToolDownload       = "file.download"
	ToolExtract        = "file.extract"
	ToolArchive        = "file.archive"
	ToolArtifactCreate = "artifact.create"
	ToolArtifactWrite  = "artifact.write"
	ToolArtifactStatus = "artifact.status"
	ToolArtifactList   = "artifact.list"
	ToolArtifactRead   = "artifact.read"
	ToolArtifactDelete = "artifact.delete"
)

func decode[T any](raw json.RawMessage) (any, error) {
	var v T
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fault.InvalidField("arguments", "arguments do not match the tool's schema: "+err.Error())
	}
	return v, nil
}

// Schemas of the tools' JSON arguments (bodies travel over HTTP only).
var (
	pathSchema    = json.RawMessage(`{"type":"object","properties":{"sandbox":{"type":"string"},"path":{"type":"string"}},"required":["path"]}`)
	uploadSchema  = json.RawMessage(`{"type":"object","properties":{"sandbox":{"type":"string"},"path":{"type":"string"},"filename":{"type":"string"},"extract":{"type":"boolean"},"format":{"type":"string"}}}`)
	extractSchema = json.RawMessage(`{"type":"object","properties":{"sandbox":{"type":"string"},"path":{"type":"string"},"dest":{"type":"string"},"format":{"type":"string","enum":["zip","tar","tar.gz","tar.zst"]}},"required":["path"]}`)
	archiveSchema = json.RawMessage(`{"type":"object","properties":{"sandbox":{"type":"string"},"path":{"type":"string"},"format":{"type":"string","enum":["tar.gz","zip","tar","tar.zst"]}},"required":["path"]}`)
	createSchema  = json.RawMessage(`{"type":"object","properties":{"sandbox":{"type":"string"},"name":{"type":"string"},"length":{"type":"integer","minimum":0},"sha256":{"type":"string"}},"required":["name","length","sha256"]}`)
	writeSchema   = json.RawMessage(`{"type":"object","properties":{"sandbox":{"type":"string"},"id":{"type":"string"},"offset":{"type":"integer","minimum":0}},"required":["id","offset"]}`)
	refSchema     = json.RawMessage(`{"type":"object","properties":{"sandbox":{"type":"string"},"id":{"type":"string"},"name":{"type":"string"}}}`)
)

var viewers = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}

// Register adds the transfer tools to d.
func (s *Service) Register(d *dispatch.Dispatcher) {
	tool := func(t dispatch.Tool) {
		t.Category = ratelimit.File
		d.MustRegister(t)
	}
	paths := func(risk guard.Risk, p ...string) dispatch.Assessment {
		return dispatch.Assessment{Risk: risk, Paths: p}
	}
	tool(dispatch.Tool{
		Name: ToolUpload, Description: "Upload a file into a sandbox (streamed; HTTP multipart only), optionally extracting an archive",
		Risk: guard.Medium, InputSchema: uploadSchema, Decode: decode[UploadArgs],
		Assess: func(a any) dispatch.Assessment { return paths(guard.Medium, a.(UploadArgs).Path) },
		Describe: func(a any) dispatch.Target {
			u := a.(UploadArgs)
			return dispatch.Target{Target: u.Path, Sandbox: u.Sandbox, Detail: map[string]any{"extract": u.Extract}}
		},
		Summarize: func(_, r any) map[string]any {
			u := r.(UploadResult)
			m := map[string]any{"path": u.FilePath, "bytes": u.FileSize, "sandbox_id": u.SandboxID}
			if x := u.Extracted; x != nil {
				m["files"], m["dirs"], m["extracted_bytes"], m["stripped"] = x.Files, x.Dirs, x.Bytes, x.Stripped
			}
			return m
		},
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			if err := requireStreaming(ctx, ToolUpload); err != nil {
				return nil, err
			}
			return s.Upload(ctx, c, a.(UploadArgs))
		},
	})
	tool(dispatch.Tool{
		Name: ToolDownload, Description: "Open a file in a sandbox for a streamed (Range) download",
		Risk: guard.Safe, InputSchema: pathSchema, Decode: decode[DownloadArgs],
		Assess: func(a any) dispatch.Assessment { return paths(guard.Safe, a.(DownloadArgs).Path) },
		Describe: func(a any) dispatch.Target {
			d := a.(DownloadArgs)
			return dispatch.Target{Target: d.Path, Sandbox: d.Sandbox}
		},
		Summarize: func(_, r any) map[string]any {
			d := r.(*Download)
			return map[string]any{"bytes": d.Size, "sandbox_id": d.SandboxID}
		},
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			if err := requireStreaming(ctx, ToolDownload); err != nil {
				return nil, err
			}
			return s.Download(ctx, c, a.(DownloadArgs))
		},
	})
	tool(dispatch.Tool{
		Name: ToolExtract, Description: "Extract an archive (zip, tar, tar.gz, tar.zst) inside a sandbox, all or nothing",
		Risk: guard.Medium, InputSchema: extractSchema, Decode: decode[ExtractArgs],
		Assess: func(a any) dispatch.Assessment { x := a.(ExtractArgs); return paths(guard.Medium, x.Path, x.Dest) },
		Describe: func(a any) dispatch.Target {
			x := a.(ExtractArgs)
			return dispatch.Target{Target: x.Path, Sandbox: x.Sandbox, Detail: map[string]any{"dest": x.Dest}}
		},
		Summarize: func(_, r any) map[string]any {
			x := r.(*ExtractResult)
			return map[string]any{"dest": x.Dest, "files": x.Files, "dirs": x.Dirs, "bytes": x.Bytes, "stripped": x.Stripped, "sandbox_id": x.SandboxID}
		},
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.Extract(ctx, c, a.(ExtractArgs))
		},
	})
	tool(dispatch.Tool{
		Name: ToolArchive, Description: "Stream a directory of a sandbox out as tar.gz or zip",
		Risk: guard.Safe, InputSchema: archiveSchema, Decode: decode[ArchiveArgs],
		Assess: func(a any) dispatch.Assessment { return paths(guard.Safe, a.(ArchiveArgs).Path) },
		Describe: func(a any) dispatch.Target {
			x := a.(ArchiveArgs)
			return dispatch.Target{Target: x.Path, Sandbox: x.Sandbox, Detail: map[string]any{"format": x.Format}}
		},
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			if err := requireStreaming(ctx, ToolArchive); err != nil {
				return nil, err
			}
			return s.Archive(ctx, c, a.(ArchiveArgs))
		},
	})
	tool(dispatch.Tool{
		Name: ToolArtifactCreate, Description: "Start a resumable artifact upload (returns the upload id)",
		Risk: guard.Medium, InputSchema: createSchema, Decode: decode[ArtifactCreateArgs],
		Describe: func(a any) dispatch.Target {
			x := a.(ArtifactCreateArgs)
			return dispatch.Target{Target: x.Name, Sandbox: x.Sandbox, Detail: map[string]any{"length": x.Length}}
		},
		Summarize: func(_, r any) map[string]any {
			u := r.(*ArtifactUpload)
			return map[string]any{"upload": u.ID, "sandbox_id": u.SandboxID}
		},
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			return s.CreateArtifact(ctx, c, a.(ArtifactCreateArgs))
		},
	})
	tool(dispatch.Tool{
		Name: ToolArtifactWrite, Description: "Append bytes to an artifact upload at its offset (HTTP PATCH only)",
		Risk: guard.Medium, InputSchema: writeSchema, Decode: decode[ArtifactWriteArgs],
		Describe: func(a any) dispatch.Target {
			x := a.(ArtifactWriteArgs)
			return dispatch.Target{Target: x.ID, Sandbox: x.Sandbox, Detail: map[string]any{"offset": x.Offset}}
		},
		Summarize: func(a, r any) map[string]any {
			u := r.(*ArtifactUpload)
			return map[string]any{"bytes": u.Offset - a.(ArtifactWriteArgs).Offset, "offset": u.Offset, "complete": u.Complete, "sandbox_id": u.SandboxID}
		},
		Run: func(ctx context.Context, c auth.Caller, a any) (any, error) {
			if err := requireStreaming(ctx, ToolArtifactWrite); err != nil {
				return nil, err
			}
			return s.WriteArtifact(ctx, c, a.(ArtifactWriteArgs))
		},
	})
	ref := func(name, desc string, risk guard.Risk, roles []auth.Role, run func(context.Context, auth.Caller, ArtifactRef) (any, error)) {
		tool(dispatch.Tool{
			Name: name, Description: desc, Risk: risk, Roles: roles, InputSchema: refSchema, Decode: decode[ArtifactRef],
			Describe: func(a any) dispatch.Target {
				x := a.(ArtifactRef)
				return dispatch.Target{Target: x.ID + x.Name, Sandbox: x.Sandbox}
			},
			Run: func(ctx context.Context, c auth.Caller, a any) (any, error) { return run(ctx, c, a.(ArtifactRef)) },
		})
	}
	ref(ToolArtifactStatus, "An artifact upload's offset and length", guard.Safe, nil,
		func(ctx context.Context, c auth.Caller, a ArtifactRef) (any, error) {
			return s.ArtifactStatus(ctx, c, a)
		})
	ref(ToolArtifactList, "List artifacts (with sizes) and uploads in progress", guard.Safe, viewers,
		func(ctx context.Context, c auth.Caller, a ArtifactRef) (any, error) {
			return s.ListArtifacts(ctx, c, a)
		})
	ref(ToolArtifactRead, "Open a completed artifact for a (Range) download", guard.Safe, nil,
		func(ctx context.Context, c auth.Caller, a ArtifactRef) (any, error) {
			if err := requireStreaming(ctx, ToolArtifactRead); err != nil {
				return nil, err
			}
			return s.ReadArtifact(ctx, c, a)
		})
	ref(ToolArtifactDelete, "Delete an artifact or an upload in progress", guard.Medium, nil,
		func(ctx context.Context, c auth.Caller, a ArtifactRef) (any, error) {
			return s.DeleteArtifact(ctx, c, a)
		})
}
