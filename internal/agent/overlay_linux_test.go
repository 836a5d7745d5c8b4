package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/rootfs"
)

// busyboxLayer makes a layer directory holding a static busybox and its
// applets, an /etc/passwd and a marker file only this template has.
func busyboxLayer(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("needs busybox-static (make deps)")
	}
	if out, err := exec.Command("file", "-L", bb).CombinedOutput(); err == nil && !strings.Contains(string(out), "statically linked") {
		t.Skip("needs a static busybox (busybox-static)")
	}
	dir := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin", "etc", "tmp", "proc", "dev", "root", "home/user", "opq"} {
		mk(d)
	}
	data, err := os.ReadFile(bb) //nolint:gosec // G304: the host's busybox
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), data, 0o755); err != nil { //nolint:gosec // G306: a test layer
		t.Fatal(err)
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			_ = os.Symlink("busybox", filepath.Join(dir, "bin", applet))
		}
	}
	files := map[string]string{
		"etc/passwd":      "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n",
		"etc/group":       "root:x:0:\nuser:x:1000:\n",
		"template-marker": "from the layer\n",
		"gone":            "deleted by the upper layer\n",
		"opq/hidden":      "hidden by an opaque directory above\n",
		"etc/hosts":       "image hosts\n",
		"etc/motd":        "removable\n",
	}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil { //nolint:gosec // G306: a test layer
			t.Fatal(err)
		}
	}
	if err := os.Chown(filepath.Join(dir, "home/user"), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	// A hostile touch: /proc is a link to the host's root.
	if err := os.Remove(filepath.Join(dir, "proc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(dir, "proc")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// whiteoutLayer makes a layer above busyboxLayer: a whiteout of /gone and
// an opaque /opq (the store's on-disk form).
func whiteoutLayer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mknod(filepath.Join(dir, "gone"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "opq"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(dir, "opq"), "user.overlay.opaque", []byte("y"), 0); err != nil {
		t.Skip("the test directory takes no user xattrs:", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "opq", "new"), []byte("above\n"), 0o644); err != nil { //nolint:gosec // G306: a test layer
		t.Fatal(err)
	}
	return dir
}

// launchOverlay starts an init whose root is an overlay of layers, with
// its writable layer in a fresh directory it returns.
func launchOverlay(t *testing.T, layers []string, uid int) (*testSandbox, string) {
	t.Helper()
	rw := t.TempDir()
	var base uint32
	ts := launchWith(t, func(s *proto.Setup) {
		s.UID, s.GID = uid, uid
		s.Root = &proto.RootSetup{Template: "test@sha256:0", Layers: len(layers)}
	}, func(ls *LaunchSpec) {
		base = ls.HostUID
		for _, d := range []string{rootfs.UpperDir, rootfs.WorkDir} {
			if err := os.Mkdir(filepath.Join(rw, d), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(filepath.Join(rw, d), int(base), int(base)); err != nil {
				t.Fatal(err)
			}
		}
		// The workspace belongs to the template's user.
		if err := unix.Fchownat(int(ls.Workspace.Fd()), "", int(base)+uid, int(base)+uid, unix.AT_EMPTY_PATH); err != nil {
			t.Fatal(err)
		}
		ls.RootFiles = func(pid int) ([]*os.File, error) {
			userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil, err
			}
			defer func() { _ = unix.Close(userns) }()
			w, err := rootfs.DetachedMount(rw)
			if err != nil {
				return nil, err
			}
			files := []*os.File{w}
			for _, l := range layers {
				f, err := rootfs.DetachedLayer(l, userns)
				if err != nil {
					proto.CloseAll(files)
					return nil, err
				}
				files = append(files, f)
			}
			return files, nil
		}
	})
	return ts, rw
}

func TestInitBuildsAnOverlayRoot(t *testing.T) {
	lower, upper := busyboxLayer(t), whiteoutLayer(t)
	ts, rw := launchOverlay(t, []string{lower, upper}, 0)
	for _, l := range ts.Ready.Layers {
		if !l.Active {
			t.Errorf("layer %s inactive: %s", l.Name, l.Detail)
		}
		if l.Name == "root file system" && !strings.Contains(l.Detail, "overlay root of template test@sha256:0") {
			t.Errorf("root layer says %q", l.Detail)
		}
	}
	cases := []struct {
		name, script, want string
	}{
		{"the layer's files", "cat /template-marker", "from the layer\n"},
		{"no host /usr", "ls /usr 2>&1; test -e /usr/bin/python3 && echo host", "ls: /usr: No such file or directory\n"},
		{"whiteout hides a lower file", "test -e /gone || echo gone", "gone\n"},
		{"opaque directory", "ls /opq", "new\n"},
		{"owners id-mapped", "stat -c '%u %g' /bin/busybox /home/user", "0 0\n1000 1000\n"},
		{"proc is the sandbox's, not the image's link", "cat /proc/1/comm; test -L /proc && echo link", "sandhold-init\n"},
		{"proc masked", "wc -c < /proc/kallsyms", "0\n"},
		{"hostname and hosts are sandhold's", "cat /etc/hostname; grep -c localhost /etc/hosts", "sandbox\n2\n"},
		{"synthetic /etc is read-only", "echo x > /etc/hosts 2>/dev/null || echo refused", "refused\n"},
		{"root inside", "id -u", "0\n"},
		{"writes to the image land in the writable layer", "echo new > /etc/added && rm /etc/motd && cat /etc/added", "new\n"},
		{"workspace is writable", "echo w > /workspace/f && cat /workspace/f", "w\n"},
		{"devices", "echo x > /dev/null && head -c 4 /dev/zero | wc -c", "4\n"},
		{"a new top-level directory is refused", "mkdir /newtop 2>/dev/null || echo refused", "refused\n"},
		{"a top-level file cannot be removed", "rm /template-marker 2>/dev/null || echo refused", "refused\n"},
		{"no setuid", "grep -c nosuid /proc/self/mounts >/dev/null && echo ok", "ok\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.run(t, "/bin/sh", "-c", c.script)
			if r.stdout != c.want {
				t.Errorf("%s: got %q (stderr %q, exit %+v), want %q", c.script, r.stdout, r.stderr, r.exit, c.want)
			}
		})
	}
	// The writes went to the sandbox's writable layer, owned by the
	// sandbox's root (an unprivileged host uid), and the layers are
	// untouched.
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(rw, rootfs.UpperDir, "etc", "added"), &st); err != nil {
		t.Fatalf("the write is not in the upper directory: %v", err)
	}
	if st.Uid < 1<<30 {
		t.Errorf("the upper file belongs to host uid %d, want the sandbox's unprivileged range", st.Uid)
	}
	if err := unix.Lstat(filepath.Join(rw, rootfs.UpperDir, "etc", "motd"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("the removal is not a whiteout in the upper directory: %v %o", err, st.Mode)
	}
	if b, err := os.ReadFile(filepath.Join(lower, "template-marker")); err != nil || string(b) != "from the layer\n" {
		t.Errorf("the layer changed: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(lower, "etc", "added")); err == nil {
		t.Error("a write reached the layer")
	}
}

// TestOverlayLayersAreReadOnly: even the sandbox's root cannot write a
// layer through a path that bypasses the overlay (there is none: the layer
// mounts are not in its tree), and two sandboxes of one template share no
// writable state.
func TestOverlayLayersAreShared(t *testing.T) {
	lower := busyboxLayer(t)
	a, _ := launchOverlay(t, []string{lower}, 0)
	b, _ := launchOverlay(t, []string{lower}, 1000)
	if r := a.run(t, "/bin/sh", "-c", "echo a > /etc/mine && cat /etc/mine"); r.stdout != "a\n" {
		t.Fatalf("write in a: %q %q", r.stdout, r.stderr)
	}
	if r := b.run(t, "/bin/sh", "-c", "cat /etc/mine 2>&1; id -u"); !strings.Contains(r.stdout, "No such file") || !strings.HasSuffix(r.stdout, "1000\n") {
		t.Errorf("b sees a's write or runs as the wrong user: %q", r.stdout)
	}
	if r := b.run(t, "/bin/sh", "-c", "echo x > /etc/passwd 2>/dev/null || echo refused"); r.stdout != "refused\n" {
		t.Errorf("uid 1000 wrote root's /etc/passwd: %q", r.stdout)
	}
	if r := a.run(t, "/bin/sh", "-c", "grep -c ' / overlay ' /proc/self/mounts; grep '/tmp/l/' /proc/self/mountinfo | grep -vc ' - overlay '"); r.stdout != "1\n0\n" {
		t.Errorf("mounts inside: %q", r.stdout)
	}
}
