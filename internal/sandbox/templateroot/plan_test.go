package templateroot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/template/templatetest"
)

// TestPlanOfAStoredTemplate: a sandbox recorded on a stored template gets
// its layers' directories and its user; the launch runs as that user on
// an overlay root of those layers; a host sandbox has no plan.
func TestPlanOfAStoredTemplate(t *testing.T) {
	st, err := template.Open(filepath.Join(t.TempDir(), "templates"), template.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cfg := template.Config{Env: []string{"LANG=C.UTF-8", "PATH=/opt/bin:/usr/bin"}, WorkingDir: "/srv", Shell: "/bin/sh"}
	tp := templatetest.Put(t, st, template.Caller{Admin: true}, "plan", "v1", cfg, bytes.NewReader(templatetest.Tar(t, templatetest.File{Name: "etc/os-release", Body: "plan\n"})))
	if r, err := Resolve(st, template.Caller{KeyID: "k1"}, "plan:v1", nil); err != nil || r == nil || r.Ref() != tp.Ref() {
		t.Fatalf("resolve plan:v1: %+v, %v; want %s", r, err, tp.Ref())
	}
	if r, err := Resolve(nil, template.Caller{}, "", nil); r != nil || err != nil {
		t.Fatalf("resolve the host's: %+v, %v", r, err)
	}
	if r, err := Resolve(st, template.Caller{}, "nobody:v1", &tp); err != nil || r != &tp {
		t.Fatalf("a pinned template: %+v, %v; want it as pinned", r, err)
	}
	if _, err := Resolve(nil, template.Caller{}, "plan:v1", nil); fault.KindOf(err) != fault.Invalid {
		t.Fatalf("no store: %v, want invalid template", err)
	}
	if p, err := NewPlan(st, "", 1<<20); p != nil || err != nil {
		t.Fatalf("host sandbox: %+v, %v; want no plan", p, err)
	}
	p, err := NewPlan(st, tp.Ref(), 1<<20)
	if err != nil || p == nil {
		t.Fatalf("plan: %+v, %v", p, err)
	}
	defer p.Close()
	if p.Ref != tp.Ref() || len(p.Dirs) != 1 || p.UID != 0 || p.GID != 0 {
		t.Fatalf("plan %+v, want %s's one layer as root", p, tp.Ref())
	}
	if _, err := os.Stat(p.Dirs[0]); err != nil {
		t.Fatalf("the layer's directory: %v", err)
	}
	var spec agent.LaunchSpec
	spec.Setup.UID = 1000
	var asked []string
	p.Apply(&spec, func(_ int, dirs []string) ([]*os.File, error) { asked = dirs; return nil, nil })
	if spec.Setup.UID != 0 || spec.Setup.Root == nil || spec.Setup.Root.Template != tp.Ref() || spec.Setup.Root.Layers != 1 || spec.RootFiles == nil {
		t.Fatalf("launch %+v, want the template's user and root", spec.Setup)
	}
	if _, err := spec.RootFiles(42); err != nil || len(asked) != 1 || asked[0] != p.Dirs[0] {
		t.Fatalf("the root's files were asked for %v, want the plan's layers", asked)
	}
	c := ConfigOf(st, tp.Ref())
	if c == nil || Shell(c) != "/bin/sh" || Cwd(c) != "/srv" {
		t.Fatalf("config %+v: want its shell and working directory", c)
	}
	env := Env(map[string]string{"PATH": "/usr/bin", "HOME": "/root"}, c)
	if env["PATH"] != "/opt/bin:/usr/bin" || env["LANG"] != "C.UTF-8" || env["HOME"] != "/root" || env["USER"] != "root" || env["LOGNAME"] != "root" {
		t.Fatalf("env %v: want the template's over the base, root as USER", env)
	}
}

// TestPlanRefusals: a template sandbox on a server without templates, one
// without a disk quota and one whose template left the store each fail
// with what the client can act on.
func TestPlanRefusals(t *testing.T) {
	const gone = "base:v1@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	st, err := template.Open(filepath.Join(t.TempDir(), "templates"), template.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		st   *template.Store
		disk int64
		kind fault.Kind
	}{
		{"no store", nil, 1 << 20, fault.Unavailable},
		{"no disk quota", st, 0, fault.Invalid},
		{"gone from the store", st, 1 << 20, fault.Unavailable},
	} {
		p, err := NewPlan(c.st, gone, c.disk)
		var fe *fault.Error
		if p != nil || !errors.As(err, &fe) || fe.Kind != c.kind {
			t.Errorf("%s: %+v, %v; want a %s fault", c.name, p, err, c.kind)
		}
	}
	if ConfigOf(nil, gone) != nil || ConfigOf(st, gone) != nil || ConfigOf(st, "") != nil {
		t.Fatal("a config without a stored template")
	}
}

// TestHostDefaults: the host's template (no config) runs bash in
// /workspace on the base environment; a template running as a named user
// says so in USER and LOGNAME.
func TestHostDefaults(t *testing.T) {
	if Shell(nil) != "/bin/bash" || Cwd(nil) != "/workspace" {
		t.Fatalf("host: shell %s, cwd %s", Shell(nil), Cwd(nil))
	}
	base := map[string]string{"PATH": "/usr/bin"}
	if env := Env(base, nil); len(env) != 1 || env["PATH"] != "/usr/bin" {
		t.Fatalf("host env %v, want the base", env)
	}
	env := Env(map[string]string{}, &template.Config{User: "app", UID: 1000})
	if env["USER"] != "app" || env["LOGNAME"] != "app" {
		t.Fatalf("named user: %v", env)
	}
	if env := Env(map[string]string{}, &template.Config{UID: 1000}); env["USER"] != "" {
		t.Fatalf("an unnamed non-root user got USER %q", env["USER"])
	}
}
