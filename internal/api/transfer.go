package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

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
// download, plus extract, archive and the resumable artifact protocol) at
// /v1/... (the caller's default sandbox) and /sandboxes/{id}/v1/... (a
// given one). Every handler calls the dispatcher; the streaming tools
// return what the handler streams (see internal/transfer). Upload and PATCH
// bodies are exempt from SANDBOX_MAX_BODY: the transfer service caps them
// (upload cap and the workspace quota).
func (s *Server) TransferRoutes(d *dispatch.Dispatcher) {
	h := &transferHandlers{d: d}
	for _, prefix := range []string{"", "/sandboxes/{id}"} {
		s.router.Post(prefix+"/v1/file/upload", h.upload)
		s.router.Get(prefix+"/v1/file/download", h.download)
		s.router.Head(prefix+"/v1/file/download", h.download)
		s.router.Post(prefix+"/v1/file/extract", h.extract)
		s.router.Get(prefix+"/v1/file/archive", h.archive)
		s.router.Post(prefix+"/v1/artifacts", h.artifactCreate)
		s.router.Get(prefix+"/v1/artifacts", h.artifactList)
		s.router.Head(prefix+"/v1/artifacts/{ref}", h.artifactHead)
		s.router.Get(prefix+"/v1/artifacts/{ref}", h.artifactGet)
		s.router.Patch(prefix+"/v1/artifacts/{ref}", h.artifactPatch)
		s.router.Delete(prefix+"/v1/artifacts/{ref}", h.artifactDelete)
	}
	for _, p := range []string{"/v1/file/upload", "/sandboxes/*/v1/file/upload", "/v1/artifacts/", "/sandboxes/*/v1/artifacts/"} {
		s.AllowLargeBodies(p)
	}
	s.documentTransfer()
}

// documentTransfer adds the streaming routes to the OpenAPI document.
func (s *Server) documentTransfer() {
	oa := s.api.OpenAPI()
	schema := func(t reflect.Type, hint string) *huma.Schema { return oa.Components.Schemas.Schema(t, true, hint) }
	str := &huma.Schema{Type: "string"}
	query := func(names ...string) []*huma.Param {
		var ps []*huma.Param
		for _, n := range names {
			ps = append(ps, &huma.Param{Name: n, In: "query", Schema: str})
		}
		return ps
	}
	ref := []*huma.Param{{Name: "ref", In: "path", Required: true, Schema: str, Description: "an upload id (up_…) or an artifact name"}}
	binary := map[string]*huma.MediaType{"application/octet-stream": {Schema: &huma.Schema{Type: "string", Format: "binary"}}}
	jsonOf := func(t reflect.Type, hint string) map[string]*huma.MediaType {
		return map[string]*huma.MediaType{"application/json": {Schema: schema(t, hint)}}
	}
	ops := []*huma.Operation{
		{OperationID: "file-upload", Method: http.MethodPost, Path: "/v1/file/upload", Summary: "Upload a file, streamed (AIO); extract=true unpacks an archive",
			Description: "multipart/form-data with the fields path (first) and file, or a raw body with ?path=. The file streams into a temp file beside the target and is renamed into place; beyond the workspace quota: 413 and nothing left.",
			Parameters:  query("path", "extract", "format"),
			RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"multipart/form-data": {Schema: &huma.Schema{Type: "object",
				Properties: map[string]*huma.Schema{"path": str, "file": {Type: "string", Format: "binary"}}, Required: []string{"file"}}}}},
			Responses: map[string]*huma.Response{"200": {Description: "uploaded", Content: jsonOf(reflect.TypeFor[Envelope[transfer.UploadResult]](), "FileUploadResponse")}}},
		{OperationID: "file-download", Method: http.MethodGet, Path: "/v1/file/download", Summary: "Download a file, streamed, with Range (AIO)",
			Parameters: query("path", "change_policy"),
			Responses: map[string]*huma.Response{"200": {Description: "the file", Content: binary}, "206": {Description: "a range", Content: binary},
				"409": {Description: "the file changed (change_policy=abort)"}}},
		{OperationID: "file-extract", Method: http.MethodPost, Path: "/v1/file/extract", Summary: "Extract a zip, tar, tar.gz or tar.zst inside the sandbox, all or nothing",
			RequestBody: &huma.RequestBody{Required: true, Content: jsonOf(reflect.TypeFor[transfer.ExtractArgs](), "FileExtractRequest")},
			Responses:   map[string]*huma.Response{"200": {Description: "extracted", Content: jsonOf(reflect.TypeFor[Envelope[transfer.ExtractResult]](), "FileExtractResponse")}}},
		{OperationID: "file-archive", Method: http.MethodGet, Path: "/v1/file/archive", Summary: "Stream a directory out as tar.gz or zip",
			Parameters: query("path", "format"),
			Responses:  map[string]*huma.Response{"200": {Description: "the archive", Content: map[string]*huma.MediaType{"application/gzip": {Schema: &huma.Schema{Type: "string", Format: "binary"}}, "application/zip": {Schema: &huma.Schema{Type: "string", Format: "binary"}}}}}},
		{OperationID: "artifact-create", Method: http.MethodPost, Path: "/v1/artifacts", Summary: "Start a resumable artifact upload (see the README's Artifacts section)",
			RequestBody: &huma.RequestBody{Required: true, Content: jsonOf(reflect.TypeFor[transfer.ArtifactCreateArgs](), "ArtifactCreateRequest")},
			Responses:   map[string]*huma.Response{"201": {Description: "the upload; Location names it", Content: jsonOf(reflect.TypeFor[Envelope[transfer.ArtifactUpload]](), "ArtifactUploadResponse")}}},
		{OperationID: "artifact-list", Method: http.MethodGet, Path: "/v1/artifacts", Summary: "List artifacts with sizes and uploads with offsets",
			Responses: map[string]*huma.Response{"200": {Description: "the listing", Content: jsonOf(reflect.TypeFor[Envelope[transfer.ArtifactList]](), "ArtifactListResponse")}}},
		{OperationID: "artifact-patch", Method: http.MethodPatch, Path: "/v1/artifacts/{ref}", Summary: "Append bytes at Upload-Offset",
			Parameters:  append([]*huma.Param{{Name: "Upload-Offset", In: "header", Required: true, Schema: &huma.Schema{Type: "integer"}}}, ref...),
			RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/offset+octet-stream": {Schema: &huma.Schema{Type: "string", Format: "binary"}}}},
			Responses: map[string]*huma.Response{"204": {Description: "accepted; Upload-Offset is the new offset"},
				"200": {Description: "complete and checked", Content: jsonOf(reflect.TypeFor[Envelope[transfer.ArtifactUpload]](), "ArtifactUploadResponse")},
				"409": {Description: "wrong offset; Upload-Offset is the right one"}, "422": {Description: "SHA-256 mismatch; the upload was discarded"}}},
		{OperationID: "artifact-head", Method: http.MethodHead, Path: "/v1/artifacts/{ref}", Summary: "An upload's Upload-Offset and Upload-Length",
			Parameters: ref, Responses: map[string]*huma.Response{"200": {Description: "see the headers"}}},
		{OperationID: "artifact-get", Method: http.MethodGet, Path: "/v1/artifacts/{ref}", Summary: "An artifact's content (Range), or an upload's state",
			Parameters: ref, Responses: map[string]*huma.Response{"200": {Description: "content or state", Content: binary}, "206": {Description: "a range", Content: binary}}},
		{OperationID: "artifact-delete", Method: http.MethodDelete, Path: "/v1/artifacts/{ref}", Summary: "Delete an artifact or an upload",
			Parameters: ref, Responses: map[string]*huma.Response{"200": {Description: "deleted"}}},
	}
	for _, op := range ops {
		op.Tags, op.Security = []string{"files"}, Security
		if op.Description == "" {
			op.Description = "Acts on the caller's default sandbox; the same route under /sandboxes/{id} acts on sandbox id."
		}
		oa.AddOperation(op)
	}
}

// pathHasPrefix is strings.HasPrefix where a "*" segment of prefix
// matches any one non-empty segment of p.
func pathHasPrefix(p, prefix string) bool {
	if !strings.Contains(prefix, "*") {
		return strings.HasPrefix(p, prefix)
	}
	ps, qs := strings.Split(p, "/"), strings.Split(prefix, "/")
	if len(ps) < len(qs) {
		return false
	}
	for i, q := range qs {
		switch {
		case q == "*":
			if ps[i] == "" {
				return false
			}
		case i == len(qs)-1:
			if !strings.HasPrefix(ps[i], q) {
				return false
			}
		case ps[i] != q:
			return false
		}
	}
	return true
}

type transferHandlers struct {
	d *dispatch.Dispatcher
}

func (h *transferHandlers) call(ctx context.Context, tool string, args any) (any, error) {
	c, err := MustCaller(ctx)
	if err != nil {
		return nil, err
	}
	return h.d.Dispatch(transfer.WithStreaming(ctx), c, tool, args)
}

func queryBool(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fault.InvalidField(name, name+" must be true or false")
	}
	return b, nil
}

// upload: multipart/form-data with AIO's fields "file" (and "path"); also
// "extract" and "format". Fields after the file part cannot steer where
// it goes (the file is streamed as it arrives), so "path" must come first
// — as AIO's SDKs send it — or in the query. A raw body (any other content
// type) with ?path= is accepted too.
func (h *transferHandlers) upload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a := transfer.UploadArgs{Sandbox: chi.URLParam(r, "id"), Path: q.Get("path"), Format: archive.Format(q.Get("format")), Size: r.ContentLength}
	var err error
	if a.Extract, err = queryBool(q, "extract"); err != nil {
		WriteError(w, r, err)
		return
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		a.Body = r.Body
		h.finishUpload(w, r, a)
		return
	}
	if params["boundary"] == "" {
		WriteError(w, r, fault.New(fault.Invalid, "the body is not valid multipart/form-data (no boundary)"))
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
			WriteError(w, r, fault.Wrap(fault.Invalid, err, "the body is not valid multipart/form-data"))
			return
		}
		switch part.FormName() {
		case "file":
			a.Filename, a.Body = part.FileName(), part
			h.finishUpload(w, r, a)
			return
		case "path", "extract", "format":
			b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
			if err != nil || len(b) > maxFieldBytes {
				WriteError(w, r, fault.InvalidField(part.FormName(), "field "+part.FormName()+" is malformed or too long"))
				return
			}
			v := string(b)
			switch part.FormName() {
			case "path":
				a.Path = v
			case "format":
				a.Format = archive.Format(v)
			case "extract":
				if a.Extract, err = queryBool(url.Values{"extract": {v}}, "extract"); err != nil {
					WriteError(w, r, err)
					return
				}
			}
		default:
			_, _ = io.Copy(io.Discard, io.LimitReader(part, maxFieldBytes))
		}
	}
	WriteError(w, r, fault.InvalidField("file", "the form has no \"file\" field"))
}

func (h *transferHandlers) finishUpload(w http.ResponseWriter, r *http.Request, a transfer.UploadArgs) {
	res, err := h.call(r.Context(), transfer.ToolUpload, a)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	WriteData(w, http.StatusOK, res)
}

// download streams a regular file with Range support. change_policy=abort
// answers 409 when the file changed since it was opened, and cuts the
// stream short (the client sees a truncated body) when it changes while
// bytes are being sent.
func (h *transferHandlers) download(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	abort := false
	switch q.Get("change_policy") {
	case "", "ignore":
	case "abort":
		abort = true
	default:
		WriteError(w, r, fault.InvalidField("change_policy", "change_policy must be ignore or abort"))
		return
	}
	res, err := h.call(r.Context(), transfer.ToolDownload, transfer.DownloadArgs{Sandbox: chi.URLParam(r, "id"), Path: q.Get("path")})
	if err != nil {
		WriteError(w, r, err)
		return
	}
	serveDownload(w, r, res.(*transfer.Download), abort)
}

func serveDownload(w http.ResponseWriter, r *http.Request, d *transfer.Download, abort bool) {
	defer func() { _ = d.File.Close() }()
	if abort && d.Changed() {
		WriteError(w, r, transfer.ErrChanged)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(d.Name()))
	// A strong validator of this version, so If-Range resumes only an
	// unchanged file.
	hd.Set("ETag", fmt.Sprintf(`"%x-%x"`, d.Size, d.ModTime.UnixNano()))
	http.ServeContent(sendfileWriter{w}, r, "", d.ModTime, d.Content(abort))
}

// sendfileWriter lets http.ServeContent reach the connection's ReadFrom
// (sendfile from the sandbox's file straight to the socket) through the
// middleware's wrappers, which pass only Write. Headers still go through
// the wrappers (status and access log); the body's bytes are not counted
// by the size metric.
type sendfileWriter struct{ http.ResponseWriter }

func (s sendfileWriter) ReadFrom(r io.Reader) (int64, error) {
	w := s.ResponseWriter
	// maxUnwrap bounds the walk down the middleware's wrappers.
	const maxUnwrap = 8
	for range maxUnwrap {
		if rf, ok := w.(io.ReaderFrom); ok {
			return rf.ReadFrom(r)
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return io.Copy(writerOnly{s.ResponseWriter}, r)
}

// writerOnly hides ReadFrom so io.Copy does not recurse.
type writerOnly struct{ io.Writer }

// extract: JSON {path, dest?, format?}.
func (h *transferHandlers) extract(w http.ResponseWriter, r *http.Request) {
	var a transfer.ExtractArgs
	if err := decodeTransferJSON(r, &a); err != nil {
		WriteError(w, r, err)
		return
	}
	a.Sandbox = chi.URLParam(r, "id")
	res, err := h.call(r.Context(), transfer.ToolExtract, a)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	WriteData(w, http.StatusOK, res)
}

func decodeTransferJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxTransferJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fault.Wrap(fault.Invalid, err, "the JSON body does not match the operation: "+err.Error())
	}
	return nil
}

// archive streams a directory as tar.gz (default) or zip. A failure
// after the first byte aborts the connection, so a client never mistakes
// a partial archive for a whole one.
func (h *transferHandlers) archive(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	res, err := h.call(r.Context(), transfer.ToolArchive, transfer.ArchiveArgs{Sandbox: chi.URLParam(r, "id"), Path: q.Get("path"), Format: archive.Format(q.Get("format"))})
	if err != nil {
		WriteError(w, r, err)
		return
	}
	p := res.(*transfer.Packed)
	defer func() { _ = p.Body.Close() }()
	// The first bytes decide the status: a tree refused before anything
	// was written (a sensitive file, too many entries) gets its error.
	buf := make([]byte, streamBuf)
	n, err := io.ReadAtLeast(p.Body, buf, 1)
	if err != nil && !errors.Is(err, io.EOF) {
		WriteError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", p.ContentType)
	w.Header().Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(p.Name))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(buf[:n]); err != nil {
		panic(http.ErrAbortHandler)
	}
	if _, err := io.CopyBuffer(w, p.Body, buf); err != nil {
		loggerFrom(r.Context()).Warn("archive stream ended early", "err", err)
		panic(http.ErrAbortHandler)
	}
}

func (h *transferHandlers) artifactCreate(w http.ResponseWriter, r *http.Request) {
	var a transfer.ArtifactCreateArgs
	if err := decodeTransferJSON(r, &a); err != nil {
		WriteError(w, r, err)
		return
	}
	a.Sandbox = chi.URLParam(r, "id")
	res, err := h.call(r.Context(), transfer.ToolArtifactCreate, a)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	up := res.(*transfer.ArtifactUpload)
	w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/")+"/"+up.ID)
	setUploadHeaders(w, up)
	WriteData(w, http.StatusCreated, up)
}

func setUploadHeaders(w http.ResponseWriter, up *transfer.ArtifactUpload) {
	w.Header().Set("Upload-Offset", strconv.FormatInt(up.Offset, 10))
	w.Header().Set("Upload-Length", strconv.FormatInt(up.Length, 10))
}

func (h *transferHandlers) artifactList(w http.ResponseWriter, r *http.Request) {
	res, err := h.call(r.Context(), transfer.ToolArtifactList, transfer.ArtifactRef{Sandbox: chi.URLParam(r, "id")})
	if err != nil {
		WriteError(w, r, err)
		return
	}
	WriteData(w, http.StatusOK, res)
}

func isUploadID(ref string) bool { return strings.HasPrefix(ref, "up_") }

// artifactHead: an upload's offset (tus's HEAD), or an artifact's size.
func (h *transferHandlers) artifactHead(w http.ResponseWriter, r *http.Request) {
	ref := chi.URLParam(r, "ref")
	if !isUploadID(ref) {
		h.artifactGet(w, r) // ServeContent answers HEAD without a body
		return
	}
	res, err := h.call(r.Context(), transfer.ToolArtifactStatus, transfer.ArtifactRef{Sandbox: chi.URLParam(r, "id"), ID: ref})
	if err != nil {
		w.WriteHeader(StatusOf(fault.KindOf(err)))
		return
	}
	setUploadHeaders(w, res.(*transfer.ArtifactUpload))
	w.WriteHeader(http.StatusOK)
}

// artifactGet: an upload's state as JSON, or an artifact's content with
// Range support.
func (h *transferHandlers) artifactGet(w http.ResponseWriter, r *http.Request) {
	ref, sb := chi.URLParam(r, "ref"), chi.URLParam(r, "id")
	if isUploadID(ref) {
		res, err := h.call(r.Context(), transfer.ToolArtifactStatus, transfer.ArtifactRef{Sandbox: sb, ID: ref})
		if err != nil {
			WriteError(w, r, err)
			return
		}
		setUploadHeaders(w, res.(*transfer.ArtifactUpload))
		WriteData(w, http.StatusOK, res)
		return
	}
	res, err := h.call(r.Context(), transfer.ToolArtifactRead, transfer.ArtifactRef{Sandbox: sb, Name: ref})
	if err != nil {
		WriteError(w, r, err)
		return
	}
	serveDownload(w, r, res.(*transfer.Download), false)
}

// artifactPatch appends the body at Upload-Offset (409 with the real
// offset on a mismatch). 204 while incomplete; 200 with the artifact once
// the SHA-256 checked out (422 and the upload discarded if it did not).
func (h *transferHandlers) artifactPatch(w http.ResponseWriter, r *http.Request) {
	off, err := strconv.ParseInt(r.Header.Get("Upload-Offset"), 10, 64)
	if err != nil || off < 0 {
		WriteError(w, r, fault.InvalidField("Upload-Offset", "the Upload-Offset header must hold the upload's current offset"))
		return
	}
	res, err := h.call(r.Context(), transfer.ToolArtifactWrite, transfer.ArtifactWriteArgs{Sandbox: chi.URLParam(r, "id"), ID: chi.URLParam(r, "ref"), Offset: off, Body: r.Body})
	if err != nil {
		var oe *transfer.OffsetError
		if errors.As(err, &oe) {
			w.Header().Set("Upload-Offset", strconv.FormatInt(oe.Current, 10))
		}
		WriteError(w, r, err)
		return
	}
	up := res.(*transfer.ArtifactUpload)
	setUploadHeaders(w, up)
	if !up.Complete {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	WriteData(w, http.StatusOK, up)
}

func (h *transferHandlers) artifactDelete(w http.ResponseWriter, r *http.Request) {
	ref := chi.URLParam(r, "ref")
	a := transfer.ArtifactRef{Sandbox: chi.URLParam(r, "id")}
	if isUploadID(ref) {
		a.ID = ref
	} else {
		a.Name = ref
	}
	res, err := h.call(r.Context(), transfer.ToolArtifactDelete, a)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	WriteData(w, http.StatusOK, res)
}
