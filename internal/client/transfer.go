package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Copy settings, with their reasons.
const (
	// patchChunk is the most one PATCH carries: each PATCH is one file
	// operation against the key's rate limit (100/min by default), so
	// chunks are large; an interrupted one loses nothing the server wrote.
	patchChunk = 64 << 20
	// maxRateLimitWaits bounds how often one copy waits out a 429 before
	// giving up (each wait is the server's Retry-After, at most a minute).
	maxRateLimitWaits = 10
	// maxRetryAfter caps one wait, whatever the server asks.
	maxRetryAfter = 60 * time.Second
	// copyBuf is the read size of a copy (and the rate limiter's burst).
	copyBuf = 256 << 10
	// partSuffix marks a download in progress beside its target.
	partSuffix = ".sandhold-part"
)

// CopyOptions tune a copy.
type CopyOptions struct {
	// Progress receives the progress report (nil: none).
	Progress io.Writer
	// TTY draws a bar in place instead of plain lines.
	TTY bool
	// LimitRate caps the bytes per second sent or received (0: none).
	LimitRate int64
	// Log receives one-line notes (resuming, waiting out a rate limit).
	Log io.Writer
}

func (o CopyOptions) logf(format string, args ...any) {
	if o.Log != nil {
		_, _ = fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// CopyResult is a finished copy.
type CopyResult struct {
	// Path is where the file is now (in the sandbox or locally).
	Path   string
	Bytes  int64
	SHA256 string
	// ResumedAt is the offset an interrupted copy continued from (0: new).
	ResumedAt int64
}

// resumeState is what an interrupted copy leaves in the user cache dir.
type resumeState struct {
	UploadID string `json:"upload_id,omitempty"`
	Name     string `json:"name,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	ETag     string `json:"etag,omitempty"`
	Size     int64  `json:"size"`
	// MTime is the local file's modification time (uploads): with Size,
	// it tells a changed file from the one the upload began with.
	MTime int64 `json:"mtime,omitempty"`
}

// stateFile is the resume state of one copy, keyed by what makes it the
// same copy (server, sandbox, both ends).
func stateFile(parts ...string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache dir: %w", err)
	}
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return filepath.Join(dir, "sandhold", "transfers", hex.EncodeToString(h.Sum(nil))[:32]+".json"), nil
}

func loadState(p string) (resumeState, bool) {
	var s resumeState
	b, err := os.ReadFile(p) // #nosec G304 -- our own file under the user cache dir
	if err != nil || json.Unmarshal(b, &s) != nil {
		return resumeState{}, false
	}
	return s, true
}

func saveState(p string, s resumeState) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("keep resume state: %w", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return writeFileAtomic(p, b)
}

// countingReader counts and optionally throttles what is read through it.
type countingReader struct {
	ctx  context.Context
	r    io.Reader
	lim  *rate.Limiter
	prog *Progress
}

func (c *countingReader) Read(p []byte) (int, error) {
	if len(p) > copyBuf {
		p = p[:copyBuf]
	}
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if n > 0 {
		if c.lim != nil {
			if werr := c.lim.WaitN(c.ctx, n); werr != nil {
				return 0, werr
			}
		}
		if c.prog != nil {
			c.prog.Add(int64(n))
		}
	}
	return n, err
}

func limiter(bps int64) *rate.Limiter {
	if bps <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(bps), copyBuf)
}

func artifactPath(sb, ref string) string {
	p := aioPath(sb) + "/v1/artifacts"
	if ref != "" {
		p += "/" + url.PathEscape(ref)
	}
	return p
}

// waitRetry sleeps out a 429's Retry-After; false when it should not be
// retried (not a 429, too many waits, or ctx done).
func waitRetry(ctx context.Context, err error, waits *int, o CopyOptions) bool {
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || *waits >= maxRateLimitWaits {
		return false
	}
	*waits++
	d := min(max(e.RetryAfter, time.Second), maxRetryAfter)
	o.logf("rate limited by the server: waiting %s", d)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// Upload copies the local file src to dest in sandbox sb over the
// resumable artifact protocol: the server checks the SHA-256 of the whole
// content, then the artifact is moved to dest (a directory, with a
// trailing slash or existing, gets src's base name). Interrupted, it
// leaves its state in the user cache dir and the next identical Upload
// continues where the server stands.
func (c *Client) Upload(ctx context.Context, sb, src, dest string, o CopyOptions) (CopyResult, error) {
	f, err := os.Open(src) // #nosec G304 -- the user names the file to send
	if err != nil {
		return CopyResult{}, fmt.Errorf("open %s: %w", src, err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return CopyResult{}, err
	}
	if !st.Mode().IsRegular() {
		return CopyResult{}, fmt.Errorf("%s is not a regular file (copy directories as an archive: tar czf x.tgz DIR)", src)
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return CopyResult{}, err
	}
	dest = RemotePath(dest)
	size := st.Size()
	mtime := st.ModTime().UnixNano()
	sp, err := stateFile("upload", c.base.String(), sb, abs, dest)
	if err != nil {
		return CopyResult{}, err
	}
	// Where it goes is checked (a directory ending in / made) before a
	// byte is sent: an upload whose move fails at the end would sit in
	// the workspace, counted against its quota.
	if err := c.checkDest(ctx, sb, dest); err != nil {
		return CopyResult{}, err
	}
	res := CopyResult{Bytes: size}
	var up struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Offset   int64  `json:"offset"`
		SHA256   string `json:"sha256"`
		Complete bool   `json:"complete"`
		Path     string `json:"path"`
	}
	state, resumed := loadState(sp)
	if resumed && (state.Size != size || state.MTime != mtime || state.UploadID == "") {
		// The file changed since the interrupted upload: its bytes on
		// the server are of another content. Drop them and start over.
		o.logf("%s changed since the interrupted upload: starting over", src)
		c.dropUpload(ctx, sb, state.UploadID)
		resumed = false
	}
	if resumed {
		off, err := c.uploadOffset(ctx, sb, state.UploadID)
		switch {
		case err == nil:
			up.ID, up.Name, up.SHA256, up.Offset = state.UploadID, state.Name, state.SHA256, off
			res.ResumedAt = off
			o.logf("resuming the upload at byte %d of %d", off, size)
		case IsStatus(err, http.StatusNotFound):
			resumed = false // finished, expired or deleted: start over
		default:
			return CopyResult{}, notFound(err, "sandbox "+Escape(sb))
		}
	}
	if !resumed {
		sum, err := fileSHA256(ctx, f)
		if err != nil {
			return CopyResult{}, fmt.Errorf("checksum %s: %w", src, err)
		}
		// The artifact's name is the transfer's, not the file's: names
		// are restricted (A-Z a-z 0-9 . _ + -) and two copies of files
		// with the same name must not replace each other's artifact.
		name := "cli-" + strings.TrimSuffix(filepath.Base(sp), ".json")
		body := map[string]any{"name": name, "length": size, "sha256": sum}
		if err := c.call(ctx, http.MethodPost, artifactPath(sb, ""), nil, body, &up); err != nil {
			return CopyResult{}, notFound(err, "sandbox "+Escape(sb))
		}
		if err := saveState(sp, resumeState{UploadID: up.ID, Name: up.Name, SHA256: sum, Size: size, MTime: mtime}); err != nil {
			return CopyResult{}, err
		}
	}
	res.SHA256 = up.SHA256
	prog := nopProgress(o, "upload", size, up.Offset)
	lim := limiter(o.LimitRate)
	waits := 0
	off := up.Offset
	for !up.Complete {
		n := min(size-off, patchChunk)
		body := &countingReader{ctx: ctx, r: io.NewSectionReader(f, off, n), lim: lim, prog: prog}
		req, err := c.newRequest(ctx, http.MethodPatch, artifactPath(sb, up.ID), nil, body)
		if err != nil {
			return res, err
		}
		req.ContentLength = n
		if n == 0 {
			req.Body = http.NoBody
		}
		req.Header.Set("Content-Type", "application/offset+octet-stream")
		req.Header.Set("Upload-Offset", strconv.FormatInt(off, 10))
		hres, err := c.http.Do(req)
		if err != nil {
			return res, c.transportError(err)
		}
		switch hres.StatusCode {
		case http.StatusNoContent:
			_ = hres.Body.Close()
			next, err := strconv.ParseInt(hres.Header.Get("Upload-Offset"), 10, 64)
			if err != nil || next <= off || next > size {
				return res, errors.New("the server answered a PATCH without a valid Upload-Offset")
			}
			off = next
			prog.Set(off)
		case http.StatusOK:
			err := decodeEnvelope(hres.Body, &up)
			_ = hres.Body.Close()
			if err != nil {
				return res, err
			}
			if !up.Complete {
				return res, errors.New("the server answered 200 to a PATCH of an incomplete upload")
			}
		case http.StatusConflict:
			// Another client (or a retry) moved the upload on: continue
			// from where the server stands.
			_ = hres.Body.Close()
			next, err := strconv.ParseInt(hres.Header.Get("Upload-Offset"), 10, 64)
			if err != nil || next < 0 || next > size {
				return res, errors.New("the server refused the offset and named no valid one")
			}
			off = next
			prog.Set(off)
		default:
			err := errorFrom(hres)
			_ = hres.Body.Close()
			if waitRetry(ctx, err, &waits, o) {
				continue
			}
			if IsStatus(err, http.StatusUnprocessableEntity) {
				// The server discarded the upload: the content it got is
				// not what was checksummed (the file changed meanwhile).
				_ = os.Remove(sp)
				return res, fmt.Errorf("the server's SHA-256 of the upload does not match %s (did it change during the copy?); run the command again to start over", src)
			}
			// A refusal a retry would meet again (the quota, the policy):
			// the bytes sent so far would only hold the workspace's space.
			if !IsStatus(err, http.StatusNotFound) {
				c.dropUpload(context.WithoutCancel(ctx), sb, up.ID)
				_ = os.Remove(sp)
			}
			return res, notFound(err, "upload "+Escape(up.ID)+" in sandbox "+Escape(sb))
		}
	}
	prog.Finish()
	_ = os.Remove(sp)
	final, err := c.placeArtifact(ctx, sb, up.Path, dest, filepath.Base(src))
	if err != nil {
		// Not left in .artifacts, where it would hold quota nobody sees.
		if up.Name != "" {
			_ = c.call(context.WithoutCancel(ctx), http.MethodDelete, artifactPath(sb, up.Name), nil, nil, nil)
		}
		return res, fmt.Errorf("the upload is complete and checked, but moving it to %s failed (it was removed): %w", Escape(dest), err)
	}
	res.Path = final
	return res, nil
}

// dropUpload deletes an abandoned upload, best effort (if it fails, the
// bytes stay in the sandbox's .artifacts/.uploads until deleted there).
func (c *Client) dropUpload(ctx context.Context, sb, id string) {
	if !strings.HasPrefix(id, "up_") {
		return
	}
	_ = c.call(ctx, http.MethodDelete, artifactPath(sb, id), nil, nil, nil)
}

// uploadOffset asks where an upload stands (HEAD, tus-style).
func (c *Client) uploadOffset(ctx context.Context, sb, id string) (int64, error) {
	req, err := c.newRequest(ctx, http.MethodHead, artifactPath(sb, id), nil, nil)
	if err != nil {
		return 0, err
	}
	res, err := c.do(req, http.StatusOK)
	if err != nil {
		return 0, err
	}
	_ = res.Body.Close()
	off, err := strconv.ParseInt(res.Header.Get("Upload-Offset"), 10, 64)
	if err != nil || off < 0 {
		return 0, errors.New("the server named no valid Upload-Offset for the interrupted upload")
	}
	return off, nil
}

// placeScript moves $1 (the finished artifact) to $2, or into $2 as $3
// when $2 is a directory (or ends with /, then made if missing), and
// prints where it went.
// It runs as argv, so no value is ever parsed by a shell.
const placeScript = `set -e; d=$2; case $d in */) mkdir -p -- "$d"; d=$d$3 ;; *) if [ -d "$d" ]; then d=$d/$3; fi ;; esac; mv -f -- "$1" "$d"; printf '%s' "$d"`

// destScript checks, in the sandbox, the directory a copy lands in: made
// when dest ends with /, else dest itself when it is a directory, else its
// parent, which must exist; it must be writable. Exit 3: cannot be made,
// 4: not a directory, 5: not writable. It runs as argv, so no value is
// ever parsed by a shell.
const destScript = `d=$1; case $d in */) mkdir -p -- "$d" 2>/dev/null || exit 3; dir=$d ;; *) if [ -d "$d" ]; then dir=$d; else dir=$(dirname -- "$d"); fi ;; esac; [ -d "$dir" ] || exit 4; [ -w "$dir" ] || exit 5; printf '%s' "$dir"`

// checkDest runs destScript for dest in sandbox sb.
func (c *Client) checkDest(ctx context.Context, sb, dest string) error {
	r, err := c.execQuiet(ctx, sb, []string{"/bin/sh", "-c", destScript, "sh", dest})
	if err != nil {
		return err
	}
	switch r.ExitStatus() {
	case 0:
		return nil
	case 3:
		return fmt.Errorf("cannot make the directory %s in the sandbox (nothing was sent)", Escape(dest))
	case 4:
		return fmt.Errorf("the directory %s does not exist in the sandbox: make it, or end the destination with / to have cp make it (nothing was sent)", Escape(path.Dir(dest)))
	case 5:
		return fmt.Errorf("the sandbox's user cannot write to the directory of %s (nothing was sent)", Escape(dest))
	}
	return fmt.Errorf("checking %s in the sandbox failed (exit %d): %s", Escape(dest), r.ExitStatus(), oneLine(r.Stderr))
}

// placeArtifact moves the artifact at art to dest inside the sandbox.
func (c *Client) placeArtifact(ctx context.Context, sb, art, dest, base string) (string, error) {
	if dest == art {
		return art, nil
	}
	r, err := c.execQuiet(ctx, sb, []string{"/bin/sh", "-c", placeScript, "sh", art, dest, base})
	if err != nil {
		return "", err
	}
	if r.ExitStatus() != 0 {
		return "", fmt.Errorf("mv in the sandbox failed: %s", oneLine(r.Stderr))
	}
	return r.Stdout, nil
}

// execQuiet runs argv and returns its output (not streamed).
func (c *Client) execQuiet(ctx context.Context, sb string, argv []string) (ExecResult, error) {
	var r ExecResult
	waits := 0
	for {
		err := c.call(ctx, http.MethodPost, execPath(sb), nil, ExecRequest{Argv: argv}, &r)
		if err == nil {
			return r, nil
		}
		if !waitRetry(ctx, err, &waits, CopyOptions{}) {
			return r, notFound(err, "sandbox "+Escape(sb))
		}
	}
}

// RemotePath is a sandbox path as the copy commands take it: relative
// paths are under /workspace.
func RemotePath(p string) string {
	if p == "" {
		return "/workspace/"
	}
	if !strings.HasPrefix(p, "/") {
		trail := strings.HasSuffix(p, "/")
		p = path.Join("/workspace", p)
		if trail {
			p += "/"
		}
	}
	return p
}

// Download copies src in sandbox sb to the local dest (a directory gets
// src's base name), resuming an interrupted download of the same file
// (Range with If-Range on its ETag: a file changed since starts over).
// The bytes go to dest+".sandhold-part"; once all arrived, their SHA-256
// is compared with one computed in the sandbox, and only then is the
// part renamed to dest.
func (c *Client) Download(ctx context.Context, sb, src, dest string, o CopyOptions) (CopyResult, error) {
	src = RemotePath(src)
	if strings.HasSuffix(src, "/") {
		return CopyResult{}, fmt.Errorf("%s is a directory: copy one file (or fetch an archive of it)", src)
	}
	if fi, err := os.Stat(dest); (err == nil && fi.IsDir()) || strings.HasSuffix(dest, string(os.PathSeparator)) {
		dest = filepath.Join(dest, path.Base(src))
	}
	abs, err := filepath.Abs(dest)
	if err != nil {
		return CopyResult{}, err
	}
	part := abs + partSuffix
	sp, err := stateFile("download", c.base.String(), sb, src, abs)
	if err != nil {
		return CopyResult{}, err
	}
	res := CopyResult{}
	state, resumed := loadState(sp)
	var have int64
	if resumed {
		if fi, err := os.Stat(part); err == nil && fi.Mode().IsRegular() && state.ETag != "" {
			have = fi.Size()
		} else {
			resumed = false
		}
	}
	q := url.Values{"path": {src}, "change_policy": {"abort"}}
	waits := 0
	var hres *http.Response
	for {
		req, err := c.newRequest(ctx, http.MethodGet, aioPath(sb)+"/v1/file/download", q, nil)
		if err != nil {
			return res, err
		}
		if resumed && have > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
			req.Header.Set("If-Range", state.ETag)
		}
		hres, err = c.do(req, http.StatusOK, http.StatusPartialContent, http.StatusRequestedRangeNotSatisfiable)
		if err == nil {
			break
		}
		if !waitRetry(ctx, err, &waits, o) {
			return res, notFound(err, Escape(src)+" in sandbox "+Escape(sb))
		}
	}
	defer func() { _ = hres.Body.Close() }()
	flags := os.O_RDWR | os.O_CREATE
	var total int64
	switch hres.StatusCode {
	case http.StatusPartialContent:
		total = have + hres.ContentLength
		if cr := hres.Header.Get("Content-Range"); cr != "" {
			if i := strings.LastIndexByte(cr, '/'); i >= 0 {
				if n, err := strconv.ParseInt(cr[i+1:], 10, 64); err == nil {
					total = n
				}
			}
		}
		if !strings.HasPrefix(hres.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)) {
			return res, errors.New("the server resumed at another offset than asked")
		}
		res.ResumedAt = have
		o.logf("resuming the download at byte %d of %d", have, total)
	case http.StatusRequestedRangeNotSatisfiable:
		// All bytes are here already (the previous run died before the
		// check).
		total = have
		res.ResumedAt = have
	default:
		if resumed && have > 0 {
			o.logf("%s changed in the sandbox since the interrupted download: starting over", Escape(src))
		}
		have, total = 0, hres.ContentLength
		flags |= os.O_TRUNC
		state = resumeState{ETag: hres.Header.Get("ETag"), Size: total}
		if state.ETag != "" {
			if err := saveState(sp, state); err != nil {
				return res, err
			}
		}
	}
	f, err := os.OpenFile(part, flags, 0o600) // #nosec G304 -- the user names where the file goes
	if err != nil {
		return res, fmt.Errorf("open %s: %w", part, err)
	}
	defer func() { _ = f.Close() }()
	if hres.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		if _, err := f.Seek(have, io.SeekStart); err != nil {
			return res, err
		}
		prog := nopProgress(o, "download", total, have)
		body := &countingReader{ctx: ctx, r: hres.Body, lim: limiter(o.LimitRate), prog: prog}
		n, err := io.CopyBuffer(f, body, make([]byte, copyBuf))
		if err != nil {
			return res, fmt.Errorf("the download was interrupted after %d bytes (run the same command again to resume): %w", have+n, err)
		}
		if total >= 0 && have+n != total {
			return res, fmt.Errorf("the download ended after %d of %d bytes (the file changed in the sandbox?); run the same command again", have+n, total)
		}
		prog.Finish()
	}
	if err := f.Sync(); err != nil {
		return res, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return res, err
	}
	local, err := fileSHA256(ctx, f)
	if err != nil {
		return res, err
	}
	remote, err := c.remoteSHA256(ctx, sb, src)
	if err != nil {
		return res, fmt.Errorf("could not checksum %s in the sandbox (the bytes are kept in %s): %w", Escape(src), part, err)
	}
	if remote != local {
		_ = os.Remove(part)
		_ = os.Remove(sp)
		return res, fmt.Errorf("SHA-256 mismatch: the sandbox's %s is %s, the copy is %s (it changed during the copy?); run the command again", Escape(src), remote, local)
	}
	if err := f.Close(); err != nil {
		return res, err
	}
	if err := os.Rename(part, abs); err != nil {
		return res, err
	}
	_ = os.Remove(sp)
	fi, err := os.Stat(abs)
	if err != nil {
		return res, err
	}
	res.Path, res.Bytes, res.SHA256 = abs, fi.Size(), local
	return res, nil
}

// remoteSHA256 computes a file's SHA-256 inside the sandbox.
func (c *Client) remoteSHA256(ctx context.Context, sb, p string) (string, error) {
	r, err := c.execQuiet(ctx, sb, []string{"sha256sum", "--", p})
	if err != nil {
		return "", err
	}
	if r.ExitStatus() != 0 {
		return "", fmt.Errorf("sha256sum: %s", oneLine(r.Stderr))
	}
	sum, _, _ := strings.Cut(r.Stdout, " ")
	if len(sum) != 64 {
		return "", errors.New("sha256sum answered no checksum")
	}
	return sum, nil
}

func fileSHA256(ctx context.Context, f *os.File) (string, error) {
	h := sha256.New()
	if _, err := io.CopyBuffer(h, &countingReader{ctx: ctx, r: f}, make([]byte, copyBuf)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func nopProgress(o CopyOptions, label string, total, done int64) *Progress {
	w := o.Progress
	if w == nil {
		w = io.Discard
	}
	return NewProgress(w, o.TTY, label, total, done)
}
