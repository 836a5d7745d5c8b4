package transfer

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names (the audit actions).
var (
	ToolUpload         = dispatch.Ref[UploadArgs, UploadResult]("file.upload")
	ToolDownload       = dispatch.Ref[DownloadArgs, *Download]("file.download")
	ToolExtract        = dispatch.Ref[ExtractArgs, *ExtractResult]("file.extract")
	ToolArchive        = dispatch.Ref[ArchiveArgs, *Packed]("file.archive")
	ToolArtifactCreate = dispatch.Ref[ArtifactCreateArgs, *ArtifactUpload]("artifact.create")
	ToolArtifactWrite  = dispatch.Ref[ArtifactWriteArgs, *ArtifactUpload]("artifact.write")
	ToolArtifactStatus = dispatch.Ref[ArtifactRef, *ArtifactUpload]("artifact.status")
	ToolArtifactList   = dispatch.Ref[ArtifactRef, *ArtifactList]("artifact.list")
	ToolArtifactRead   = dispatch.Ref[ArtifactRef, *Download]("artifact.read")
	ToolArtifactDelete = dispatch.Ref[ArtifactRef, Deleted]("artifact.delete")
)

var viewers = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}

// Tools are the transfer tools, for the dispatcher. Those that move a
// body (upload, download, archive, artifact write and read) are declared
// Streams and refuse callers that did not mark their context with
// dispatch.WithStreaming (MCP, custom tools): they would have no body to
// read and nobody to close what Run returns.
func Tools(s *Service) []dispatch.Tool {
	spec := func(desc string, risk guard.Risk, streams bool) dispatch.Spec {
		return dispatch.Spec{Description: desc, Risk: risk, Category: ratelimit.File, Streams: streams}
	}
	paths := func(risk guard.Risk, p ...string) dispatch.Assessment {
		return dispatch.Assessment{Risk: risk, Paths: p}
	}
	refTarget := func(x ArtifactRef) dispatch.Target {
		return dispatch.Target{Target: x.ID + x.Name, Sandbox: x.Sandbox}
	}
	refSpec := func(desc string, risk guard.Risk, streams bool, roles []auth.Role) dispatch.Spec {
		sp := spec(desc, risk, streams)
		sp.Roles = roles
		return sp
	}
	return []dispatch.Tool{
		dispatch.Define(ToolUpload, spec("Upload a file into a sandbox (streamed; HTTP multipart only), optionally extracting an archive", guard.Medium, true),
			streamed(ToolUpload.Name(), s.Upload),
			dispatch.Hooks[UploadArgs, UploadResult]{
				Assess: func(a UploadArgs) dispatch.Assessment { return paths(guard.Medium, a.writes()) },
				Describe: func(a UploadArgs) dispatch.Target {
					d := map[string]any{"extract": a.Extract}
					if a.Staged != "" {
						d["staged"] = a.Staged
					}
					return dispatch.Target{Target: a.writes(), Sandbox: a.Sandbox, Detail: d}
				},
				Summarize: func(_ UploadArgs, u UploadResult) map[string]any {
					m := map[string]any{"path": u.FilePath, "bytes": u.FileSize, "sandbox_id": u.SandboxID}
					if x := u.Extracted; x != nil {
						m["files"], m["dirs"], m["extracted_bytes"], m["stripped"] = x.Files, x.Dirs, x.Bytes, x.Stripped
					}
					return m
				},
			}),
		dispatch.Define(ToolDownload, spec("Open a file in a sandbox for a streamed (Range) download", guard.Safe, true),
			streamed(ToolDownload.Name(), s.Download),
			dispatch.Hooks[DownloadArgs, *Download]{
				Assess:   func(a DownloadArgs) dispatch.Assessment { return paths(guard.Safe, a.Path) },
				Describe: func(a DownloadArgs) dispatch.Target { return dispatch.Target{Target: a.Path, Sandbox: a.Sandbox} },
				Summarize: func(_ DownloadArgs, d *Download) map[string]any {
					if d == nil {
						return nil
					}
					return map[string]any{"bytes": d.Size, "sandbox_id": d.SandboxID}
				},
			}),
		dispatch.Define(ToolExtract, spec("Extract an archive (zip, tar, tar.gz, tar.zst) inside a sandbox, all or nothing", guard.Medium, false),
			s.Extract,
			dispatch.Hooks[ExtractArgs, *ExtractResult]{
				Assess: func(a ExtractArgs) dispatch.Assessment { return paths(guard.Medium, a.Path, a.Dest) },
				Describe: func(a ExtractArgs) dispatch.Target {
					return dispatch.Target{Target: a.Path, Sandbox: a.Sandbox, Detail: map[string]any{"dest": a.Dest}}
				},
				Summarize: func(_ ExtractArgs, x *ExtractResult) map[string]any {
					if x == nil {
						return nil
					}
					return map[string]any{"dest": x.Dest, "files": x.Files, "dirs": x.Dirs, "bytes": x.Bytes, "stripped": x.Stripped, "sandbox_id": x.SandboxID}
				},
			}),
		dispatch.Define(ToolArchive, spec("Stream a directory of a sandbox out as tar.gz or zip", guard.Safe, true),
			streamed(ToolArchive.Name(), s.Archive),
			dispatch.Hooks[ArchiveArgs, *Packed]{
				Assess: func(a ArchiveArgs) dispatch.Assessment {
					as := paths(guard.Safe, a.Path)
					as.Trees = as.Paths // packs the whole directory
					return as
				},
				Describe: func(a ArchiveArgs) dispatch.Target {
					return dispatch.Target{Target: a.Path, Sandbox: a.Sandbox, Detail: map[string]any{"format": a.Format}}
				},
			}),
		dispatch.Define(ToolArtifactCreate, spec("Start a resumable artifact upload (returns the upload id)", guard.Medium, false),
			s.CreateArtifact,
			dispatch.Hooks[ArtifactCreateArgs, *ArtifactUpload]{
				Describe: func(a ArtifactCreateArgs) dispatch.Target {
					return dispatch.Target{Target: a.Name, Sandbox: a.Sandbox, Detail: map[string]any{"length": a.Length}}
				},
				Summarize: func(_ ArtifactCreateArgs, u *ArtifactUpload) map[string]any {
					if u == nil {
						return nil
					}
					return map[string]any{"upload": u.ID, "sandbox_id": u.SandboxID}
				},
			}),
		dispatch.Define(ToolArtifactWrite, spec("Append bytes to an artifact upload at its offset (HTTP PATCH only)", guard.Medium, true),
			streamed(ToolArtifactWrite.Name(), s.WriteArtifact),
			dispatch.Hooks[ArtifactWriteArgs, *ArtifactUpload]{
				Describe: func(a ArtifactWriteArgs) dispatch.Target {
					return dispatch.Target{Target: a.ID, Sandbox: a.Sandbox, Detail: map[string]any{"offset": a.Offset}}
				},
				Summarize: func(a ArtifactWriteArgs, u *ArtifactUpload) map[string]any {
					if u == nil {
						return nil
					}
					return map[string]any{"bytes": u.Offset - a.Offset, "offset": u.Offset, "complete": u.Complete, "sandbox_id": u.SandboxID}
				},
			}),
		dispatch.Define(ToolArtifactStatus, refSpec("An artifact upload's offset and length", guard.Safe, false, nil),
			s.ArtifactStatus, dispatch.Hooks[ArtifactRef, *ArtifactUpload]{Describe: refTarget}),
		dispatch.Define(ToolArtifactList, refSpec("List artifacts (with sizes) and uploads in progress", guard.Safe, false, viewers),
			s.ListArtifacts, dispatch.Hooks[ArtifactRef, *ArtifactList]{Describe: refTarget}),
		dispatch.Define(ToolArtifactRead, refSpec("Open a completed artifact for a (Range) download", guard.Safe, true, nil),
			streamed(ToolArtifactRead.Name(), s.ReadArtifact), dispatch.Hooks[ArtifactRef, *Download]{Describe: refTarget}),
		dispatch.Define(ToolArtifactDelete, refSpec("Delete an artifact or an upload in progress", guard.Medium, false, nil),
			s.DeleteArtifact, dispatch.Hooks[ArtifactRef, Deleted]{Describe: refTarget}),
	}
}

// streamed refuses a call whose caller does not stream (see Tools).
func streamed[A, R any](tool string, run func(context.Context, auth.Caller, A) (R, error)) func(context.Context, auth.Caller, A) (R, error) {
	return func(ctx context.Context, c auth.Caller, a A) (R, error) {
		if err := requireStreaming(ctx, tool); err != nil {
			var zero R
			return zero, err
		}
		return run(ctx, c, a)
	}
}
