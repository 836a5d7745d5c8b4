package daemon_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

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
