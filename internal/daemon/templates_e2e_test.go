package daemon_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sandhold/sandhold/internal/config"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/template/templatetest"
)

// TestTemplateRoutes: a template in the store is listed, inspected, used
// by a create (whose audit record and security row name its digest) and
// removed, every step through the API.
func TestTemplateRoutes(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := daemontest.NewClient(t, d)
	tp := templatetest.Put(t, d.Templates(), template.Caller{KeyID: "admin", Admin: true}, "bb", "1",
		template.Config{Env: []string{"GREETING=hi"}}, bytes.NewReader(templatetest.BusyboxTar(t)))
	r := c.Do("GET", "/v1/templates", nil)
	if !r.Success || !strings.Contains(string(r.Data), tp.Digest) {
		t.Fatalf("list: %d %s", r.Status, r.Raw)
	}
	if r := c.Do("GET", "/v1/templates/bb:1", nil); !r.Success || !strings.Contains(string(r.Data), `"GREETING=hi"`) {
		t.Fatalf("inspect: %d %s", r.Status, r.Raw)
	}
	r = c.Do("POST", "/v1/sandboxes", map[string]any{"template": "bb:1"})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Raw)
	}
	var sb struct {
		ID             string `json:"id"`
		Template       string `json:"template"`
		TemplateDigest string `json:"template_digest"`
	}
	_ = json.Unmarshal(r.Data, &sb)
	if sb.Template != "bb:1" || sb.TemplateDigest != tp.Digest {
		t.Errorf("the sandbox names %q %q", sb.Template, sb.TemplateDigest)
	}
	r = c.Do("POST", "/v1/sandboxes/"+sb.ID+"/exec", map[string]any{"command": "cat " + templatetest.Marker + "; echo $GREETING; ls /usr/lib 2>&1 | head -1"})
	if !r.Success || !strings.Contains(string(r.Data), "made by templatetest\\nhi\\nls: /usr/lib: No such file") {
		t.Errorf("exec: %s", r.Raw)
	}
	if r := c.Do("GET", "/v1/sandbox/security", nil); !strings.Contains(string(r.Data), `"template_digest":"`+tp.Digest) {
		t.Errorf("security does not name the template: %s", r.Raw)
	}
	if r := c.Do("GET", "/v1/audit?action=sandbox.create", nil); !strings.Contains(string(r.Raw), tp.Digest) {
		t.Errorf("the create's audit record does not name the digest: %s", r.Raw)
	}
	if r := c.Do("DELETE", "/v1/templates/bb:1", nil); !r.Success {
		t.Fatalf("remove: %s", r.Raw)
	}
	if r := c.Do("GET", "/v1/templates/bb:1", nil); r.Status != 404 {
		t.Errorf("removed template: %d", r.Status)
	}
	// The running sandbox keeps its layers.
	r = c.Do("POST", "/v1/sandboxes/"+sb.ID+"/exec", map[string]any{"command": "cat " + templatetest.Marker})
	if !strings.Contains(string(r.Data), "made by templatetest") {
		t.Errorf("after the removal: %s", r.Raw)
	}
	if r := c.Do("GET", "/v1/audit?action=template.delete", nil); !strings.Contains(string(r.Raw), tp.Digest) {
		t.Errorf("the removal's audit record does not name the digest: %s", r.Raw)
	}
}

// registryWith serves img at repo in an in-process registry and returns
// its host.
func registryWith(t *testing.T, imgs map[string]v1.Image) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	for repo, img := range imgs {
		ref, err := name.ParseReference(host + "/" + repo)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}
	return host
}

// imageOf is an image of the given layer streams (lowest first).
func imageOf(t *testing.T, env []string, layers ...func() (io.ReadCloser, error)) v1.Image {
	t.Helper()
	var ls []v1.Layer
	for _, open := range layers {
		l, err := tarball.LayerFromOpener(open)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	img, err := mutate.AppendLayers(empty.Image, ls...)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Env = env
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// TestTemplateFromRegistryRunsItsPython pulls a Debian image with Python
// from a registry the server allows (SSE progress), makes a sandbox of it
// and runs the image's Python: the image's marker is there, the host's
// Python packages are not. A pull from another registry is refused.
func TestTemplateFromRegistryRunsItsPython(t *testing.T) {
	daemontest.RequireSandboxes(t)
	deb := templatetest.DebianPython(t)
	marker := templatetest.Tar(t, templatetest.File{Name: "etc/template-id", Body: "debian-python-from-registry\n"})
	img := imageOf(t, []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
		func() (io.ReadCloser, error) { return os.Open(deb) }, bytesOpener(marker))
	host := registryWith(t, map[string]v1.Image{"debian/python:3.11": img})
	d := daemontest.Start(t, func(c *config.Config) { c.Registries = []string{host} })
	c := daemontest.NewClient(t, d)

	r := c.Do("POST", "/v1/templates", map[string]any{"image": host + "/debian/python:3.11", "name": "py", "tag": "3.11"}, "Accept", "text/event-stream")
	body := string(r.Raw)
	if r.Status != 200 || !strings.Contains(body, "event: progress") || !strings.Contains(body, "event: done") {
		t.Fatalf("pull: %d %s", r.Status, clipped(body))
	}
	r = c.Do("POST", "/v1/sandboxes", map[string]any{"template": "py:3.11"})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Raw)
	}
	var sb struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(r.Data, &sb)
	script := `import sys, importlib.util; print(open("/etc/template-id").read().strip()); print(sys.version_info[:2]); print(importlib.util.find_spec("matplotlib") is None); print(open("/etc/debian_version").read().strip()[:2])`
	r = c.Do("POST", "/v1/sandboxes/"+sb.ID+"/exec", map[string]any{"argv": []string{"python3", "-c", script}})
	var res struct {
		Stdout, Stderr string
		ExitCode       *int `json:"exit_code"`
	}
	_ = json.Unmarshal(r.Data, &res)
	if !strings.HasPrefix(res.Stdout, "debian-python-from-registry\n(3, 11)\nTrue\n12") {
		t.Errorf("the template's python: %q %q", res.Stdout, res.Stderr)
	}
	// The same command in a host sandbox sees no such file.
	r = c.Do("POST", "/v1/sandboxes", map[string]any{})
	_ = json.Unmarshal(r.Data, &sb)
	r = c.Do("POST", "/v1/sandboxes/"+sb.ID+"/exec", map[string]any{"command": "cat /etc/template-id 2>&1"})
	if !strings.Contains(string(r.Data), "No such file") {
		t.Errorf("a host sandbox sees the template's file: %s", r.Raw)
	}
	r = c.Do("POST", "/v1/templates", map[string]any{"image": "registry.example.com/x:1", "name": "x"})
	if r.Status != 403 || !strings.Contains(r.Message, "SANDBOX_REGISTRIES") {
		t.Errorf("a pull from a registry not allowed: %d %s", r.Status, r.Raw)
	}
}

// TestTemplateImportUpload: a docker save tarball uploaded to
// /v1/templates/import becomes a template a sandbox runs on.
func TestTemplateImportUpload(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := daemontest.NewClient(t, d)
	img := imageOf(t, []string{"PATH=/bin"}, bytesOpener(templatetest.BusyboxTar(t)))
	var save bytes.Buffer
	tag, _ := name.NewTag("example/bb:1")
	if err := tarball.Write(tag, img, &save); err != nil {
		t.Fatal(err)
	}
	r := c.Do("POST", "/v1/templates/import?name=uploaded&tag=1", bytes.NewReader(save.Bytes()), "Content-Type", "application/x-tar")
	if r.Status != 201 {
		t.Fatalf("import: %d %s", r.Status, r.Raw)
	}
	r = c.Do("POST", "/v1/sandboxes", map[string]any{"template": "uploaded:1"})
	var sb struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(r.Data, &sb)
	r = c.Do("POST", "/v1/sandboxes/"+sb.ID+"/exec", map[string]any{"command": "cat " + templatetest.Marker})
	if !strings.Contains(string(r.Data), "made by templatetest") {
		t.Errorf("exec: %s", r.Raw)
	}
	// An agent's upload is its own.
	agent := createAgentKey(t, c)
	r = c.As(agent).Do("POST", "/v1/templates/import?name=mine&tag=1", bytes.NewReader(save.Bytes()), "Content-Type", "application/x-tar")
	if r.Status != 201 {
		t.Fatalf("agent import: %d %s", r.Status, r.Raw)
	}
	if r := c.Do("GET", "/v1/templates", nil); !strings.Contains(string(r.Data), `"owner":"`) {
		t.Errorf("the agent's template is not listed with its owner for the admin: %s", r.Raw)
	}
}

func clipped(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

// createAgentKey makes an agent key with c (an admin's client).
func createAgentKey(t *testing.T, c *daemontest.Client) string {
	t.Helper()
	r := c.Do("POST", "/v1/keys", map[string]string{"name": "agent", "role": "agent"})
	var k struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(r.Data, &k); err != nil || k.Key == "" {
		t.Fatalf("create key: %d %s", r.Status, r.Raw)
	}
	return k.Key
}
