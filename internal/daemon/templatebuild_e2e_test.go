package daemon_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/template/templatetest"
)

// sandboxOf creates a sandbox of tmpl and returns its id.
func sandboxOf(t *testing.T, c *daemontest.Client, tmpl string) string {
	t.Helper()
	r := c.Do("POST", "/v1/sandboxes", map[string]any{"template": tmpl})
	if r.Status != 201 {
		t.Fatalf("create from %s: %d %s", tmpl, r.Status, r.Raw)
	}
	var sb struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(r.Data, &sb)
	return sb.ID
}

// shOut runs a command line in sandbox id and returns its stdout.
func shOut(t *testing.T, c *daemontest.Client, id, cmd string) string {
	t.Helper()
	r := c.Do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"command": cmd})
	var res struct {
		Stdout, Stderr string
	}
	if err := json.Unmarshal(r.Data, &res); err != nil {
		t.Fatalf("exec %q: %d %s", cmd, r.Status, r.Raw)
	}
	return res.Stdout
}

func contextTar(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		_ = tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	return buf.Bytes()
}

// TestTemplateBuildCommitAndCache builds a Dockerfile with a context
// (RUN in sandboxes, COPY, ADD, ENV, WORKDIR, USER), rebuilds it from the
// cache, runs a sandbox of it, commits that sandbox's changes and runs a
// sandbox of the commit.
func TestTemplateBuildCommitAndCache(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := daemontest.NewClient(t, d)
	templatetest.Put(t, d.Templates(), template.Caller{KeyID: "admin", Admin: true}, "bb", "1",
		template.Config{Env: []string{"PATH=/bin"}}, bytes.NewReader(templatetest.BusyboxTar(t)))
	inner := contextTar(t, map[string]string{"data/one.txt": "from an added archive\n"})
	ctxTar := contextTar(t, map[string]string{
		"Dockerfile": `FROM bb:1
ARG GREETING=hello
ENV APP_HOME=/app
RUN echo "$GREETING from a build step" > /etc/built && id -u >> /etc/built && cat /etc/built
WORKDIR $APP_HOME
COPY app.sh ./
ADD bundle.tar /opt/bundle
RUN chmod 755 app.sh
USER user
RUN mkdir -p /home/user/.cache
CMD ["/app/app.sh"]
`,
		"app.sh":     "#!/bin/sh\necho app running as $(id -u)\n",
		"bundle.tar": string(inner),
	})
	build := func(extra string) (template.Template, string) {
		r := c.Do("POST", "/v1/templates/build?name=app&tag=1"+extra, bytes.NewReader(ctxTar), "Content-Type", "application/x-tar", "Accept", "text/event-stream")
		body := string(r.Raw)
		if r.Status != 200 || !strings.Contains(body, "event: done") {
			t.Fatalf("build: %d %s", r.Status, clipped(body))
		}
		i := strings.LastIndex(body, "event: done\ndata: ")
		var env struct {
			Data template.Template `json:"data"`
		}
		_ = json.Unmarshal([]byte(strings.SplitN(body[i+len("event: done\ndata: "):], "\n", 2)[0]), &env)
		return env.Data, body
	}
	firstT, log1 := build("")
	first := firstT.Digest
	if !strings.Contains(log1, "hello from a build step") {
		t.Errorf("the RUN's output did not stream: %s", clipped(log1))
	}
	second, log2 := build("")
	if a, b := layerDigests(firstT), layerDigests(second); a != b {
		t.Errorf("a rebuild of the same Dockerfile and context made layers\n%s\nnot\n%s", b, a)
	}
	if strings.Count(log2, "event: progress\ndata: {\"step\":\"cached\"") != 6 {
		t.Errorf("the rebuild did not reuse every step's layer: %s", clipped(log2))
	}
	sb := sandboxOf(t, c, "app:1")
	out := shOut(t, c, sb, "cat /etc/built; pwd; id -u; echo $APP_HOME; cat /opt/bundle/data/one.txt; ./app.sh; stat -c %u /home/user")
	want := "hello from a build step\n0\n/app\n1000\n/app\nfrom an added archive\napp running as 1000\n1000\n"
	if out != want {
		t.Errorf("the built template:\n%q\nwant\n%q", out, want)
	}
	// Commit the sandbox's changes; its workspace is not part of them.
	shOut(t, c, sb, "echo mine > /workspace/data; mkdir -p /home/user/bin && echo tool > /home/user/bin/tool")
	r := c.Do("POST", "/v1/sandboxes/"+sb+"/commit", map[string]any{"name": "app", "tag": "2"})
	if r.Status != 201 {
		t.Fatalf("commit: %d %s", r.Status, r.Raw)
	}
	var committed template.Template
	_ = json.Unmarshal(r.Data, &committed)
	if committed.Manifest.Source.Kind != "commit" || committed.Manifest.Source.Parent != second.Digest || len(committed.Manifest.Layers) == 0 {
		t.Errorf("commit manifest %+v", committed.Manifest.Source)
	}
	sb2 := sandboxOf(t, c, "app:2")
	if out := shOut(t, c, sb2, "cat /home/user/bin/tool; ls /workspace; id -u"); out != "tool\n1000\n" {
		t.Errorf("the committed template: %q", out)
	}
	// The build's log is kept.
	build3 := committed.Manifest.Source.Parent
	_ = build3
	r = c.Do("GET", "/v1/templates/"+first, nil)
	var built template.Template
	_ = json.Unmarshal(r.Data, &built)
	r = c.Do("GET", "/v1/templates/builds/"+built.Manifest.Source.Build+"/log", nil)
	if !r.Success || !strings.Contains(string(r.Data), "step 4/11: RUN") {
		t.Errorf("build log: %d %s", r.Status, clipped(string(r.Raw)))
	}
	// A failing step names its line; the RUN went through exec.run.
	r = c.Do("POST", "/v1/templates", map[string]any{"name": "broken", "dockerfile": "FROM bb:1\nRUN echo before; exit 3\n"})
	if r.Status == 201 || !strings.Contains(r.Message, "line 2 (RUN) failed") || !strings.Contains(r.Message, "exit code 3") {
		t.Errorf("a failing build: %d %s", r.Status, r.Raw)
	}
	if r := c.Do("GET", "/v1/audit?action=exec.run", nil); !strings.Contains(string(r.Raw), "exit 3") {
		t.Errorf("the build's RUN is not in the audit log as exec.run: %s", clipped(string(r.Raw)))
	}
}

func layerDigests(t template.Template) string {
	var ds []string
	for _, l := range t.Manifest.Layers {
		ds = append(ds, l.Digest)
	}
	return strings.Join(ds, "\n")
}
