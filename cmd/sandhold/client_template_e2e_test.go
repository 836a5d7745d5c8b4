package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/template/templatetest"
)

// TestClientTemplateBuildAndUse: sandhold template build streams a build
// of a context directory, the template is listed, a sandbox made with
// --template runs on it, a commit makes another, rm removes its name.
func TestClientTemplateBuildAndUse(t *testing.T) {
	d := daemontest.Start(t, nil)
	templatetest.Put(t, d.Templates(), template.Caller{KeyID: "admin", Admin: true}, "bb", "1",
		template.Config{Env: []string{"PATH=/bin"}}, bytes.NewReader(templatetest.BusyboxTar(t)))
	c := newCLIEnv(t, d, d.AdminKey())
	dir := t.TempDir()
	for name, body := range map[string]string{
		"Dockerfile": "FROM bb:1\nCOPY hello.txt /srv/\nRUN cat /srv/hello.txt && echo built > /srv/built\n",
		"hello.txt":  "hello from the context\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := c.run("", "template", "build", "-t", "cli:1", dir)
	if code != 0 || !strings.HasPrefix(out, "hello from the context\ncli:1 sha256:") || !strings.Contains(errOut, "[3/3] RUN") {
		t.Fatalf("build: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	if ls := c.mustRun("template", "ls"); !strings.Contains(ls, "cli ") || !strings.Contains(ls, "host") {
		t.Errorf("ls: %s", ls)
	}
	id := strings.TrimSpace(c.mustRun("create", "--template", "cli:1"))
	if got := c.mustRun("exec", id, "--", "cat", "/srv/built"); got != "built\n" {
		t.Errorf("exec in the built template: %q", got)
	}
	c.mustRun("exec", id, "--", "sh", "-c", "echo more > /srv/more")
	if out := c.mustRun("template", "commit", id, "-t", "cli:2"); !strings.HasPrefix(out, "cli:2 sha256:") {
		t.Errorf("commit: %q", out)
	}
	if out := c.mustRun("template", "inspect", "cli:2"); !strings.Contains(out, `"kind": "commit"`) {
		t.Errorf("inspect: %s", out)
	}
	c.mustRun("template", "rm", "cli:2")
	_, errOut, code = c.run("", "template", "inspect", "cli:2")
	oneLineErr(t, errOut, code, "not found")
}
