package skills_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/skills"
)

type entry struct {
	name, body string
	mode       uint32 // 0: a regular file
}

func makeZip(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.mode != 0 {
			h.SetMode(fsMode(e.mode))
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type tc struct {
	t  *testing.T
	cl *daemontest.Client
	sb string
}

func (c tc) call(name string, args map[string]any, out any) daemontest.Reply {
	c.t.Helper()
	args["sandbox"] = c.sb
	r := c.cl.Do("POST", "/v1/tools/call", map[string]any{"name": name, "arguments": args})
	if out != nil && r.Success {
		if err := json.Unmarshal(r.Data, out); err != nil {
			c.t.Fatalf("%s: decode %s: %v", name, r.Raw, err)
		}
	}
	return r
}

func (c tc) must(name string, args map[string]any, out any) {
	c.t.Helper()
	if r := c.call(name, args, out); !r.Success {
		c.t.Fatalf("%s: %d %s", name, r.Status, r.Raw)
	}
}

const skillMD = "---\nname: pdf-tools\ndescription: Work with PDF files\nversion: 2\ntags: [pdf, docs]\n---\n# PDF tools\n\nUse pdftotext.\n"

// TestSkillsLifecycle registers skills from an uploaded zip and from a
// directory in the workspace, lists them, reads one, deletes one, clears
// the rest — against a real sandbox, checking the files where the
// sandbox sees them.
func TestSkillsLifecycle(t *testing.T) {
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	c := tc{t: t, cl: cl, sb: cl.NewSandbox(nil)}

	// A zip with two skills, one with a helper script.
	z := makeZip(t,
		entry{name: "bundle/pdf/SKILL.md", body: skillMD},
		entry{name: "bundle/pdf/scripts/run.sh", body: "echo hi\n"},
		entry{name: "bundle/notes/SKILL.md", body: "No front matter here.\n"},
	)
	var reg skills.RegisterResult
	c.must(skills.ToolRegister.Name(), map[string]any{"zip": z}, &reg)
	if reg.Count != 2 || len(reg.Registered) != 2 {
		t.Fatalf("registered %+v", reg)
	}
	byName := map[string]skills.Metadata{}
	for _, m := range reg.Registered {
		byName[m.Name] = m
	}
	pdf, ok := byName["pdf-tools"]
	if !ok || pdf.Path != "/workspace/.skills/pdf-tools" || pdf.Metadata["description"] != "Work with PDF files" || pdf.Metadata["version"] != float64(2) {
		t.Fatalf("pdf skill %+v", byName)
	}
	if _, ok := byName["notes"]; !ok {
		t.Fatalf("the skill without a front matter name takes its directory's: %+v", byName)
	}
	if res := cl.Exec(c.sb, "cat /workspace/.skills/pdf-tools/scripts/run.sh && ls -A /workspace/.skills"); res.Stdout != "echo hi\nnotes\npdf-tools\n" {
		t.Fatalf("in the sandbox: %+v", res)
	}

	// A directory in the workspace, renamed by name.
	if res := cl.Exec(c.sb, "mkdir -p /workspace/src/s && printf -- '---\\ndescription: mine\\n---\\nbody text\\n' > /workspace/src/s/SKILL.md"); res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("setup %+v", res)
	}
	c.must(skills.ToolRegister.Name(), map[string]any{"path": "/workspace/src/s", "name": "custom"}, &reg)
	if reg.Count != 1 || reg.Registered[0].Name != "custom" {
		t.Fatalf("%+v", reg)
	}

	var coll skills.Collection
	c.must(skills.ToolList.Name(), map[string]any{}, &coll)
	if got := names(coll); got != "custom,notes,pdf-tools" {
		t.Fatalf("list %s", got)
	}
	c.must(skills.ToolList.Name(), map[string]any{"names": "notes, custom"}, &coll)
	if got := names(coll); got != "custom,notes" {
		t.Fatalf("filtered list %s", got)
	}

	var content skills.Content
	c.must(skills.ToolContent.Name(), map[string]any{"name": "pdf-tools"}, &content)
	if content.Content != "# PDF tools\n\nUse pdftotext.\n" {
		t.Fatalf("content %q", content.Content)
	}

	var del skills.Metadata
	c.must(skills.ToolDelete.Name(), map[string]any{"name": "notes"}, &del)
	if r := c.call(skills.ToolContent.Name(), map[string]any{"name": "notes"}, nil); r.Success || r.Status != 404 {
		t.Fatalf("deleted skill still readable: %d %s", r.Status, r.Raw)
	}
	var cleared skills.Cleared
	c.must(skills.ToolClear.Name(), map[string]any{}, &cleared)
	if cleared.Count != 2 {
		t.Fatalf("cleared %+v", cleared)
	}
	if res := cl.Exec(c.sb, "ls -A /workspace/.skills"); res.Stdout != "" {
		t.Fatalf("left behind: %q", res.Stdout)
	}
}

func names(c skills.Collection) string {
	var n []string
	for _, s := range c.Skills {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

// TestSkillsRefusals: hostile zips are refused by the archive code and
// leave nothing behind; names cannot become paths; the sensitive-path
// policy applies to the path form.
func TestSkillsRefusals(t *testing.T) {
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	c := tc{t: t, cl: cl, sb: cl.NewSandbox(nil)}
	if res := cl.Exec(c.sb, "mkdir -p /workspace/.ssh && echo k > /workspace/.ssh/SKILL.md"); res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("setup %+v", res)
	}
	for _, x := range []struct {
		name   string
		args   map[string]any
		status int
	}{
		{"zip-slip", map[string]any{"zip": makeZip(t, entry{name: "../../evil/SKILL.md", body: "x"})}, 400},
		{"absolute", map[string]any{"zip": makeZip(t, entry{name: "/etc/SKILL.md", body: "x"})}, 400},
		{"symlink-out", map[string]any{"zip": makeZip(t, entry{name: "s/SKILL.md", body: "x"}, entry{name: "s/link", body: "/etc/passwd", mode: 0o120777})}, 403},
		{"no-skill", map[string]any{"zip": makeZip(t, entry{name: "readme.txt", body: "x"})}, 400},
		{"bad-front-matter", map[string]any{"zip": makeZip(t, entry{name: "s/SKILL.md", body: "---\nname: [unclosed\n---\n"})}, 400},
		{"bad-name", map[string]any{"zip": makeZip(t, entry{name: "SKILL.md", body: "---\nname: ../up\n---\n"})}, 400},
		{"duplicate", map[string]any{"zip": makeZip(t, entry{name: "a/SKILL.md", body: "---\nname: same\n---\n"}, entry{name: "b/SKILL.md", body: "---\nname: same\n---\n"})}, 409},
		{"not-a-zip", map[string]any{"zip": []byte("plain text")}, 400},
		{"both", map[string]any{"zip": makeZip(t, entry{name: "SKILL.md", body: "x"}), "path": "/workspace"}, 400},
		{"neither", map[string]any{}, 400},
		{"sensitive-dir", map[string]any{"path": "/workspace/.ssh"}, 403},
		{"missing-path", map[string]any{"path": "/workspace/nope"}, 404},
	} {
		t.Run(x.name, func(t *testing.T) {
			r := c.call(skills.ToolRegister.Name(), x.args, nil)
			if r.Success || r.Status != x.status {
				t.Fatalf("status %d (%s), want %d", r.Status, r.Raw, x.status)
			}
			if strings.Contains(r.Message, "/var/") || strings.Contains(r.Message, "/tmp/Test") {
				t.Errorf("message leaks a host path: %q", r.Message)
			}
		})
	}
	for _, n := range []string{"../x", ".hidden", "a/b", ""} {
		if r := c.call(skills.ToolContent.Name(), map[string]any{"name": n}, nil); r.Success || r.Status != 400 {
			t.Errorf("name %q: %d %s", n, r.Status, r.Raw)
		}
	}
	// Nothing was left: no skill, no staging directory.
	if res := cl.Exec(c.sb, "ls -A /workspace/.skills 2>/dev/null; test ! -e /evil && test ! -e /workspace/evil"); res.Stdout != "" || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("left behind: %+v", res)
	}
}

// TestSkillsAIORoutes: AIO's multipart register at /sandboxes/{id}/v1,
// then the metadata, content and delete routes, answered in AIO's
// envelope; a call without a file or path is a tool-level failure.
func TestSkillsAIORoutes(t *testing.T) {
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	sb := cl.NewSandbox(nil)
	base := "/sandboxes/" + sb + "/v1/skills"
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("name", "renamed")
	fw, _ := mw.CreateFormFile("file", "s.zip")
	_, _ = fw.Write(makeZip(t, entry{name: "x/SKILL.md", body: skillMD}))
	_ = mw.Close()
	r := cl.Do("POST", base+"/register", &buf, "Content-Type", mw.FormDataContentType())
	if r.Status != 200 || !r.Success || !strings.Contains(string(r.Data), `"name":"renamed"`) {
		t.Fatalf("register: %d %s", r.Status, r.Raw)
	}
	r = cl.Do("GET", base+"/renamed/content", nil)
	if !r.Success || !strings.Contains(string(r.Data), "Use pdftotext.") {
		t.Fatalf("content: %s", r.Raw)
	}
	r = cl.Do("GET", base+"/metadatas", nil)
	if !r.Success || !strings.Contains(string(r.Data), `"description":"Work with PDF files"`) {
		t.Fatalf("metadatas: %s", r.Raw)
	}
	r = cl.Do("DELETE", base+"/renamed", nil)
	if !r.Success {
		t.Fatalf("delete: %s", r.Raw)
	}
	r = cl.Do("POST", base+"/register", nil)
	if r.Status != 200 || r.Success || string(r.Data) != "null" {
		t.Fatalf("empty register: %d %s", r.Status, r.Raw)
	}
}
