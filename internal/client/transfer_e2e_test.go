package client

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// cancelAfter is a progress writer that cancels a copy once a plain line
// reports more than 0 and less than all bytes.
type cancelAfter struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	buf    bytes.Buffer
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(string(p), "progress ") && !strings.HasPrefix(string(p), "progress 0/") {
		c.cancel()
	}
	return len(p), nil
}

// TestUploadOfAChangedFileStartsOver: an upload interrupted, then its
// file changed, must not continue the old bytes: the old upload is
// dropped on the server and the new content is sent whole and checked.
func TestUploadOfAChangedFileStartsOver(t *testing.T) {
	d := daemontest.Start(t, nil)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	c, err := New(Config{URL: "http://" + d.Addr(), Key: d.AdminKey()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sb, err := c.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "f.bin")
	if err := os.WriteFile(src, bytes.Repeat([]byte("a"), 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	w := &cancelAfter{cancel: cancel}
	_, err = c.Upload(cctx, sb.ID, src, "/workspace/f.bin", CopyOptions{Progress: w, LimitRate: 1 << 20})
	if err == nil {
		t.Fatalf("the upload was not interrupted: %s", w.buf.String())
	}
	var before struct {
		Uploads []struct{ ID string } `json:"uploads"`
	}
	if err := c.call(ctx, http.MethodGet, artifactPath(sb.ID, ""), nil, nil, &before); err != nil || len(before.Uploads) != 1 {
		t.Fatalf("uploads after the interruption: %+v %v", before, err)
	}

	// Same size, other content, later mtime.
	if err := os.WriteFile(src, bytes.Repeat([]byte("b"), 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(src, later, later); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	res, err := c.Upload(ctx, sb.ID, src, "/workspace/f.bin", CopyOptions{Log: &log})
	if err != nil {
		t.Fatalf("second upload: %v (%s)", err, log.String())
	}
	if !strings.Contains(log.String(), "changed since the interrupted upload: starting over") || res.ResumedAt != 0 {
		t.Fatalf("did not start over: resumed at %d, log %q", res.ResumedAt, log.String())
	}
	sum, err := c.remoteSHA256(ctx, sb.ID, "/workspace/f.bin")
	if err != nil || sum != res.SHA256 || sum != sha256Hex(bytes.Repeat([]byte("b"), 4<<20)) {
		t.Fatalf("in the sandbox: %s %v, copied %s", sum, err, res.SHA256)
	}
	var after struct {
		Uploads []struct{ ID string } `json:"uploads"`
	}
	if err := c.call(ctx, http.MethodGet, artifactPath(sb.ID, ""), nil, nil, &after); err != nil || len(after.Uploads) != 0 {
		t.Fatalf("the abandoned upload was left on the server: %+v %v", after, err)
	}
}

// TestArtifactDeleteSaysWhatItRemoved: DELETE /v1/artifacts/{ref} answers
// the upload it removed, and a second delete of it is not found.
func TestArtifactDeleteSaysWhatItRemoved(t *testing.T) {
	d := daemontest.Start(t, nil)
	c, err := New(Config{URL: "http://" + d.Addr(), Key: d.AdminKey()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sb, err := c.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var up struct{ ID string }
	body := map[string]any{"name": "to-delete", "length": 3, "sha256": sha256Hex([]byte("abc"))}
	if err := c.call(ctx, http.MethodPost, artifactPath(sb.ID, ""), nil, body, &up); err != nil || up.ID == "" {
		t.Fatalf("start an upload: %+v %v", up, err)
	}
	var del struct {
		Deleted string `json:"deleted"`
	}
	if err := c.call(ctx, http.MethodDelete, artifactPath(sb.ID, up.ID), nil, nil, &del); err != nil || del.Deleted != up.ID {
		t.Fatalf("delete answered %+v %v, want deleted %q", del, err, up.ID)
	}
	err = c.call(ctx, http.MethodDelete, artifactPath(sb.ID, up.ID), nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no such artifact upload") {
		t.Fatalf("second delete: %v, want not found", err)
	}
}
