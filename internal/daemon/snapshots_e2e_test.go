package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/testenv"
)

// snapInfo is the part of a snapshot's JSON the tests read.
type snapInfo struct {
	ID     string `json:"id"`
	Digest string `json:"digest"`
	Bytes  int64  `json:"bytes"`
}

type sbInfo struct {
	ID                string `json:"id"`
	State             string `json:"state"`
	Snapshot          string `json:"snapshot"`
	ProcessesRestored *bool  `json:"processes_restored"`
}

func (s *server) sh(key, id, cmd string) string {
	s.t.Helper()
	var out struct {
		Stdout string `json:"stdout"`
	}
	expectOK(s.t, s.do("POST", "/v1/sandboxes/"+id+"/exec", key, map[string]any{"command": cmd}, nil), 200, &out)
	return out.Stdout
}

func (s *server) raw(method, path, key string, body []byte, ctype string) (int, []byte) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// TestSnapshotsE2E: the snapshot routes end to end: take (audited with the
// digest), another tenant's 404s, fork with isolation, export and import
// (a tampered export refused), memory capture refused, a deleted source
// keeps its snapshot, hibernate and the implicit resume after a restart of
// the server.
func TestSnapshotsE2E(t *testing.T) {
	testenv.RequireSandboxes(t)
	dir := t.TempDir()
	s := start(t, dir, nil)
	a := s.createKey("a", "agent").Key
	b := s.createKey("b", "agent").Key

	var sb sbInfo
	expectOK(t, s.do("POST", "/v1/sandboxes", a, map[string]any{"limits": map[string]any{"disk": "64MB"}}, nil), 201, &sb)
	s.sh(a, sb.ID, "echo hello > f && dd if=/dev/urandom of=r bs=1M count=3 2>/dev/null && sha256sum r > r.sum")

	var snap snapInfo
	expectOK(t, s.do("POST", "/v1/sandboxes/"+sb.ID+"/snapshots", a, map[string]any{"name": "base"}, nil), 201, &snap)
	if !strings.HasPrefix(snap.Digest, "sha256:") || snap.Bytes < 3<<20 {
		t.Fatalf("snapshot %+v", snap)
	}
	recs, err := s.d.Audit().Query(context.Background(), audit.Filter{Action: "snapshot.create"})
	if err != nil || len(recs) != 1 || !strings.Contains(string(mustJSON(recs[0].Detail)), snap.Digest) {
		t.Errorf("snapshot.create's audit record does not carry the digest: %+v", recs)
	}

	// Memory capture is refused, not faked.
	if r := s.do("POST", "/v1/sandboxes/"+sb.ID+"/snapshots", a, map[string]any{"memory": true}, nil); r.status < 400 {
		t.Errorf("memory: true answered %d", r.status)
	}

	// Another tenant: 404 everywhere.
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/snapshots/" + snap.ID},
		{"DELETE", "/v1/snapshots/" + snap.ID},
		{"GET", "/v1/snapshots/" + snap.ID + "/export"},
	} {
		expectError(t, s.do(c.method, c.path, b, nil, nil), 404, "not_found")
	}
	expectError(t, s.do("POST", "/v1/snapshots/"+snap.ID+"/fork", b, map[string]any{"count": 1}, nil), 404, "not_found")
	expectError(t, s.do("POST", "/v1/sandboxes", b, map[string]any{"snapshot": snap.ID}, nil), 404, "not_found")
	var listB []snapInfo
	expectOK(t, s.do("GET", "/v1/snapshots", b, nil, nil), 200, &listB)
	if len(listB) != 0 {
		t.Errorf("another key lists %d snapshots", len(listB))
	}

	// Fork: three sandboxes with the files; a write in one is invisible
	// to the others.
	var fork struct {
		Sandboxes         []sbInfo `json:"sandboxes"`
		ProcessesRestored bool     `json:"processes_restored"`
	}
	expectOK(t, s.do("POST", "/v1/snapshots/"+snap.ID+"/fork", a, map[string]any{"count": 3}, nil), 201, &fork)
	if len(fork.Sandboxes) != 3 || fork.ProcessesRestored {
		t.Fatalf("fork: %+v", fork)
	}
	for _, f := range fork.Sandboxes {
		if got := s.sh(a, f.ID, "cat f; sha256sum -c r.sum >/dev/null && echo ok"); got != "hello\nok\n" {
			t.Errorf("fork %s: %q", f.ID, got)
		}
	}
	s.sh(a, fork.Sandboxes[0].ID, "echo mine > f")
	if got := s.sh(a, fork.Sandboxes[1].ID, "cat f"); got != "hello\n" {
		t.Errorf("a write in one fork shows in another: %q", got)
	}

	// Export and import: the export imports (same digest); any altered
	// byte is refused.
	status, exp := s.raw("GET", "/v1/snapshots/"+snap.ID+"/export", a, nil, "")
	if status != 200 || len(exp) < 3<<20 {
		t.Fatalf("export: %d, %d bytes", status, len(exp))
	}
	status, body := s.raw("POST", "/v1/snapshots/import?name=again", a, exp, "application/x-tar")
	var imp struct {
		Data snapInfo `json:"data"`
	}
	_ = json.Unmarshal(body, &imp)
	if status != 201 || imp.Data.Digest != snap.Digest || imp.Data.ID == snap.ID {
		t.Fatalf("import: %d %s", status, body)
	}
	bad := bytes.Clone(exp)
	bad[len(bad)/2] ^= 0x40
	if status, body := s.raw("POST", "/v1/snapshots/import", a, bad, "application/x-tar"); status != 400 {
		t.Errorf("a tampered export: %d %s", status, body)
	}

	// Restore: the answer says processes were not restored.
	var restored sbInfo
	expectOK(t, s.do("POST", "/v1/sandboxes", a, map[string]any{"snapshot": imp.Data.ID}, nil), 201, &restored)
	if restored.Snapshot != imp.Data.ID || restored.ProcessesRestored == nil || *restored.ProcessesRestored {
		t.Errorf("restored: %+v", restored)
	}

	// Deleting the source keeps its snapshot.
	expectOK(t, s.do("DELETE", "/v1/sandboxes/"+sb.ID, a, nil, nil), 200, nil)
	expectOK(t, s.do("GET", "/v1/snapshots/"+snap.ID, a, nil, nil), 200, nil)

	// Hibernate, restart the server, and the next call resumes it.
	h := fork.Sandboxes[2].ID
	var hib sbInfo
	expectOK(t, s.do("POST", "/v1/sandboxes/"+h+"/hibernate", a, nil, nil), 200, &hib)
	if hib.State != "hibernated" {
		t.Fatalf("hibernate: %+v", hib)
	}
	s.stop()
	s = start(t, dir, nil)
	expectOK(t, s.do("GET", "/v1/sandboxes/"+h, a, nil, nil), 200, &hib)
	if hib.State != "hibernated" {
		t.Fatalf("after a restart: %+v", hib)
	}
	if got := s.sh(a, h, "cat f"); got != "hello\n" {
		t.Errorf("resumed after a restart: %q", got)
	}
	expectOK(t, s.do("GET", "/v1/sandboxes/"+h, a, nil, nil), 200, &hib)
	if hib.State != "running" {
		t.Errorf("after its first call: %s", hib.State)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
