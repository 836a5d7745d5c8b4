package transfer_test

import (
	"archive/zip"
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// fileFirstForm is AIO's TypeScript SDK's form: the file part, then the
// fields (path, extract) — the order a streamed upload cannot follow.
func fileFirstForm(name string, content []byte, fields ...string) (*bytes.Buffer, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(content)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	_ = mw.Close()
	return &buf, mw.FormDataContentType()
}

// TestUploadFileBeforePath: a form whose file comes before its path lands
// at that path (on the workspace, on /tmp, unpacked with extract), never
// at the default place; nothing is left in the staging area; a path the
// policy refuses is refused with the staged file gone too.
func TestUploadFileBeforePath(t *testing.T) {
	s := start(t)
	id := s.sandbox("64MB")
	s.sh(id, "mkdir -p /workspace/ts")
	prefix := "/sandboxes/" + id
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("inner/z.txt")
	_, _ = w.Write([]byte("zipped\n"))
	_ = zw.Close()
	cases := []struct {
		name    string
		file    string
		content []byte
		fields  []string
		want    string // file_path of the answer
		check   string // a command whose output must be "ok"
	}{
		{"path after the file", "blob", []byte("typescript\n"), []string{"path", "/workspace/ts/up.txt"}, "/workspace/ts/up.txt",
			"test \"$(cat /workspace/ts/up.txt)\" = typescript && test ! -e /workspace/blob && echo ok"},
		{"a directory after the file", "named.txt", []byte("dir\n"), []string{"path", "/workspace/ts/"}, "/workspace/ts/named.txt",
			"test \"$(cat /workspace/ts/named.txt)\" = dir && echo ok"},
		{"on another file system", "blob", []byte("tmpfs\n"), []string{"path", "/tmp/up.txt"}, "/tmp/up.txt",
			"test \"$(cat /tmp/up.txt)\" = tmpfs && echo ok"},
		{"extract after the file", "a.zip", zb.Bytes(), []string{"path", "/workspace/unz", "extract", "true"}, "/workspace/unz",
			"test \"$(cat /workspace/unz/inner/z.txt)\" = zipped && test ! -e /workspace/a.zip && echo ok"},
		{"no path at all", "plain.txt", []byte("default\n"), nil, "/workspace/plain.txt",
			"test \"$(cat /workspace/plain.txt)\" = default && echo ok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, ct := fileFirstForm(c.file, c.content, c.fields...)
			var res uploadResult
			st, msg := s.call("POST", prefix+"/v1/file/upload", body, map[string]string{"Content-Type": ct}, &res)
			if st != http.StatusOK || !res.Success || res.FilePath != c.want {
				t.Fatalf("upload: %d %s %+v, want %s", st, msg, res, c.want)
			}
			if out := strings.TrimSpace(s.sh(id, c.check)); out != "ok" {
				t.Fatalf("%s: %q", c.check, out)
			}
		})
	}
	body, ct := fileFirstForm("blob", []byte("SECRET=1\n"), "path", "/workspace/.env")
	if st, msg := s.call("POST", prefix+"/v1/file/upload", body, map[string]string{"Content-Type": ct}, nil); st == http.StatusOK && !strings.Contains(msg, "refused") {
		t.Fatalf("a file before a refused path: %d %q, want a refusal", st, msg)
	}
	if out := strings.TrimSpace(s.sh(id, "test ! -e /workspace/.env && test ! -e /workspace/blob && ls -A /workspace/.sandhold-uploads | wc -l")); out != "0" {
		t.Fatalf("after the uploads the staging area holds %q files (or a refused file landed)", out)
	}
}
