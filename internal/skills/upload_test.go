package skills_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// TestUploadIsReadAfterTheChokepoint is row 3 of issue 29: the register
// route read up to 64 MiB of the zip into memory before the dispatcher
// ran, so a key held to file=1/m still made the server buffer every
// upload it sent. Now the zip is read by the tool's run only: a refused
// call (429 here) is answered while the client is still sending the
// body, and the server never reads it.
func TestUploadIsReadAfterTheChokepoint(t *testing.T) {
	d := daemontest.Start(t, func(c *config.Config) { c.DisableRateLimit = false })
	admin := daemontest.NewClient(t, d)
	var k struct{ Key, ID string }
	admin.JSON("POST", "/v1/keys", map[string]any{"name": "slow", "role": "agent", "rate_limits": "file=1/h"}, http.StatusCreated, &k)
	agent := admin.As(k.Key)
	sb := agent.NewSandbox(nil)
	// The key's one file operation.
	if r := agent.Do("GET", "/sandboxes/"+sb+"/v1/skills/metadatas", nil); !r.Success {
		t.Fatalf("first file call: %d %s", r.Status, r.Raw)
	}
	// An upload whose body never ends: the form's head and a bit of the
	// file, then nothing.
	pr, pw := io.Pipe()
	defer func() { _ = pw.Close() }()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, _ := mw.CreateFormFile("file", "big.zip")
		_, _ = fw.Write(bytes.Repeat([]byte("z"), 64<<10))
		// The rest would follow; the test holds it back.
	}()
	req, _ := http.NewRequest("POST", "http://"+d.Addr()+"/sandboxes/"+sb+"/v1/skills/register", pr)
	req.Header.Set("Authorization", "Bearer "+k.Key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		_ = res.Body.Close()
		done <- result{status: res.StatusCode}
	}()
	// Generous: only a server that waits for the whole body misses it.
	select {
	case r := <-done:
		if r.err != nil || r.status != http.StatusTooManyRequests {
			t.Fatalf("answer %d %v, want 429 before the body ends", r.status, r.err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("no answer while the body was still being sent: the server reads the upload before the rate limit")
	}
}

// TestUploadCountsAgainstTheQuota: the zip is streamed into the sandbox's
// workspace, so a zip larger than what is left of the quota is refused
// (413) and leaves nothing.
func TestUploadCountsAgainstTheQuota(t *testing.T) {
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	sb := cl.NewSandbox(map[string]any{"limits": map[string]any{"disk": "64MB"}})
	if res := cl.Exec(sb, "head -c 40M /dev/zero > /workspace/fill"); res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("fill: %+v", res)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "s.zip")
	_, _ = fw.Write(bytes.Repeat([]byte("q"), 40<<20)) // not even a zip: it never gets that far
	_ = mw.Close()
	r := cl.Do("POST", "/sandboxes/"+sb+"/v1/skills/register", &buf, "Content-Type", mw.FormDataContentType())
	if r.Success || r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("register past the quota: %d %s", r.Status, r.Raw)
	}
	if res := cl.Exec(sb, "df -k /workspace | tail -1; ls -A /workspace/.skills"); res.ExitCode == nil || *res.ExitCode != 0 || bytes.Contains([]byte(res.Stdout), []byte("staging")) {
		t.Fatalf("left behind: %+v", res)
	}
}
