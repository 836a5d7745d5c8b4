package transfer_test

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/testenv"
)

func requireServer(t *testing.T) {
	t.Helper()
	testenv.SkipShort(t, "starts a server with sandboxes")
	if os.Geteuid() != 0 {
		t.Skip("the end-to-end tests start sandboxes, which need root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("the workspace quota needs loop devices:", err)
	}
}

type srv struct {
	t    *testing.T
	base string
	key  string
	c    *http.Client
	cl   *daemontest.Client
}

func start(t *testing.T) *srv {
	t.Helper()
	requireServer(t)
	d := daemontest.Start(t, func(c *config.Config) { c.DisableRateLimit = false; c.WarmPool = 0 })
	hc := &http.Client{Timeout: 5 * time.Minute}
	cl := daemontest.NewClient(t, d)
	cl.HTTP = hc
	return &srv{t: t, base: cl.Base, key: cl.Key, c: hc, cl: cl}
}

func (s *srv) req(method, path string, body io.Reader, hdr map[string]string) *http.Response {
	s.t.Helper()
	r, err := http.NewRequest(method, s.base+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+s.key)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	resp, err := s.c.Do(r)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// call does a request and decodes the envelope's data.
func (s *srv) call(method, path string, body io.Reader, hdr map[string]string, out any) (int, string) {
	s.t.Helper()
	resp := s.req(method, path, body, hdr)
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Success bool            `json:"success"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &env); err != nil {
			s.t.Fatalf("%s %s: %d %q", method, path, resp.StatusCode, b)
		}
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(env.Data, out); err != nil {
			s.t.Fatalf("decode %s: %v", env.Data, err)
		}
	}
	return resp.StatusCode, env.Message
}

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

var jsonHdr = map[string]string{"Content-Type": "application/json"}

// sandbox creates a sandbox with a disk quota and returns its id.
func (s *srv) sandbox(disk string) string {
	s.t.Helper()
	return s.cl.NewSandbox(map[string]any{"limits": map[string]any{"disk": disk}})
}

// sh runs a command in sandbox id and returns its stdout.
func (s *srv) sh(id, cmd string) string {
	s.t.Helper()
	res := s.cl.Exec(id, cmd)
	return res.Stdout + res.Stderr
}

// multipartBody streams a form with "path" first and then "file".
func multipartBody(path, filename string, content io.Reader) (io.Reader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		if path != "" {
			_ = mw.WriteField("path", path)
		}
		fw, _ := mw.CreateFormFile("file", filename)
		if _, err := io.Copy(fw, content); err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(mw.Close())
	}()
	return pr, mw.FormDataContentType()
}

type uploadResult struct {
	FilePath  string `json:"file_path"`
	FileSize  int64  `json:"file_size"`
	Success   bool   `json:"success"`
	Extracted *struct {
		Files int   `json:"files"`
		Bytes int64 `json:"bytes"`
	} `json:"extracted"`
}

func (s *srv) upload(prefix, path, name string, content []byte, query string) (int, string, uploadResult) {
	s.t.Helper()
	body, ct := multipartBody(path, name, bytes.NewReader(content))
	var res uploadResult
	st, msg := s.call("POST", prefix+"/v1/file/upload"+query, body, map[string]string{"Content-Type": ct}, &res)
	return st, msg, res
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(b)
	return b
}

func TestUploadDownloadRangeRoundTrip(t *testing.T) {
	s := start(t)
	id := s.sandbox("256MB")
	prefix := "/sandboxes/" + id
	data := randomBytes(3<<20 + 17)
	st, msg, res := s.upload(prefix, "/workspace/", "blob.bin", data, "")
	if st != 200 || res.FilePath != "/workspace/blob.bin" || res.FileSize != int64(len(data)) || !res.Success {
		t.Fatalf("upload: %d %s %+v", st, msg, res)
	}
	// The file belongs to the sandbox user and no temp file is left.
	if out := s.sh(id, "stat -c '%u %s' /workspace/blob.bin; ls -A /workspace"); out != fmt.Sprintf("1000 %d\nblob.bin\n", len(data)) {
		t.Fatalf("in the sandbox: %q", out)
	}
	get := func(rng string) (int, http.Header, []byte) {
		hdr := map[string]string{}
		if rng != "" {
			hdr["Range"] = rng
		}
		resp := s.req("GET", prefix+"/v1/file/download?path=/workspace/blob.bin", nil, hdr)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, b
	}
	cases := []struct {
		name, rng  string
		status     int
		want       []byte
		contentRng string
	}{
		{"whole", "", 200, data, ""},
		{"middle", "bytes=1000-1999", 206, data[1000:2000], fmt.Sprintf("bytes 1000-1999/%d", len(data))},
		{"suffix", "bytes=-10", 206, data[len(data)-10:], fmt.Sprintf("bytes %d-%d/%d", len(data)-10, len(data)-1, len(data))},
		{"open end", fmt.Sprintf("bytes=%d-", len(data)-5), 206, data[len(data)-5:], ""},
		{"past the end", fmt.Sprintf("bytes=%d-", len(data)+5), 416, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, hdr, b := get(c.rng)
			if status != c.status {
				t.Fatalf("status %d, want %d", status, c.status)
			}
			if c.want != nil && !bytes.Equal(b, c.want) {
				t.Fatalf("got %d bytes, want %d (content differs)", len(b), len(c.want))
			}
			if c.contentRng != "" && hdr.Get("Content-Range") != c.contentRng {
				t.Fatalf("Content-Range %q, want %q", hdr.Get("Content-Range"), c.contentRng)
			}
		})
	}
	// The routes are in the OpenAPI document.
	resp0 := s.req("GET", "/openapi.json", nil, nil)
	doc, _ := io.ReadAll(resp0.Body)
	_ = resp0.Body.Close()
	for _, p := range []string{`"/v1/file/upload"`, `"/v1/file/download"`, `"/v1/file/extract"`, `"/v1/file/archive"`, `"/v1/artifacts"`, `"/v1/artifacts/{ref}"`} {
		if !bytes.Contains(doc, []byte(p)) {
			t.Errorf("openapi.json lacks %s", p)
		}
	}
	// The default sandbox route and a named target path.
	if st, msg, res := s.upload("", "/workspace/named.txt", "ignored.txt", []byte("hello"), ""); st != 200 || res.FilePath != "/workspace/named.txt" {
		t.Fatalf("default-sandbox upload: %d %s %+v", st, msg, res)
	}
	resp := s.req("GET", "/v1/file/download?path=/workspace/named.txt", nil, nil)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(b) != "hello" {
		t.Fatalf("default-sandbox download: %q", b)
	}
	// Bad input gets a 4xx, never a file outside the target.
	for _, bad := range []struct{ name, path string }{
		{"relative", "workspace/x"},
		{"dot-dot", "/workspace/../etc/x"},
		{"encoded dot-dot", "/workspace/%2e%2e/x"},
		{"read-only tree", "/usr/x"},
		{"missing parent", "/workspace/no/such/dir/x"},
	} {
		if st, _, _ := s.upload(prefix, bad.path, "x", []byte("x"), ""); st < 400 || st >= 500 {
			t.Errorf("upload to %s (%s): status %d", bad.path, bad.name, st)
		}
	}
	if out := s.sh(id, "ls -A /workspace"); out != "blob.bin\n" {
		t.Fatalf("after refused uploads: %q", out)
	}
	// The sensitive-path policy, on the path as given and as resolved in
	// the sandbox (a symlink made with the shell), the same answer whether
	// or not the file exists.
	s.sh(id, "mkdir -p /workspace/.ssh && echo k > /workspace/.ssh/id_ed25519 && ln -s /etc/shadow /workspace/shadow && ln -s .ssh /workspace/keys")
	for _, p := range []string{"/workspace/.env", "/workspace/.ssh/id_ed25519", "/workspace/.ssh/missing", "/workspace/shadow", "/workspace/keys/id_ed25519", "/workspace/keys/config", "/proc/self/environ"} {
		if st, msg := s.call("GET", prefix+"/v1/file/download?path="+p, nil, nil, nil); st != 403 || strings.Contains(msg, "/etc/shadow") && p != "/etc/shadow" {
			t.Errorf("download %s: %d %s", p, st, msg)
		}
	}
	for _, p := range []string{"/workspace/.env", "/workspace/keys/new", "/workspace/shadow"} {
		if st, msg, _ := s.upload(prefix, p, "x", []byte("x"), ""); st != 403 {
			t.Errorf("upload %s: %d %s", p, st, msg)
		}
	}
	if st, msg, _ := s.upload(prefix, "/workspace/.ssh/", "authorized_keys", []byte("x"), ""); st != 403 {
		t.Errorf("upload into .ssh/: %d %s", st, msg)
	}
	// An archive of a tree holding a sensitive file is refused, naming it.
	if st, msg := s.call("GET", prefix+"/v1/file/archive?path=/workspace", nil, nil, nil); st != 403 || !strings.Contains(msg, "sensitive_path") || !strings.Contains(msg, ".ssh") {
		t.Errorf("archive of a tree with .ssh: %d %s", st, msg)
	}
	s.sh(id, "rm -r /workspace/.ssh /workspace/shadow /workspace/keys")
	// A directory is refused with a pointer to the archive route, which
	// streams it out.
	if st, _ := s.call("GET", prefix+"/v1/file/download?path=/workspace", nil, nil, nil); st != 400 {
		t.Fatalf("download of a directory: %d", st)
	}
	resp = s.req("GET", prefix+"/v1/file/archive?path=/workspace&format=zip", nil, nil)
	zb, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	zr, err := zip.NewReader(bytes.NewReader(zb), int64(len(zb)))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("archive: %d %v", resp.StatusCode, err)
	}
	if len(zr.File) != 1 || zr.File[0].Name != "blob.bin" || zr.File[0].UncompressedSize64 != uint64(len(data)) {
		t.Fatalf("archive entries: %+v", zr.File)
	}
}

func TestUploadBeyondQuotaLeavesNothing(t *testing.T) {
	s := start(t)
	id := s.sandbox("32MB")
	prefix := "/sandboxes/" + id
	big := bytes.Repeat([]byte("q"), 48<<20)
	const avail = "df -k /workspace | tail -1 | awk '{print $4}'"
	before := s.sh(id, avail)
	for _, c := range []struct {
		name    string
		chunked bool
	}{{"announced size", false}, {"chunked, size unknown", true}} {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(big)
			if c.chunked {
				body = io.MultiReader(bytes.NewReader(big)) // hides the length
			}
			var res uploadResult
			st, msg := s.call("POST", prefix+"/v1/file/upload?path=/workspace/big.bin", body, map[string]string{"Content-Type": "application/octet-stream"}, &res)
			if st != 413 {
				t.Fatalf("status %d (%s), want 413", st, msg)
			}
			if out := s.sh(id, "ls -A /workspace; "+avail); out != before {
				t.Fatalf("after the refused upload: %q (want an empty workspace with its space back)", out)
			}
		})
	}
	// An upload that fits still works after the refusals.
	if st, msg, _ := s.upload(prefix, "/workspace/ok.bin", "ok.bin", big[:8<<20], ""); st != 200 {
		t.Fatalf("upload within the quota: %d %s", st, msg)
	}
}

// Hostile archives, built here, through the HTTP routes end to end.
func TestHostileArchivesOverHTTP(t *testing.T) {
	s := start(t)
	id := s.sandbox("512MB")
	prefix := "/sandboxes/" + id
	zipOf := func(ents map[string]string) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for name, body := range ents {
			w, _ := zw.Create(name)
			_, _ = w.Write([]byte(body))
		}
		_ = zw.Close()
		return b.Bytes()
	}
	type tent struct {
		name, link, body string
		typ              byte
	}
	tarOf := func(ents ...tent) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, e := range ents {
			h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.body))}
			if e.typ == tar.TypeSymlink || e.typ == tar.TypeDir {
				h.Size = 0
			}
			_ = tw.WriteHeader(h)
			_, _ = tw.Write([]byte(e.body))
		}
		_ = tw.Close()
		return b.Bytes()
	}
	var zeros bytes.Buffer
	zw := zip.NewWriter(&zeros)
	w, _ := zw.Create("zeros")
	_, _ = w.Write(make([]byte, 64<<20))
	_ = zw.Close()

	cases := []struct {
		name   string
		data   []byte
		status int
		reason string
	}{
		{"zip-slip", zipOf(map[string]string{"../../escape.txt": "x"}), 400, "parent_component"},
		{"absolute", tarOf(tent{name: "/etc/evil", body: "x", typ: tar.TypeReg}), 400, "absolute_path"},
		{"symlink then write", tarOf(tent{name: "a", link: "/etc", typ: tar.TypeSymlink}, tent{name: "a/passwd", body: "x", typ: tar.TypeReg}), 403, "symlink"},
		{"hardlink out", tarOf(tent{name: "h", link: "/etc/shadow", typ: tar.TypeLink}), 403, "hardlink_refused"},
		{"ratio bomb", zeros.Bytes(), 413, "ratio_exceeded"},
		{"setuid only stripped", tarOf(tent{name: "ok.txt", body: "fine", typ: tar.TypeReg}), 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dest := "/workspace/x-" + strings.ReplaceAll(c.name, " ", "-")
			st, msg, res := s.upload(prefix, dest, "a", c.data, "?extract=true")
			if st != c.status {
				t.Fatalf("status %d (%s), want %d", st, msg, c.status)
			}
			if c.reason != "" && !strings.Contains(msg, c.reason) {
				t.Fatalf("message %q does not name the rule %s", msg, c.reason)
			}
			if c.status == 200 && (res.Extracted == nil || res.Extracted.Files != 1) {
				t.Fatalf("extracted: %+v", res.Extracted)
			}
		})
	}
	// A refused archive leaves no file: only the accepted one's directory
	// exists, and nothing escaped.
	if out := s.sh(id, "ls -A /workspace; ls /etc/evil /escape.txt /workspace/../escape.txt 2>/dev/null | wc -l"); out != "x-setuid-only-stripped\n0\n" {
		t.Fatalf("after the hostile archives: %q", out)
	}

	// The extract route, on an archive already in the sandbox: a
	// 1,000,000-entry tar.gz is refused at entry 10,001, nothing written.
	var mb bytes.Buffer
	bw := bufio.NewWriterSize(&mb, 1<<20)
	gz, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	h := &tar.Header{Typeflag: tar.TypeReg, Mode: 0o644}
	for i := range 1_000_000 {
		h.Name = "f" + strconv.Itoa(i)
		_ = tw.WriteHeader(h)
	}
	_ = tw.Close()
	_ = gz.Close()
	_ = bw.Flush()
	if st, msg, _ := s.upload(prefix, "/workspace/million.tar.gz", "m", mb.Bytes(), ""); st != 200 {
		t.Fatalf("upload the million-entry archive: %d %s", st, msg)
	}
	st, msg := s.call("POST", prefix+"/v1/file/extract", jsonBody(map[string]string{"path": "/workspace/million.tar.gz", "dest": "/workspace/million"}), jsonHdr, nil)
	if st != 413 || !strings.Contains(msg, "too_many_entries") || !strings.Contains(msg, "f10000") {
		t.Fatalf("million entries: %d %s", st, msg)
	}
	if out := s.sh(id, "ls -A /workspace"); out != "million.tar.gz\nx-setuid-only-stripped\n" {
		t.Fatalf("after the million-entry refusal: %q", out)
	}
	// A good tar.gz through the extract route.
	var gb bytes.Buffer
	gz = gzip.NewWriter(&gb)
	_, _ = gz.Write(tarOf(tent{name: "d/", typ: tar.TypeDir}, tent{name: "d/f.txt", body: "hi", typ: tar.TypeReg}))
	_ = gz.Close()
	if st, msg, _ := s.upload(prefix, "/workspace/good.tar.gz", "g", gb.Bytes(), ""); st != 200 {
		t.Fatalf("upload: %d %s", st, msg)
	}
	var xr struct {
		Files int `json:"files"`
	}
	if st, msg := s.call("POST", prefix+"/v1/file/extract", jsonBody(map[string]string{"path": "/workspace/good.tar.gz", "dest": "/workspace/good"}), jsonHdr, &xr); st != 200 || xr.Files != 1 {
		t.Fatalf("extract: %d %s %+v", st, msg, xr)
	}
	if out := s.sh(id, "cat /workspace/good/d/f.txt"); out != "hi" {
		t.Fatalf("extracted content: %q", out)
	}
	// Every refusal is audited with its rule; successes with their counts.
	var audit struct {
		Records []struct {
			Action  string         `json:"action"`
			Verdict string         `json:"verdict"`
			Detail  map[string]any `json:"detail"`
		} `json:"records"`
	}
	if st, msg := s.call("GET", "/v1/audit?action=file", nil, nil, &audit); st != 200 {
		t.Fatalf("audit: %d %s", st, msg)
	}
	seen := map[string]bool{}
	for _, r := range audit.Records {
		if e, ok := r.Detail["error"].(string); ok && r.Verdict == "error" {
			for _, rule := range []string{"parent_component", "absolute_path", "hardlink_refused", "ratio_exceeded", "too_many_entries"} {
				if strings.Contains(e, rule) {
					seen[r.Action+" "+rule] = true
				}
			}
		}
		if r.Action == "file.extract" && r.Verdict == "allowed" && r.Detail["files"] == float64(1) && r.Detail["sandbox_id"] == id {
			seen["file.extract ok"] = true
		}
	}
	for _, want := range []string{"file.upload parent_component", "file.upload absolute_path", "file.upload hardlink_refused",
		"file.upload ratio_exceeded", "file.extract too_many_entries", "file.extract ok"} {
		if !seen[want] {
			t.Errorf("no audit record for %s", want)
		}
	}
}

type upload struct {
	ID       string `json:"id"`
	Offset   int64  `json:"offset"`
	Length   int64  `json:"length"`
	Complete bool   `json:"complete"`
	Path     string `json:"path"`
}

// patchDropped sends a PATCH that announces the whole rest but hangs up
// after n bytes, like a client whose connection died.
func (s *srv) patchDropped(path string, off int64, rest []byte, n int) {
	s.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		s.t.Fatal(err)
	}
	_, _ = fmt.Fprintf(conn, "PATCH %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nUpload-Offset: %d\r\nContent-Type: application/offset+octet-stream\r\nContent-Length: %d\r\n\r\n", path, s.key, off, len(rest))
	if _, err := conn.Write(rest[:n]); err != nil {
		s.t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the server write what arrived
	_ = conn.Close()
}

func TestResumableArtifactUpload(t *testing.T) {
	s := start(t)
	id := s.sandbox("256MB")
	base := "/sandboxes/" + id + "/v1/artifacts"
	data := randomBytes(10<<20 + 3)
	sum := sha256.Sum256(data)
	var up upload
	if st, msg := s.call("POST", base, jsonBody(map[string]any{"name": "data.bin", "length": len(data), "sha256": hex.EncodeToString(sum[:])}), jsonHdr, &up); st != 201 || up.ID == "" {
		t.Fatalf("create: %d %s", st, msg)
	}
	loc := base + "/" + up.ID
	head := func() int64 {
		resp := s.req("HEAD", loc, nil, nil)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("HEAD: %d", resp.StatusCode)
		}
		off, _ := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
		return off
	}
	// The connection drops 4 MiB into the first PATCH; what arrived is kept.
	s.patchDropped(loc, 0, data, 4<<20)
	off := head()
	if off <= 0 || off > 4<<20 {
		t.Fatalf("offset after the dropped PATCH: %d", off)
	}
	// A PATCH at the wrong offset is refused with the real one.
	resp := s.req("PATCH", loc, bytes.NewReader(data[:10]), map[string]string{"Upload-Offset": "0"})
	_ = resp.Body.Close()
	if resp.StatusCode != 409 || resp.Header.Get("Upload-Offset") != strconv.FormatInt(off, 10) {
		t.Fatalf("wrong offset: %d Upload-Offset %q", resp.StatusCode, resp.Header.Get("Upload-Offset"))
	}
	// Resume: one more partial PATCH, then the rest.
	mid := off + 1<<20
	resp = s.req("PATCH", loc, bytes.NewReader(data[off:mid]), map[string]string{"Upload-Offset": strconv.FormatInt(off, 10)})
	_ = resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Upload-Offset") != strconv.FormatInt(mid, 10) {
		t.Fatalf("resume: %d %q", resp.StatusCode, resp.Header.Get("Upload-Offset"))
	}
	var done upload
	if st, msg := s.call("PATCH", loc, bytes.NewReader(data[mid:]), map[string]string{"Upload-Offset": strconv.FormatInt(mid, 10)}, &done); st != 200 || !done.Complete || done.Path != "/workspace/.artifacts/data.bin" {
		t.Fatalf("final PATCH: %d %s %+v", st, msg, done)
	}
	// Range download and listing with sizes.
	resp = s.req("GET", base+"/data.bin", nil, map[string]string{"Range": "bytes=5000000-5000099"})
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 206 || !bytes.Equal(b, data[5000000:5000100]) {
		t.Fatalf("range read: %d, %d bytes", resp.StatusCode, len(b))
	}
	var list struct {
		Artifacts []struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"artifacts"`
		Uploads []upload `json:"uploads"`
	}
	if st, _ := s.call("GET", base, nil, nil, &list); st != 200 || len(list.Artifacts) != 1 || list.Artifacts[0].Size != int64(len(data)) || len(list.Uploads) != 0 {
		t.Fatalf("list: %d %+v", st, list)
	}

	// A content that does not match the declared SHA-256 is refused and
	// the upload discarded.
	var bad upload
	if st, msg := s.call("POST", base, jsonBody(map[string]any{"name": "bad.bin", "length": 1000, "sha256": strings.Repeat("ab", 32)}), jsonHdr, &bad); st != 201 {
		t.Fatalf("create: %d %s", st, msg)
	}
	if st, msg := s.call("PATCH", base+"/"+bad.ID, bytes.NewReader(data[:1000]), map[string]string{"Upload-Offset": "0"}, nil); st != 422 || !strings.Contains(msg, "SHA-256 mismatch") {
		t.Fatalf("mismatch: %d %s", st, msg)
	}
	if st, _ := s.call("GET", base+"/"+bad.ID, nil, nil, nil); st != 404 {
		t.Fatalf("the refused upload still exists: %d", st)
	}
	if out := s.sh(id, "ls -A /workspace/.artifacts /workspace/.artifacts/.uploads"); !strings.Contains(out, "data.bin") || strings.Contains(out, "bad.bin") || strings.Contains(out, ".part") {
		t.Fatalf("artifact store: %q", out)
	}
	// An artifact larger than the quota is refused at creation.
	if st, _ := s.call("POST", base, jsonBody(map[string]any{"name": "huge.bin", "length": 1 << 40, "sha256": strings.Repeat("00", 32)}), jsonHdr, nil); st != 413 {
		t.Fatalf("huge artifact: %d", st)
	}
}

// change_policy=abort: a file that keeps changing is never delivered
// whole — the download is refused (409) or cut short.
func TestDownloadAbortsWhenTheFileChanges(t *testing.T) {
	s := start(t)
	id := s.sandbox("256MB")
	prefix := "/sandboxes/" + id
	if st, msg, _ := s.upload(prefix, "/workspace/moving.bin", "m", randomBytes(32<<20), ""); st != 200 {
		t.Fatalf("upload: %d %s", st, msg)
	}
	// Unchanged: the whole file.
	resp := s.req("GET", prefix+"/v1/file/download?path=/workspace/moving.bin&change_policy=abort", nil, nil)
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || len(b) != 32<<20 {
		t.Fatalf("unchanged file: %d %d %v", resp.StatusCode, len(b), err)
	}
	// Changed while being read: start, read a little, change, read on.
	resp = s.req("GET", prefix+"/v1/file/download?path=/workspace/moving.bin&change_policy=abort", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("start: %d", resp.StatusCode)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	s.sh(id, "echo more >> /workspace/moving.bin")
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err == nil {
		t.Fatalf("the changed file was delivered whole (%d more bytes)", n)
	}
	// ignore (the default) delivers what it reads.
	resp = s.req("GET", prefix+"/v1/file/download?path=/workspace/moving.bin&change_policy=nonsense", nil, nil)
	_ = resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("bad change_policy: %d", resp.StatusCode)
	}
}
