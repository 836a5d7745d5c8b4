package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/workspace"
)

// Artifacts live in the sandbox's workspace, where its code can use them
// and where they count against its quota: a completed artifact is
// /workspace/.artifacts/<name>; an upload in progress is two files in
// /workspace/.artifacts/.uploads: <id>.part (the bytes so far; its size IS
// the upload's offset, so a dropped connection loses nothing that was
// written and a server restart loses nothing at all) and <id>.json (name,
// length, expected SHA-256).
const (
	ArtifactDir = "/workspace/.artifacts"
	uploadsDir  = ArtifactDir + "/.uploads"
)

var (
	// artifactName: one plain file name, no leading dot (hidden names are
	// the store's own), no upload-id look-alikes.
	artifactName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)
	uploadID     = regexp.MustCompile(`^up_[0-9a-f]{32}$`)
	sha256Hex    = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ArtifactCreateArgs starts a resumable upload.
type ArtifactCreateArgs struct {
	dispatch.On
	Name   string `json:"name" required:"true" doc:"the artifact's file name in /workspace/.artifacts"`
	Length int64  `json:"length" required:"true" minimum:"0" doc:"total bytes the upload will carry"`
	SHA256 string `json:"sha256" required:"true" doc:"lowercase hex SHA-256 of the whole content, checked at the end"`
}

// ArtifactRef names an upload (ID) or a completed artifact (Name).
type ArtifactRef struct {
	dispatch.On
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// ArtifactWriteArgs is one PATCH: Body goes at Offset.
type ArtifactWriteArgs struct {
	dispatch.On
	ID     string    `json:"id" required:"true"`
	Offset int64     `json:"offset" required:"true" minimum:"0"`
	Body   io.Reader `json:"-"`
}

// ArtifactUpload is an upload's state.
type ArtifactUpload struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Length   int64  `json:"length"`
	Offset   int64  `json:"offset"`
	SHA256   string `json:"sha256"`
	Complete bool   `json:"complete"`
	// Path is where the artifact is (complete) or will be.
	Path string `json:"path"`
	// SandboxID is the sandbox written (for the audit record).
	SandboxID string `json:"-"`
}

// Artifact is a completed artifact.
type Artifact struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// ArtifactList is the listing: completed artifacts and uploads.
type ArtifactList struct {
	Artifacts []Artifact       `json:"artifacts"`
	Uploads   []ArtifactUpload `json:"uploads"`
}

// OffsetError is a PATCH at the wrong offset; Current is where the upload
// stands (the edge answers 409 with Upload-Offset: Current).
type OffsetError struct{ Current int64 }

func (e *OffsetError) Error() string {
	return fmt.Sprintf("Upload-Offset does not match the upload's offset %d", e.Current)
}

type artifactMeta struct {
	Name    string    `json:"name"`
	Length  int64     `json:"length"`
	SHA256  string    `json:"sha256"`
	Created time.Time `json:"created"`
}

func (s *Service) artifactSandbox(ctx context.Context, c auth.Caller, id string) (*sandbox.Sandbox, error) {
	return s.sandbox(ctx, c, id)
}

// CreateArtifact registers an upload and returns its id.
func (s *Service) CreateArtifact(ctx context.Context, c auth.Caller, a ArtifactCreateArgs) (*ArtifactUpload, error) {
	if !artifactName.MatchString(a.Name) || uploadID.MatchString(a.Name) {
		return nil, fault.InvalidField("name", "name must be 1-128 characters of A-Z a-z 0-9 . _ + - and not start with a dot")
	}
	a.SHA256 = strings.ToLower(a.SHA256)
	if !sha256Hex.MatchString(a.SHA256) {
		return nil, fault.InvalidField("sha256", "sha256 must be 64 hex digits")
	}
	if a.Length < 0 {
		return nil, fault.InvalidField("length", "length must not be negative")
	}
	if err := s.denied("artifact", path.Join(ArtifactDir, a.Name)); err != nil {
		return nil, err
	}
	sb, err := s.artifactSandbox(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	if a.Length > s.uploadCap(sb) {
		return nil, fault.New(fault.TooLarge, "artifact "+a.Name+": "+errQuota)
	}
	if _, _, err := sb.File(ctx, agent.OpMkdir, agent.FileReq{Path: uploadsDir, Recursive: true, Mode: 0o755}); err != nil {
		return nil, fileError("artifact", ArtifactDir, err)
	}
	if _, free, err := sb.StatFS(ctx, uploadsDir); err == nil && a.Length > free {
		return nil, fault.New(fault.TooLarge, "artifact "+a.Name+": "+errQuota)
	}
	id := "up_" + randHex(16)
	meta, _ := json.Marshal(artifactMeta{Name: a.Name, Length: a.Length, SHA256: a.SHA256, Created: time.Now().UTC()})
	if err := writeNew(ctx, sb, path.Join(uploadsDir, id+".json"), meta); err != nil {
		return nil, fileError("artifact", a.Name, err)
	}
	if err := writeNew(ctx, sb, path.Join(uploadsDir, id+".part"), nil); err != nil {
		s.removeQuiet(ctx, sb, path.Join(uploadsDir, id+".json"))
		return nil, fileError("artifact", a.Name, err)
	}
	up := &ArtifactUpload{ID: id, Name: a.Name, Length: a.Length, SHA256: a.SHA256, Path: path.Join(ArtifactDir, a.Name), SandboxID: sb.ID()}
	if a.Length == 0 {
		return s.finish(ctx, sb, id, artifactMeta{Name: a.Name, SHA256: a.SHA256})
	}
	return up, nil
}

// writeNew creates p (which must not exist) with content b.
func writeNew(ctx context.Context, sb *sandbox.Sandbox, p string, b []byte) error {
	_, f, err := sb.File(ctx, agent.OpOpen, agent.FileReq{Path: p, Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL, Mode: 0o600})
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *Service) readMeta(ctx context.Context, sb *sandbox.Sandbox, id string) (artifactMeta, error) {
	var m artifactMeta
	metaPath := path.Join(uploadsDir, id+".json")
	_, f, err := sb.File(ctx, agent.OpOpenRead, agent.FileReq{Path: metaPath, NoFollow: true})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return m, fault.New(fault.NotFound, "no such artifact upload")
		}
		return m, fileError("artifact", id, err)
	}
	defer func() { _ = f.Close() }()
	if _, err := workspace.CheckOpened("artifact", workspace.Located{Given: id, Resolved: metaPath}, f); err != nil {
		return m, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMetaBytes))
	if err != nil {
		return m, fileError("artifact", id, err)
	}
	// The sandbox's own code can rewrite this file; it only hurts itself,
	// but the values are checked again before use.
	if err := json.Unmarshal(b, &m); err != nil || !artifactName.MatchString(m.Name) || m.Length < 0 || !sha256Hex.MatchString(m.SHA256) {
		return m, fault.New(fault.Conflict, "the artifact upload's metadata was damaged inside the sandbox; delete the upload")
	}
	return m, nil
}

// lockWait bounds how long a call waits for another on the same upload:
// a PATCH whose client hung up ends as soon as the server notices.
const lockWait = 10 * time.Second

// lockUpload waits until no other call works on the upload and marks it
// busy; the returned func releases it.
func (s *Service) lockUpload(ctx context.Context, sb *sandbox.Sandbox, id string) (func(), error) {
	key := sb.ID() + "/" + id
	timer := time.NewTimer(lockWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ch, held := s.busy[key]
		if !held {
			ch = make(chan struct{})
			s.busy[key] = ch
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.busy, key)
				s.mu.Unlock()
				close(ch)
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, fault.New(fault.Conflict, "another PATCH of this upload is still in progress")
		}
	}
}

// WriteArtifact appends a PATCH body at a.Offset. When the upload reaches
// its length the content's SHA-256 is checked and the artifact moved into
// place (or, on a mismatch, the upload discarded).
func (s *Service) WriteArtifact(ctx context.Context, c auth.Caller, a ArtifactWriteArgs) (*ArtifactUpload, error) {
	if !uploadID.MatchString(a.ID) {
		return nil, fault.New(fault.NotFound, "no such artifact upload")
	}
	if a.Body == nil {
		return nil, fault.New(fault.Invalid, "a PATCH needs a body")
	}
	sb, err := s.artifactSandbox(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	unlock, err := s.lockUpload(ctx, sb, a.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	meta, err := s.readMeta(ctx, sb, a.ID)
	if err != nil {
		return nil, err
	}
	part := path.Join(uploadsDir, a.ID+".part")
	_, f, err := sb.File(ctx, agent.OpOpen, agent.FileReq{Path: part, Flags: unix.O_WRONLY, NoFollow: true})
	if err != nil {
		return nil, fileError("artifact", meta.Name, err)
	}
	defer func() { _ = f.Close() }()
	// The sandbox's code could have replaced the part with a second name
	// of another file (a hard link): never write through it.
	if _, err := workspace.CheckOpened("artifact", workspace.Located{Given: meta.Name, Resolved: part}, f); err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fileError("artifact", meta.Name, err)
	}
	cur := st.Size()
	if a.Offset != cur || cur > meta.Length {
		return nil, fault.Wrap(fault.Conflict, &OffsetError{Current: cur}, (&OffsetError{Current: cur}).Error())
	}
	if _, err := f.Seek(cur, io.SeekStart); err != nil {
		return nil, fileError("artifact", meta.Name, err)
	}
	n, cerr := copyCapped(ctx, f, a.Body, meta.Length-cur)
	if cerr != nil {
		// What arrived is kept: the client resumes at HEAD's offset.
		_ = f.Sync()
		if errors.Is(cerr, errCap) {
			return nil, fault.New(fault.TooLarge, fmt.Sprintf("the PATCH carries more than the %d bytes the upload still expects", meta.Length-cur))
		}
		return nil, fileError("artifact", meta.Name, cerr)
	}
	if err := f.Sync(); err != nil {
		return nil, fileError("artifact", meta.Name, err)
	}
	up := &ArtifactUpload{ID: a.ID, Name: meta.Name, Length: meta.Length, Offset: cur + n, SHA256: meta.SHA256, Path: path.Join(ArtifactDir, meta.Name), SandboxID: sb.ID()}
	if up.Offset < meta.Length {
		return up, nil
	}
	return s.finish(ctx, sb, a.ID, meta)
}

// finish checks the SHA-256 of a complete upload and moves it into place.
func (s *Service) finish(ctx context.Context, sb *sandbox.Sandbox, id string, meta artifactMeta) (*ArtifactUpload, error) {
	part := path.Join(uploadsDir, id+".part")
	_, f, err := sb.File(ctx, agent.OpOpenRead, agent.FileReq{Path: part, NoFollow: true})
	if err != nil {
		return nil, fileError("artifact", meta.Name, err)
	}
	if _, err := workspace.CheckOpened("artifact", workspace.Located{Given: meta.Name, Resolved: part}, f); err != nil {
		closeQuiet(f)
		return nil, err
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, make([]byte, copyBuf))
	closeQuiet(f)
	if err != nil {
		return nil, fileError("artifact", meta.Name, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != meta.SHA256 || n != meta.Length {
		s.removeQuiet(ctx, sb, part)
		s.removeQuiet(ctx, sb, path.Join(uploadsDir, id+".json"))
		return nil, fault.New(fault.Unprocessable, fmt.Sprintf("SHA-256 mismatch: the content hashes to %s, not the declared %s; the upload was discarded", got, meta.SHA256))
	}
	final := path.Join(ArtifactDir, meta.Name)
	if _, _, err := sb.File(ctx, agent.OpRename, agent.FileReq{Path: part, Path2: final, NoFollow: true}); err != nil {
		return nil, fileError("artifact", meta.Name, err)
	}
	s.removeQuiet(ctx, sb, path.Join(uploadsDir, id+".json"))
	return &ArtifactUpload{ID: id, Name: meta.Name, Length: meta.Length, Offset: meta.Length, SHA256: got, Complete: true, Path: final, SandboxID: sb.ID()}, nil
}

// ArtifactStatus reports an upload's offset (HEAD).
func (s *Service) ArtifactStatus(ctx context.Context, c auth.Caller, a ArtifactRef) (*ArtifactUpload, error) {
	if !uploadID.MatchString(a.ID) {
		return nil, fault.New(fault.NotFound, "no such artifact upload")
	}
	sb, err := s.artifactSandbox(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	// After any PATCH in progress, so the offset is the settled one.
	unlock, err := s.lockUpload(ctx, sb, a.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	meta, err := s.readMeta(ctx, sb, a.ID)
	if err != nil {
		return nil, err
	}
	st, _, err := sb.File(ctx, agent.OpStat, agent.FileReq{Path: path.Join(uploadsDir, a.ID+".part"), NoFollow: true})
	if err != nil || st.Stat == nil {
		return nil, fileError("artifact", meta.Name, err)
	}
	return &ArtifactUpload{ID: a.ID, Name: meta.Name, Length: meta.Length, Offset: st.Stat.Size, SHA256: meta.SHA256, Path: path.Join(ArtifactDir, meta.Name)}, nil
}

// ListArtifacts lists completed artifacts with their sizes and the uploads
// in progress with their offsets (one directory page each).
func (s *Service) ListArtifacts(ctx context.Context, c auth.Caller, a ArtifactRef) (*ArtifactList, error) {
	sb, err := s.artifactSandbox(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	out := &ArtifactList{Artifacts: []Artifact{}, Uploads: []ArtifactUpload{}}
	res, _, err := sb.File(ctx, agent.OpReadDir, agent.FileReq{Path: ArtifactDir, NoFollow: true})
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fileError("list", ArtifactDir, err)
	}
	for _, e := range res.Entries {
		if strings.HasPrefix(e.Name, ".") || !os.FileMode(e.Mode).IsRegular() {
			continue
		}
		out.Artifacts = append(out.Artifacts, Artifact{Name: e.Name, Path: path.Join(ArtifactDir, e.Name), Size: e.Size, Modified: time.Unix(0, e.ModTime).UTC()})
	}
	ups, _, err := sb.File(ctx, agent.OpReadDir, agent.FileReq{Path: uploadsDir, NoFollow: true})
	if err == nil {
		for _, e := range ups.Entries {
			id, ok := strings.CutSuffix(e.Name, ".json")
			if !ok || !uploadID.MatchString(id) {
				continue
			}
			if up, err := s.ArtifactStatus(ctx, c, ArtifactRef{On: dispatch.On{Sandbox: sb.ID()}, ID: id}); err == nil {
				out.Uploads = append(out.Uploads, *up)
			}
		}
	}
	sort.Slice(out.Artifacts, func(i, j int) bool { return out.Artifacts[i].Name < out.Artifacts[j].Name })
	sort.Slice(out.Uploads, func(i, j int) bool { return out.Uploads[i].ID < out.Uploads[j].ID })
	return out, nil
}

// ReadArtifact opens a completed artifact for a (Range) download.
func (s *Service) ReadArtifact(ctx context.Context, c auth.Caller, a ArtifactRef) (*Download, error) {
	if !artifactName.MatchString(a.Name) {
		return nil, fault.New(fault.NotFound, "no such artifact")
	}
	if err := s.denied("artifact", path.Join(ArtifactDir, a.Name)); err != nil {
		return nil, err
	}
	sb, err := s.artifactSandbox(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	l, err := s.resolve(ctx, sb, "artifact", path.Join(ArtifactDir, a.Name))
	if err != nil {
		return nil, err
	}
	return openRegular(ctx, sb, "artifact", l)
}

// Deleted is artifact.delete's answer: what was removed.
type Deleted struct {
	Deleted string `json:"deleted" doc:"the upload id or the artifact name that was removed"`
}

// DeleteArtifact removes an upload (by ID) or a completed artifact (Name).
func (s *Service) DeleteArtifact(ctx context.Context, c auth.Caller, a ArtifactRef) (Deleted, error) {
	sb, err := s.artifactSandbox(ctx, c, a.Sandbox)
	if err != nil {
		return Deleted{}, err
	}
	switch {
	case uploadID.MatchString(a.ID):
		unlock, err := s.lockUpload(ctx, sb, a.ID)
		if err != nil {
			return Deleted{}, err
		}
		defer unlock()
		if _, _, err := sb.File(ctx, agent.OpRemove, agent.FileReq{Path: path.Join(uploadsDir, a.ID+".json"), NoFollow: true}); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return Deleted{}, fault.New(fault.NotFound, "no such artifact upload")
			}
			return Deleted{}, fileError("delete", a.ID, err)
		}
		s.removeQuiet(ctx, sb, path.Join(uploadsDir, a.ID+".part"))
		return Deleted{Deleted: a.ID}, nil
	case artifactName.MatchString(a.Name):
		if _, _, err := sb.File(ctx, agent.OpRemove, agent.FileReq{Path: path.Join(ArtifactDir, a.Name), NoFollow: true}); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return Deleted{}, fault.New(fault.NotFound, "no such artifact")
			}
			return Deleted{}, fileError("delete", a.Name, err)
		}
		return Deleted{Deleted: a.Name}, nil
	}
	return Deleted{}, fault.New(fault.NotFound, "no such artifact")
}
