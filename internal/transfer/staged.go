package transfer

import (
	"context"
	"errors"
	"path"
	"syscall"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Uploads whose path comes after the file.
//
// A multipart upload is streamed to its target as it arrives, so the
// target must be known before the file part: AIO's Python SDK sends the
// path field first, but its TypeScript SDK sends the file first. Writing
// such a file to the default place and answering success would put it
// somewhere the caller did not ask for; buffering it in the server would
// hold a body before the dispatcher has seen where it goes. So the edge
// makes it two calls of file.upload, each dispatched (HALT, role, policy
// on the path, rate limit, audit) before a byte lands where it names:
//
//   - Stage streams the file into the sandbox's staging area
//     (stagingDir/<id>, inside the workspace and its quota);
//   - Staged, once the form's path is read, moves that file to the path —
//     a rename, or a copy where the path is on another file system (/tmp)
//     — or unpacks it there with extract, and removes it in every case.
//
// A staged file whose second call was refused before it ran (a policy
// that denies the path, HALT) stays behind; the next staging in that
// sandbox removes those older than stagedMaxAge.

// Names and caps of the staging area with their reasons.
const (
	// stagingDir is the sandbox's staging area: hidden, in the quota.
	stagingDir = "/workspace/.sandhold-uploads"
	// stageIDLen is a stage id's length: 8 random bytes in hex.
	stageIDLen = 16
	// stagedMaxAge is when a staged file nobody committed is swept.
	stagedMaxAge = time.Hour
	// maxStagedSweep bounds the entries one sweep looks at.
	maxStagedSweep = 64
)

// NewStageID is a fresh stage id for UploadArgs.Stage.
func NewStageID() string { return randHex(stageIDLen / 2) }

// stagePath is the staged file of id, once id is checked.
func stagePath(field, id string) (string, error) {
	if len(id) != stageIDLen {
		return "", fault.InvalidField(field, field+" is not a stage id")
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fault.InvalidField(field, field+" is not a stage id")
		}
	}
	return path.Join(stagingDir, id), nil
}

// writes is the path an upload writes, as the policy and the audit log
// see it: the staged file for a Stage, else Path.
func (a UploadArgs) writes() string {
	if a.Stage != "" {
		if p, err := stagePath("stage", a.Stage); err == nil {
			return p
		}
	}
	return a.Path
}

// stageTarget makes the staging area and sweeps it; the body goes to the
// returned path.
func (s *Service) stageTarget(ctx context.Context, sb *sandbox.Sandbox, id string) (string, error) {
	p, err := stagePath("stage", id)
	if err != nil {
		return "", err
	}
	if _, _, err := sb.File(ctx, agent.OpMkdir, agent.FileReq{Path: stagingDir, Recursive: true, Mode: 0o700}); err != nil {
		return "", fileError("upload", stagingDir, err)
	}
	s.sweepStaged(ctx, sb, time.Now())
	return p, nil
}

// sweepStaged removes staged files older than stagedMaxAge.
func (s *Service) sweepStaged(ctx context.Context, sb *sandbox.Sandbox, now time.Time) {
	resp, _, err := sb.File(ctx, agent.OpReadDir, agent.FileReq{Path: stagingDir, NoFollow: true})
	if err != nil || resp == nil {
		return
	}
	for i, e := range resp.Entries {
		if i >= maxStagedSweep {
			break
		}
		if _, err := stagePath("stage", e.Name); err != nil {
			continue // a temp file of a staging in progress, or not ours
		}
		if now.Sub(time.Unix(0, e.ModTime)) > stagedMaxAge {
			s.removeQuiet(ctx, sb, path.Join(stagingDir, e.Name))
		}
	}
}

// commitStaged moves the staged file a.Staged to a.Path (a directory
// takes a.Filename), or unpacks it there with a.Extract, and removes it.
func (s *Service) commitStaged(ctx context.Context, sb *sandbox.Sandbox, a UploadArgs) (UploadResult, error) {
	src, err := stagePath("staged", a.Staged)
	if err != nil {
		return UploadResult{}, err
	}
	defer s.removeQuiet(ctx, sb, src)
	sl, err := s.resolve(ctx, sb, "upload", src)
	if err != nil {
		return UploadResult{}, err
	}
	d, err := openRegular(ctx, sb, "upload", sl)
	if err != nil {
		return UploadResult{}, err
	}
	defer closeQuiet(d.File)
	if a.Extract {
		dest, _, err := s.extractDest(ctx, sb, a.Path)
		if err != nil {
			return UploadResult{}, err
		}
		res, err := sb.Extract(ctx, dest, a.Format, s.extractLimits(sb), s.cfg.Deny, d.File)
		if err != nil {
			return UploadResult{}, fileError("extract", dest, err)
		}
		return UploadResult{FilePath: dest, FileSize: d.Size, Success: true, Extracted: extractResult(dest, res), SandboxID: sb.ID()}, nil
	}
	target, err := s.uploadTarget(ctx, sb, a)
	if err != nil {
		return UploadResult{}, err
	}
	_, _, err = sb.File(ctx, agent.OpRename, agent.FileReq{Path: src, Path2: target, NoFollow: true})
	if pe := (*agent.Error)(nil); errors.As(err, &pe) && pe.Errno() == syscall.EXDEV {
		// The path is on another file system (/tmp): copied, as any
		// upload is written.
		_, err = s.writeFile(ctx, sb, target, d.File)
	}
	if err != nil {
		return UploadResult{}, fileError("upload", target, err)
	}
	return UploadResult{FilePath: target, FileSize: d.Size, Success: true, SandboxID: sb.ID()}, nil
}
