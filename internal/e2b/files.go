package e2b

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/transfer"
)

// envd's file API: GET /files streams a file out (file.download), POST
// /files writes one or more (file.upload each, after e2b.fs_mkdir of a
// missing parent: envd makes parents). Both run as the sandbox user:
// E2B's user root is refused here (the transfer tools take no sudo).

// writeInfo is envd's EntryInfo of a written file.
type writeInfo struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// info is the sandbox of an in-sandbox call, by sandbox.get.
func (s *Service) info(ctx context.Context, e envdCall) (sandbox.Info, error) {
	return sandbox.ToolGet.Call(ctx, s.d.Dispatch, e.caller, sandbox.IDArgs{ID: e.sandbox})
}

func asUser(e envdCall) error {
	if e.user == "root" {
		return fault.InvalidField("username", "files are read and written as the sandbox user here (user root is not available for /files)")
	}
	return nil
}

func (s *Service) download(w http.ResponseWriter, r *http.Request) {
	e := envdOf(r.Context())
	if err := asUser(e); err != nil {
		s.writeError(w, r, err)
		return
	}
	p := absPath(r.URL.Query().Get("path"))
	d, err := transfer.ToolDownload.Call(dispatch.WithStreaming(r.Context()), s.d.Dispatch, e.caller,
		transfer.DownloadArgs{On: dispatch.On{Sandbox: e.sandbox}, Path: p})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer func() { _ = d.File.Close() }()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": d.Name()}))
	h.Set("X-Content-Type-Options", "nosniff")
	// Sandbox content on the API's origin: never rendered as a page there.
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Content-Length", strconv.FormatInt(d.Size, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.CopyN(w, d.File, d.Size)
}

func (s *Service) upload(w http.ResponseWriter, r *http.Request) {
	e := envdOf(r.Context())
	if err := asUser(e); err != nil {
		s.writeError(w, r, err)
		return
	}
	for name := range r.Header {
		if strings.HasPrefix(name, "X-Metadata-") {
			s.writeError(w, r, fault.New(fault.Invalid, "file metadata (X-Metadata-*) is not kept by sandhold"))
			return
		}
	}
	q := r.URL.Query().Get("path")
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []writeInfo
	switch mt {
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				s.writeError(w, r, fault.Wrap(fault.Invalid, err, "malformed multipart body"))
				return
			}
			if part.FormName() != "file" {
				continue
			}
			target := q
			if target == "" {
				// The part's own file name is the path (the SDK's
				// multi-file write), not only its base name.
				_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				target = dp["filename"]
			}
			wi, err := s.writeOne(r.Context(), e, target, -1, part)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			out = append(out, wi)
		}
	case "application/octet-stream", "":
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				s.writeError(w, r, fault.Wrap(fault.Invalid, err, "the body is not gzip"))
				return
			}
			defer func() { _ = zr.Close() }()
			body = zr
		}
		size := r.ContentLength
		if r.Header.Get("Content-Encoding") != "" {
			size = -1
		}
		wi, err := s.writeOne(r.Context(), e, q, size, body)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out = append(out, wi)
	default:
		s.writeError(w, r, fault.New(fault.Invalid, "POST /files takes multipart/form-data or application/octet-stream"))
		return
	}
	if len(out) == 0 {
		s.writeError(w, r, fault.New(fault.Invalid, "no file in the request (a multipart field named file)"))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// writeOne uploads body to p. A missing parent directory is made first
// (e2b.fs_mkdir) and the upload tried once more: the first try fails
// before it reads a byte of the body.
func (s *Service) writeOne(ctx context.Context, e envdCall, p string, size int64, body io.Reader) (writeInfo, error) {
	if p == "" {
		return writeInfo{}, fault.InvalidField("path", "path is required")
	}
	p = absPath(p)
	args := transfer.UploadArgs{On: dispatch.On{Sandbox: e.sandbox}, Path: p, Size: size, Body: body}
	sctx := dispatch.WithStreaming(ctx)
	_, err := transfer.ToolUpload.Call(sctx, s.d.Dispatch, e.caller, args)
	if fault.Is(err, fault.NotFound) && path.Dir(p) != p {
		if _, merr := ToolFSMkdir.Call(ctx, s.d.Dispatch, e.caller,
			FSPathArgs{On: dispatch.On{Sandbox: e.sandbox}, Path: path.Dir(p)}); merr != nil {
			return writeInfo{}, merr
		}
		_, err = transfer.ToolUpload.Call(sctx, s.d.Dispatch, e.caller, args)
	}
	if err != nil {
		return writeInfo{}, err
	}
	return writeInfo{Name: path.Base(p), Type: "file", Path: p}, nil
}
