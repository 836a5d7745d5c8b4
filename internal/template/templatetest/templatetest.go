// Package templatetest builds template images for tests, offline, from
// what the host's Debian packages provide: a one-layer busybox root (the
// static busybox of busybox-static) and a Debian root with Python
// (mmdebstrap, cached between runs). A test that cannot have one skips with
// the reason.
package templatetest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/testenv"
)

// Marker is a file only the busybox template has, and its content.
const (
	Marker        = "/template-marker"
	MarkerContent = "made by templatetest\n"
)

// File is one extra file of a test layer.
type File struct {
	Name, Body string
	Mode       int64
	UID        int
}

// staticBusybox returns the host's static busybox or skips t.
func staticBusybox(t testing.TB) string {
	t.Helper()
	p := template.StaticBusybox()
	if p == "" {
		t.Skip("needs a static busybox (apt-get install busybox-static; make deps)")
	}
	return p
}

// BusyboxTar is a layer holding a static busybox with its applets in /bin
// (/usr/bin linked to it), an /etc/passwd with root and user (1000), the
// Marker, and extra files.
func BusyboxTar(t testing.TB, extra ...File) []byte {
	t.Helper()
	bb := staticBusybox(t)
	data, err := os.ReadFile(bb) //nolint:gosec // G304: the host's busybox
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bb, "--list").Output() //nolint:gosec // G204: the host's busybox
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(1_700_000_000, 0)
	write := func(h *tar.Header, body []byte) {
		h.ModTime = mtime
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if len(body) > 0 {
			if _, err := tw.Write(body); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, d := range []string{"bin/", "etc/", "tmp/", "proc/", "dev/", "root/", "home/", "home/user/", "usr/", "var/", "opt/", "workspace/"} {
		h := &tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}
		switch d {
		case "tmp/":
			h.Mode = 0o1777
		case "root/":
			h.Mode = 0o700
		case "home/user/":
			h.Uid, h.Gid = 1000, 1000
		}
		write(h, nil)
	}
	write(&tar.Header{Name: "usr/bin", Typeflag: tar.TypeSymlink, Linkname: "../bin"}, nil)
	write(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755}, data)
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" {
			write(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox"}, nil)
		}
	}
	files := append([]File{
		{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"},
		{Name: "etc/group", Body: "root:x:0:\nuser:x:1000:\n"},
		{Name: strings.TrimPrefix(Marker, "/"), Body: MarkerContent},
	}, extra...)
	for _, f := range files {
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		write(&tar.Header{Name: f.Name, Typeflag: tar.TypeReg, Mode: mode, Uid: f.UID, Gid: f.UID}, []byte(f.Body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Tar is a layer of the given files only.
func Tar(t testing.TB, files ...File) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.Name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(f.Body)),
			Uid: f.UID, Gid: f.UID, ModTime: time.Unix(1_700_000_000, 0)}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(f.Body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Digest is the sha256 digest of a layer stream.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Put stores a template of the given layers (lowest first) with cfg,
// named name:tag for c.
func Put(t testing.TB, s *template.Store, c template.Caller, name, tag string, cfg template.Config, layers ...io.Reader) template.Template {
	t.Helper()
	txn := s.Begin()
	defer txn.Close()
	m := template.Manifest{Config: cfg, Source: template.Source{Kind: "upload"}}
	for _, r := range layers {
		l, err := txn.AddLayer(context.Background(), r, template.LayerSource{})
		if err != nil {
			t.Fatal(err)
		}
		m.Layers = append(m.Layers, l)
	}
	uid, gid, err := s.ResolveUser(m.Layers, cfg.User)
	if err != nil {
		t.Fatal(err)
	}
	m.Config.UID, m.Config.GID = uid, gid
	tp, err := txn.Put(c, name, tag, m)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// DebianPython is a Debian bookworm root (minbase) with python3-minimal,
// as an uncompressed layer tar without device nodes, built once with
// mmdebstrap from the distribution's mirror the host's apt uses and kept in
// the user's cache directory ($XDG_CACHE_HOME/sandhold-test). It holds
// /etc/debian_version and Python 3.11. A host that cannot build it skips
// the test with the reason.
func DebianPython(t testing.TB) string {
	t.Helper()
	testenv.SkipShort(t, "builds a Debian root (minutes)")
	if os.Geteuid() != 0 {
		t.Skip("mmdebstrap --mode=root needs root")
	}
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil {
		t.Skip("needs mmdebstrap (apt-get install mmdebstrap; make deps)")
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "sandhold-test")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "debian-bookworm-python3-v1.tar")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	// One build at a time across test binaries.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // G304: the test cache
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil { //nolint:gosec // G115: a descriptor number
		t.Fatal(err)
	}
	if _, err := os.Stat(out); err == nil {
		return out
	}
	tmp := out + ".tmp"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mm, "--variant=minbase", "--include=python3-minimal", "--mode=root", "--format=tar", //nolint:gosec // G204: fixed arguments
		"--skip=output/dev", "bookworm", tmp)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	t.Logf("building a Debian root with mmdebstrap (once; cached in %s)", dir)
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		t.Skipf("mmdebstrap could not build a Debian root (no mirror reachable?): %v\n%s", err, tail(log.String(), 2000))
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Open opens a file a test reads a layer from.
func Open(t testing.TB, p string) *os.File {
	t.Helper()
	f, err := os.Open(p) //nolint:gosec // G304: a test fixture
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}
