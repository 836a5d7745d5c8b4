package warmpool

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/template/templatetest"
)

// TestTemplateRef: the host's pool needs no store; a template pool makes
// its sandboxes from what a public name names now, moving with it; a
// key's own template, a name nobody has and a server without templates
// have no pool.
func TestTemplateRef(t *testing.T) {
	if ref, err := TemplateRef(nil, ""); ref != "" || err != nil {
		t.Fatalf("host pool: %q, %v", ref, err)
	}
	if _, err := TemplateRef(nil, "base"); err == nil || !strings.Contains(err.Error(), "keeps no templates") {
		t.Fatalf("no store: %v", err)
	}
	st, err := template.Open(filepath.Join(t.TempDir(), "templates"), template.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	layer := func(body string) *bytes.Reader {
		return bytes.NewReader(templatetest.Tar(t, templatetest.File{Name: "etc/marker", Body: body}))
	}
	v1 := templatetest.Put(t, st, template.Caller{Admin: true}, "base", "latest", template.Config{}, layer("1"))
	if ref, err := TemplateRef(st, "base"); err != nil || ref != v1.Ref() {
		t.Fatalf("public template: %q, %v; want %s", ref, err, v1.Ref())
	}
	v2 := templatetest.Put(t, st, template.Caller{Admin: true}, "base", "latest", template.Config{}, layer("2"))
	if ref, err := TemplateRef(st, "base"); err != nil || ref != v2.Ref() || v2.Ref() == v1.Ref() {
		t.Fatalf("moved name: %q, %v; want %s", ref, err, v2.Ref())
	}
	templatetest.Put(t, st, template.Caller{KeyID: "k1"}, "mine", "latest", template.Config{}, layer("3"))
	if _, err := TemplateRef(st, "mine"); err == nil {
		t.Fatal("a pool for a key's template")
	}
	if _, err := TemplateRef(st, "nobody"); err == nil {
		t.Fatal("a pool for a name nobody has")
	}
}
