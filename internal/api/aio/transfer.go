package aio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/archive"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/transfer"
)

// Caps of the transfer routes, with their reasons.
const (
	// maxUploadParts bounds the multipart parts read before the file
	// part: a handful of small fields is all AIO's form has.
	maxUploadParts = 16
	// maxFieldBytes bounds one small multipart field (path, extract …).
	maxFieldBytes = 8192
	// maxTransferJSON bounds the JSON body of extract and artifact
	// creation.
	maxTransferJSON = 64 << 10
	// uploadBuf is the read buffer of a multipart upload.
	uploadBuf = 1 << 20
	// streamBuf is the copy buffer of archive streams.
	streamBuf = 256 << 10
)

// TransferRoutes mounts the streaming file routes (AIO 1.9.4's upload and
// download, plus extract, archive and the resumable artifact protocol)
// from the AIO route table, at /v1/... (the caller's default sandbox) and
// /sandboxes/{id}/v1/... (a given one). Every handler calls the
// dispatcher; the streaming tools return what the handler streams (see
// internal/transfer). Upload and PATCH bodies are exempt from
// SANDBOX_MAX_BODY: the transfer service caps them (upload cap and the
// workspace quota).
func TransferRoutes(s *api.Server, d *dispatch.Dispatcher) { mountAIO(s, d, groupTransfer) }

// boolField reads v, the input name found in in (inQuery, inBody for a
// form field), as a boolean; empty is false.
func boolField(in, name, v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fault.InvalidField(in+"."+name, name+" must be true or false")
	}
	return b, nil
}

// upload: multipart/form-data with AIO's fields "file" (and "path"); also
// "extract" and "format", in any order. A file whose path is known (a
// field before it, as AIO's Python SDK sends it, or ?path=) is streamed
// to it; a file that comes first (AIO's TypeScript SDK) is staged in the
// sandbox and moved where the rest of the form says, each step a
// dispatched file.upload (internal/transfer's staged.go). A raw body (any
// other content type) with ?path= is accepted too.
func upload(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a := transfer.UploadArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Path: q.Get("path"), Format: archive.Format(q.Get("format")), Size: r.ContentLength}
	var err error
	if a.Extract, err = boolField(inQuery, "extract", q.Get("extract")); err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		a.Body = r.Body
		answer(e, rt, w, r, transfer.ToolUpload, a, a.Path)
		return
	}
	if params["boundary"] == "" {
		e.fail(w, r, rt, "", fault.New(fault.Invalid, "the body is not valid multipart/form-data (no boundary)"))
		return
	}
	// multipart reads through a 4 KiB buffer unless handed a larger one:
	// with 1 MiB it scans for the boundary in big steps (2x on 1 GiB).
	mr := multipart.NewReader(bufio.NewReaderSize(r.Body, uploadBuf), params["boundary"])
	for range maxUploadParts {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			e.fail(w, r, rt, "", fault.Wrap(fault.Invalid, err, "the body is not valid multipart/form-data"))
			return
		}
		switch part.FormName() {
		case "file":
			if a.Staged != "" {
				e.fail(w, r, rt, "", fault.InvalidField(inBody+".file", "the form has two \"file\" fields"))
				return
			}
			a.Filename, a.Body = part.FileName(), part
			if a.Path != "" {
				answer(e, rt, w, r, transfer.ToolUpload, a, a.Path)
				return
			}
			// The path, if the form has one, comes after the file.
			st := transfer.UploadArgs{On: dispatch.On{Sandbox: a.Sandbox}, Filename: a.Filename, Stage: transfer.NewStageID(), Size: a.Size, Body: part}
			if _, err := transfer.ToolUpload.Call(r.Context(), e.dispatcher(), callerOf(r), st); err != nil {
				e.fail(w, r, rt, "", err)
				return
			}
			a.Staged, a.Body, a.Size = st.Stage, nil, 0
		case "path", "extract", "format":
			if err := formField(part, &a); err != nil {
				e.fail(w, r, rt, "", err)
				return
			}
		default:
			_, _ = io.Copy(io.Discard, io.LimitReader(part, maxFieldBytes))
		}
	}
	if a.Staged != "" {
		answer(e, rt, w, r, transfer.ToolUpload, a, a.Path)
		return
	}
	e.fail(w, r, rt, "", fault.InvalidField(inBody+".file", "the form has no \"file\" field"))
}

// formField reads one of the upload form's small fields into a.
func formField(part *multipart.Part, a *transfer.UploadArgs) error {
	b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
	if err != nil || len(b) > maxFieldBytes {
		return fault.InvalidField(inBody+"."+part.FormName(), "field "+part.FormName()+" is malformed or too long")
	}
	v := string(b)
	switch part.FormName() {
	case "path":
		a.Path = v
	case "format":
		a.Format = archive.Format(v)
	case "extract":
		if a.Extract, err = boolField(inBody, "extract", v); err != nil {
			return err
		}
	}
	return nil
}

// download streams a regular file with Range support. change_policy=abort
// answers 409 when the file changed since it was opened, and cuts the
// stream short (the client sees a truncated body) when it changes while
// bytes are being sent.
func download(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	abort := false
	switch q.Get("change_policy") {
	case "", "ignore":
	case "abort":
		abort = true
	default:
		e.fail(w, r, rt, "", fault.InvalidField(inQuery+".change_policy", "change_policy must be ignore or abort"))
		return
	}
	d, err := transfer.ToolDownload.Call(r.Context(), e.dispatcher(), callerOf(r), transfer.DownloadArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Path: q.Get("path")})
	if err != nil {
		e.fail(w, r, rt, q.Get("path"), err)
		return
	}
	serveDownload(w, r, d, abort)
}

func serveDownload(w http.ResponseWriter, r *http.Request, d *transfer.Download, abort bool) {
	defer func() { _ = d.File.Close() }()
	if abort && d.Changed() {
		api.WriteError(w, r, transfer.ErrChanged)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(d.Name()))
	// A strong validator of this version, so If-Range resumes only an
	// unchanged file.
	hd.Set("ETag", fmt.Sprintf(`"%x-%x"`, d.Size, d.ModTime.UnixNano()))
	http.ServeContent(api.Sendfile(w), r, "", d.ModTime, d.Content(abort))
}

// archive streams a directory as tar.gz (default) or zip. A failure
// after the first byte aborts the connection, so a client never mistakes
// a partial archive for a whole one.
func archiveDir(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := transfer.ToolArchive.Call(r.Context(), e.dispatcher(), callerOf(r), transfer.ArchiveArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Path: q.Get("path"), Format: archive.Format(q.Get("format"))})
	if err != nil {
		e.fail(w, r, rt, q.Get("path"), err)
		return
	}
	defer func() { _ = p.Body.Close() }()
	// The first bytes decide the status: a tree refused before anything
	// was written (a sensitive file, too many entries) gets its error.
	buf := make([]byte, streamBuf)
	n, err := io.ReadAtLeast(p.Body, buf, 1)
	if err != nil && !errors.Is(err, io.EOF) {
		e.fail(w, r, rt, "", err)
		return
	}
	w.Header().Set("Content-Type", p.ContentType)
	w.Header().Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(p.Name))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(buf[:n]); err != nil {
		panic(http.ErrAbortHandler)
	}
	if _, err := io.CopyBuffer(w, p.Body, buf); err != nil {
		api.LoggerFrom(r.Context()).Warn("archive stream ended early", "err", err)
		panic(http.ErrAbortHandler)
	}
}

func artifactCreate(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	a, err := decodeRow[transfer.ArtifactCreateArgs](rt, r)
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	a.Sandbox = chi.URLParam(r, "id")
	up, err := transfer.ToolArtifactCreate.Call(r.Context(), e.dispatcher(), callerOf(r), a)
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/")+"/"+up.ID)
	setUploadHeaders(w, up)
	api.WriteData(w, http.StatusCreated, up)
}

func setUploadHeaders(w http.ResponseWriter, up *transfer.ArtifactUpload) {
	w.Header().Set("Upload-Offset", strconv.FormatInt(up.Offset, 10))
	w.Header().Set("Upload-Length", strconv.FormatInt(up.Length, 10))
}

func isUploadID(ref string) bool { return strings.HasPrefix(ref, "up_") }

// artifactHead: an upload's offset (tus's HEAD), or an artifact's size.
func artifactHead(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	ref := chi.URLParam(r, "ref")
	if !isUploadID(ref) {
		artifactGet(e, rt, w, r) // ServeContent answers HEAD without a body
		return
	}
	up, err := artifactStatus(e, r, ref)
	if err != nil {
		w.WriteHeader(api.StatusOf(fault.KindOf(err)))
		return
	}
	setUploadHeaders(w, up)
	w.WriteHeader(http.StatusOK)
}

// artifactStatus is an upload's state (tool artifact.status).
func artifactStatus(e *aioEdge, r *http.Request, id string) (*transfer.ArtifactUpload, error) {
	return transfer.ToolArtifactStatus.Call(r.Context(), e.dispatcher(), callerOf(r), transfer.ArtifactRef{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, ID: id})
}

// artifactGet: an upload's state as JSON, or an artifact's content with
// Range support.
func artifactGet(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	ref, sb := chi.URLParam(r, "ref"), chi.URLParam(r, "id")
	if isUploadID(ref) {
		up, err := artifactStatus(e, r, ref)
		if err != nil {
			e.fail(w, r, rt, "", err)
			return
		}
		setUploadHeaders(w, up)
		api.WriteData(w, http.StatusOK, up)
		return
	}
	d, err := transfer.ToolArtifactRead.Call(r.Context(), e.dispatcher(), callerOf(r), transfer.ArtifactRef{On: dispatch.On{Sandbox: sb}, Name: ref})
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	serveDownload(w, r, d, false)
}

// artifactPatch appends the body at Upload-Offset (409 with the real
// offset on a mismatch). 204 while incomplete; 200 with the artifact once
// the SHA-256 checked out (422 and the upload discarded if it did not).
func artifactPatch(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	off, err := strconv.ParseInt(r.Header.Get("Upload-Offset"), 10, 64)
	if err != nil || off < 0 {
		e.fail(w, r, rt, "", fault.InvalidField(inHeader+".Upload-Offset", "the Upload-Offset header must hold the upload's current offset"))
		return
	}
	up, err := transfer.ToolArtifactWrite.Call(r.Context(), e.dispatcher(), callerOf(r), transfer.ArtifactWriteArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, ID: chi.URLParam(r, "ref"), Offset: off, Body: r.Body})
	if err != nil {
		var oe *transfer.OffsetError
		if errors.As(err, &oe) {
			w.Header().Set("Upload-Offset", strconv.FormatInt(oe.Current, 10))
		}
		e.fail(w, r, rt, "", err)
		return
	}
	setUploadHeaders(w, up)
	if !up.Complete {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	api.WriteData(w, http.StatusOK, up)
}

// artifactRef names an upload (up_…) or an artifact by the URL's ref.
func artifactRef(r *http.Request, _ struct{}) (transfer.ArtifactRef, error) {
	ref := chi.URLParam(r, "ref")
	a := transfer.ArtifactRef{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}}
	if isUploadID(ref) {
		a.ID = ref
	} else {
		a.Name = ref
	}
	return a, nil
}
