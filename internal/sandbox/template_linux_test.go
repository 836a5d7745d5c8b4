package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/selfcheck"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/template/templatetest"
)

// templateManager is a manager whose store holds the busybox template
// "bb:1" (public) with cfg.
func templateManager(t *testing.T, cfg template.Config) (*Manager, *template.Store, template.Template) {
	t.Helper()
	c := testConfig(t)
	st, err := template.Open(filepath.Join(c.DataDir, "templates"), template.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	layer := templatetest.BusyboxTar(t, templatetest.File{Name: "etc/motd", Body: "image motd\n"})
	tp := templatetest.Put(t, st, template.Caller{KeyID: "admin", Admin: true}, "bb", "1", cfg, bytes.NewReader(layer))
	c.Templates = st
	m := newManager(t, c, nil)
	st.SetInUse(m.TemplatesInUse)
	return m, st, tp
}

func sh(t *testing.T, s *Sandbox, cmd string) Result {
	t.Helper()
	return run(t, s, ExecRequest{Command: cmd})
}

func TestTemplateSandboxRunsOnItsTemplate(t *testing.T) {
	m, _, tp := templateManager(t, template.Config{Env: []string{"FROM_TEMPLATE=yes", "PATH=/bin"}})
	s := create(t, m, Spec{Template: "bb:1"})
	in := s.Info()
	if in.Template != "bb:1" || in.TemplateDigest != tp.Digest {
		t.Fatalf("info names template %q %q, want bb:1 %s", in.Template, in.TemplateDigest, tp.Digest)
	}
	cases := []struct{ name, cmd, want string }{
		{"the template's files", "cat " + templatetest.Marker, templatetest.MarkerContent},
		{"not the host's /usr", "ls /usr/lib 2>&1; test -e /usr/bin/python3 || echo no-python", "ls: /usr/lib: No such file or directory\nno-python\n"},
		{"the template's env", "echo $FROM_TEMPLATE $PATH $HOME", "yes /bin /workspace\n"},
		{"root of its user namespace", "id -u; cat /proc/self/uid_map | tr -s ' ' | cut -d' ' -f2-3", "0\n0 1073"},
		{"starts in /workspace", "pwd", "/workspace\n"},
		{"the workspace is writable", "echo w > /workspace/f && cat /workspace/f", "w\n"},
		{"installing writes the writable layer", "mkdir -p /opt/tool && echo v1 > /opt/tool/VERSION && cat /opt/tool/VERSION && rm /etc/motd", "v1\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := sh(t, s, c.cmd)
			if !strings.HasPrefix(r.Stdout, c.want) {
				t.Errorf("%s: stdout %q stderr %q (%s), want %q", c.cmd, r.Stdout, r.Stderr, r.Status, c.want)
			}
		})
	}
	// The writable layer outlives the init: a stopped sandbox starts
	// again with it.
	s.shutdown()
	if r := sh(t, s, "cat /opt/tool/VERSION /workspace/f; test -e /etc/motd || echo motd-gone"); r.Stdout != "v1\nw\nmotd-gone\n" {
		t.Errorf("after a restart: %q %q", r.Stdout, r.Stderr)
	}
	// Another tenant's sandbox of the same template starts clean.
	other, err := m.Create(context.Background(), Caller{KeyID: "key-b"}, Spec{Template: "bb:1"})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := m.Get(Caller{KeyID: "key-b"}, other.ID)
	if r := sh(t, o, "ls /opt; cat /etc/motd; ls /workspace"); r.Stdout != "image motd\n" {
		t.Errorf("the second sandbox sees %q (stderr %q)", r.Stdout, r.Stderr)
	}
}

func TestTemplateSandboxUserAndWorkdir(t *testing.T) {
	m, _, _ := templateManager(t, template.Config{User: "user", WorkingDir: "/home/user"})
	s := create(t, m, Spec{Template: "bb:1"})
	r := sh(t, s, "id -u; id -g; pwd; echo $USER; touch /workspace/mine && stat -c %u /workspace/mine; echo x > /etc/passwd 2>/dev/null || echo refused")
	if r.Stdout != "1000\n1000\n/home/user\nuser\n1000\nrefused\n" {
		t.Errorf("got %q (stderr %q)", r.Stdout, r.Stderr)
	}
}

func TestTemplateSandboxWriteLayerCountsAgainstTheQuota(t *testing.T) {
	m, _, _ := templateManager(t, template.Config{})
	s := create(t, m, Spec{Template: "bb:1", Limits: Limits{DiskBytes: 32 << 20}})
	r := sh(t, s, "dd if=/dev/zero of=/opt/big bs=1M count=64 2>&1; echo rc=$?")
	if !strings.Contains(r.Stdout, "No space left") {
		t.Errorf("64 MB in /opt of a 32 MB quota: %q", r.Stdout)
	}
	if u := s.diskUsage(); u.UsedBytes < 16<<20 {
		t.Errorf("the quota counts %d bytes after filling /opt", u.UsedBytes)
	}
}

func TestTemplateRefusals(t *testing.T) {
	m, st, _ := templateManager(t, template.Config{})
	templatetest.Put(t, st, template.Caller{KeyID: "key-b"}, "private", "1", template.Config{}, bytes.NewReader(templatetest.Tar(t, templatetest.File{Name: "x", Body: "x"})))
	cases := []struct {
		name string
		spec Spec
		kind fault.Kind
	}{
		{"unknown template", Spec{Template: "nope:1"}, fault.NotFound},
		{"another key's template", Spec{Template: "private:1"}, fault.NotFound},
		{"bad reference", Spec{Template: "Bad Name"}, fault.Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := m.Create(context.Background(), owner, c.spec)
			if fault.KindOf(err) != c.kind {
				t.Errorf("got %v, want %s", err, c.kind)
			}
		})
	}
	// The host template is the default and is named so.
	s := create(t, m, Spec{Template: "host"})
	if in := s.Info(); in.Template != template.Host || in.TemplateDigest != "" {
		t.Errorf("host sandbox info: %q %q", in.Template, in.TemplateDigest)
	}
}

// TestTemplateKeptWhileUsed: removing a template's name does not take
// its layers from a sandbox that runs on it.
func TestTemplateKeptWhileUsed(t *testing.T) {
	m, st, tp := templateManager(t, template.Config{})
	s := create(t, m, Spec{Template: "bb:1"})
	if _, err := st.Remove(template.Caller{KeyID: "admin", Admin: true}, "bb:1"); err != nil {
		t.Fatal(err)
	}
	if n, _, err := st.GC(context.Background()); err != nil || n != 0 {
		t.Fatalf("GC removed %d layers of a used template: %v", n, err)
	}
	s.shutdown()
	if r := sh(t, s, "cat "+templatetest.Marker); r.Stdout != templatetest.MarkerContent {
		t.Errorf("after the name went: %q %q", r.Stdout, r.Stderr)
	}
	if err := m.Delete(context.Background(), owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	if n, _, err := st.GC(context.Background()); err != nil || n != 1 {
		t.Errorf("GC removed %d layers once the last sandbox went: %v", n, err)
	}
	if _, err := st.LayerDirs(tp.Digest); err == nil {
		t.Error("the template's layers are still there")
	}
}

// TestTemplateWarmPool: a pool per public template hands out its
// sandboxes to creates of that template, and follows its name to a new
// digest.
func TestTemplateWarmPool(t *testing.T) {
	c := testConfig(t)
	st, err := template.Open(filepath.Join(c.DataDir, "templates"), template.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	admin := template.Caller{KeyID: "admin", Admin: true}
	templatetest.Put(t, st, admin, "bb", "1", template.Config{}, bytes.NewReader(templatetest.BusyboxTar(t)))
	c.Templates, c.WarmPools = st, map[string]int{"bb:1": 1}
	m := newManager(t, c, nil)
	p := m.pools[1]
	ready := func() int {
		_, n := p.Status()
		return n
	}
	waitFor(t, func() bool { return ready() == 1 })
	var pooled string
	p.Each(func(ready []*Sandbox) { pooled = ready[0].ID() })
	s := create(t, m, Spec{Template: "bb:1"})
	if s.ID() != pooled {
		t.Errorf("the create did not take the pooled sandbox")
	}
	if r := sh(t, s, "cat "+templatetest.Marker); r.Stdout != templatetest.MarkerContent {
		t.Errorf("pooled sandbox: %q", r.Stdout)
	}
	// The name moves: the pool follows.
	moved := templatetest.Put(t, st, admin, "bb", "1", template.Config{}, bytes.NewReader(templatetest.BusyboxTar(t, templatetest.File{Name: "v2", Body: "2"})))
	waitFor(t, func() bool { return ready() == 1 })
	s2 := create(t, m, Spec{Template: "bb:1"})
	if s2.Info().TemplateDigest != moved.Digest {
		t.Errorf("a create after the move runs %s, want %s", s2.Info().TemplateDigest, moved.Digest)
	}
	waitFor(t, func() bool {
		// Once the ref moved it stays, and the move emptied the pool:
		// a sandbox ready after it is of the new ref.
		if p.Ref() != moved.Ref() {
			return false
		}
		_, n := p.Status()
		return n == 1
	})
}

// waitFor polls cond until it holds (the machine is loaded: no deadline
// but the test's own).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSelfTestCoversATemplateSandbox: the start-up self-test starts a
// template sandbox and reports it.
func TestSelfTestCoversATemplateSandbox(t *testing.T) {
	m, _, _ := templateManager(t, template.Config{})
	layers, err := m.SelfTest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	last := layers[len(layers)-1]
	if last.Name != selfcheck.TemplateRow || !last.Active || !strings.Contains(last.Detail, "not the host's /usr") {
		t.Errorf("the self-test's template row: %+v", last)
	}
}

// TestHostileTemplateIsNeutralised: a template whose layers whiteout
// /workspace, make /proc and /etc/hosts links out and carry a setuid
// binary still gives a sandbox its own /workspace, /proc and hosts, and no
// set-id bit.
func TestHostileTemplateIsNeutralised(t *testing.T) {
	c := testConfig(t)
	st, err := template.Open(filepath.Join(c.DataDir, "templates"), template.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var hostile bytes.Buffer
	tw := tar.NewWriter(&hostile)
	for _, h := range []*tar.Header{
		{Name: ".wh.workspace", Typeflag: tar.TypeReg},
		{Name: ".wh.proc", Typeflag: tar.TypeReg},
		{Name: "proc2", Typeflag: tar.TypeSymlink, Linkname: "/"},
		{Name: "etc/.wh.hosts", Typeflag: tar.TypeReg},
		{Name: "bin/suid", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 3},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte("#!x"))
		}
	}
	_ = tw.Close()
	var links bytes.Buffer
	tw = tar.NewWriter(&links)
	_ = tw.WriteHeader(&tar.Header{Name: "proc", Typeflag: tar.TypeSymlink, Linkname: "/"})
	_ = tw.WriteHeader(&tar.Header{Name: "etc/hosts", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"})
	_ = tw.Close()
	templatetest.Put(t, st, template.Caller{KeyID: "admin", Admin: true}, "hostile", "1", template.Config{},
		bytes.NewReader(templatetest.BusyboxTar(t)), bytes.NewReader(hostile.Bytes()), bytes.NewReader(links.Bytes()))
	c.Templates = st
	m := newManager(t, c, nil)
	s := create(t, m, Spec{Template: "hostile:1"})
	r := sh(t, s, "echo w > /workspace/f && cat /workspace/f; cat /proc/1/comm; grep -c localhost /etc/hosts; test -L /etc/hosts || echo not-a-link; stat -c %a /bin/suid")
	if r.Stdout != "w\nsandhold-init\n2\nnot-a-link\n755\n" {
		t.Errorf("hostile template: %q (stderr %q)", r.Stdout, r.Stderr)
	}
}

// TestTemplateSandboxInstallsAPackage: in a Debian template, apt-get
// installs a local package into the sandbox's writable layer (as the
// namespace's root, without capabilities), bounded by limits.disk.
func TestTemplateSandboxInstallsAPackage(t *testing.T) {
	deb := templatetest.DebianPython(t)
	dpkgDeb, err := exec.LookPath("dpkg-deb")
	if err != nil {
		t.Skip("needs dpkg-deb to make the test package")
	}
	pkg := t.TempDir()
	for p, body := range map[string]string{
		"DEBIAN/control":                    "Package: sandhold-test\nVersion: 1.0\nArchitecture: all\nMaintainer: test <t@example.com>\nDescription: a test package\n",
		"usr/share/sandhold-test/installed": "installed by apt\n",
	} {
		if err := os.MkdirAll(filepath.Join(pkg, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, p), []byte(body), 0o644); err != nil { //nolint:gosec // G306: a test package
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "pkg.deb")
	if b, err := exec.Command(dpkgDeb, "--root-owner-group", "--build", pkg, out).CombinedOutput(); err != nil { //nolint:gosec // G204: the host's dpkg-deb on a test dir
		t.Skipf("dpkg-deb: %v %s", err, b)
	}
	debBytes, err := os.ReadFile(out) //nolint:gosec // G304: the test's package
	if err != nil {
		t.Fatal(err)
	}
	c := testConfig(t)
	st, err := template.Open(filepath.Join(c.DataDir, "templates"), template.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(deb) //nolint:gosec // G304: the test cache
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	templatetest.Put(t, st, template.Caller{KeyID: "admin", Admin: true}, "debian", "12",
		template.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
		f, bytes.NewReader(templatetest.Tar(t, templatetest.File{Name: "opt/pkg.deb", Body: string(debBytes)},
			templatetest.File{Name: "etc/apt/apt.conf.d/00sandbox", Body: "APT::Sandbox::User \"root\";\n"})))
	c.Templates = st
	m := newManager(t, c, nil)
	s := create(t, m, Spec{Template: "debian:12"})
	r := run(t, s, ExecRequest{Command: "apt-get install -y /opt/pkg.deb 2>&1 | tail -5; echo rc=$?; cat /usr/share/sandhold-test/installed; dpkg -s sandhold-test | grep Status", Timeout: 5 * time.Minute})
	if !strings.Contains(r.Stdout, "Setting up sandhold-test") || !strings.Contains(r.Stdout, "rc=0\ninstalled by apt\nStatus: install ok installed") {
		t.Errorf("apt-get install in a template sandbox: %q %q", r.Stdout, r.Stderr)
	}
}
