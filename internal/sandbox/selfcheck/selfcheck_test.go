package selfcheck

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/template"
)

// box is a Box whose command's end is given (ran), or, when host is set,
// run for real on the host: a "sandbox" that isolates nothing.
type box struct {
	layers []agent.Layer
	ran    Ran
	host   bool
	closed *int
}

func (b box) ID() string            { return "sbx-selfcheck" }
func (b box) Layers() []agent.Layer { return b.layers }
func (b box) Close()                { *b.closed++ }

func (b box) Run(ctx context.Context, argv []string) (Ran, error) {
	if !b.host {
		return b.ran, nil
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output() //nolint:gosec // G204: the self-test's own probe
	if err != nil {
		return Ran{}, err
	}
	code := 0
	return Ran{Completed: true, Status: "completed", ExitCode: &code, Stdout: string(out)}, nil
}

// namespaced is what the probe prints in a sandbox with a cgroup
// namespace of its own.
func namespaced() Ran {
	code := 0
	return Ran{Completed: true, Status: "completed", ExitCode: &code, Stdout: "cgroup:[4026599999]\n0::/\n"}
}

func start(b box) func(context.Context, *template.Template) (Box, error) {
	return func(context.Context, *template.Template) (Box, error) { return b, nil }
}

// TestAnIsolatedBoxPasses: every layer in force and a cgroup namespace of
// its own: the layers come back with the namespace's row, active, and the
// box is thrown away.
func TestAnIsolatedBoxPasses(t *testing.T) {
	closed := 0
	b := box{layers: []agent.Layer{{Name: "seccomp", Active: true}, {Name: "landlock", Active: true}}, ran: namespaced(), closed: &closed}
	layers, err := Run(context.Background(), Config{Start: start(b)})
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 3 || !layers[2].Active {
		t.Fatalf("layers %+v: want the init's two and the cgroup namespace's, active", layers)
	}
	if closed != 1 {
		t.Fatalf("the box was closed %d times, want once", closed)
	}
}

// TestTheHostIsNoSandbox: a command run on the host itself shares the
// server's cgroup namespace: the self-test fails and names the layer;
// insecure, it reports it and goes on.
func TestTheHostIsNoSandbox(t *testing.T) {
	if _, err := exec.LookPath("readlink"); err != nil {
		t.Skip("no readlink on this host")
	}
	closed := 0
	b := box{layers: []agent.Layer{{Name: "seccomp", Active: true}}, host: true, closed: &closed}
	_, err := Run(context.Background(), Config{Start: start(b)})
	if err == nil || !strings.Contains(err.Error(), "isolation layers not in force") || !strings.Contains(err.Error(), "server's cgroup namespace") {
		t.Fatalf("the host passed for a sandbox: %v", err)
	}
	layers, err := Run(context.Background(), Config{Start: start(b), Insecure: true})
	if err != nil || len(layers) != 2 || layers[1].Active {
		t.Fatalf("insecure: %v, %+v: want the inactive row reported", err, layers)
	}
}

// TestFailuresSayWhere: a sandbox that does not start, a command that
// fails, a layer out of force: each is an error naming it.
func TestFailuresSayWhere(t *testing.T) {
	closed := 0
	code := 1
	for _, c := range []struct {
		name  string
		start func(context.Context, *template.Template) (Box, error)
		want  string
	}{
		{"no start", func(context.Context, *template.Template) (Box, error) { return nil, errors.New("no init") }, "start a test sandbox: no init"},
		{"exit 1", start(box{ran: Ran{Completed: true, Status: "completed", ExitCode: &code}, closed: &closed}), "test command ended completed"},
		{"killed", start(box{ran: Ran{Status: "killed", Reason: "oom"}, closed: &closed}), "test command ended killed (oom)"},
		{"landlock off", start(box{layers: []agent.Layer{{Name: "landlock", Detail: "kernel too old"}}, ran: namespaced(), closed: &closed}), "landlock (kernel too old)"},
	} {
		_, err := Run(context.Background(), Config{Start: c.start})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	if closed != 3 {
		t.Fatalf("%d boxes closed, want the 3 that started", closed)
	}
}

// TestTemplateRow: with a store, a template sandbox is started on a
// one-layer template the self-test stores; the row is active when the
// command sees the template's tree, and says why when it does not or a
// layer is out of force (reported, never failing the self-test).
func TestTemplateRow(t *testing.T) {
	st, err := template.Open(filepath.Join(t.TempDir(), "templates"), template.DefaultOptions())
	if err != nil {
		t.Skipf("no template store here: %v", err)
	}
	hasBusybox := template.StaticBusybox() != ""
	closed := 0
	for _, c := range []struct {
		name     string
		tmpl     box
		active   bool
		inDetail string
	}{
		{"sees the template", box{ran: Ran{Completed: true, Status: "completed", Stdout: "template\n0\n"}, closed: &closed}, true, "every layer in force"},
		{"sees the host", box{ran: Ran{Completed: true, Status: "completed", Stdout: "template\n412\n"}, closed: &closed}, !hasBusybox, map[bool]string{true: "no host /usr", false: "no static busybox"}[hasBusybox]},
		{"a layer off", box{layers: []agent.Layer{{Name: "seccomp"}}, closed: &closed}, false, "layers not in force in a template sandbox: [seccomp]"},
	} {
		var got *template.Template
		cfg := Config{Templates: st, Start: func(_ context.Context, tp *template.Template) (Box, error) {
			if tp == nil {
				return box{ran: namespaced(), closed: &closed}, nil
			}
			got = tp
			return c.tmpl, nil
		}}
		layers, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		row := layers[len(layers)-1]
		if row.Name != TemplateRow || row.Active != c.active || !strings.Contains(row.Detail, c.inDetail) {
			t.Errorf("%s: row %+v, want active %v with %q", c.name, row, c.active, c.inDetail)
		}
		if got == nil || len(got.Manifest.Layers) != 1 || got.Manifest.Source.Kind != "selftest" {
			t.Errorf("%s: the template sandbox was started on %+v, want the one-layer self-test template", c.name, got)
		}
	}
	if closed != 6 {
		t.Fatalf("%d boxes closed, want 6", closed)
	}
}

// TestLastKeepsTheLatestLayers: none before an init reported; then the
// latest report, as a copy a caller may change.
func TestLastKeepsTheLatestLayers(t *testing.T) {
	var l Last
	if got := l.Get(); len(got) != 0 {
		t.Fatalf("before any init: %v", got)
	}
	l.Note([]agent.Layer{{Name: "seccomp", Active: true}})
	l.Note([]agent.Layer{{Name: "landlock", Active: true}, {Name: "seccomp", Active: true}})
	got := l.Get()
	got[0].Active = false
	if again := l.Get(); len(again) != 2 || again[0].Name != "landlock" || !again[0].Active {
		t.Fatalf("kept %+v, want the latest report unchanged", again)
	}
}
