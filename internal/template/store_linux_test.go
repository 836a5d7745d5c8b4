package template

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

func layerTar(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	return buf.Bytes()
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func openStore(t *testing.T, dir string) *Store {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the template store sets owners and makes whiteouts: run as root")
	}
	s, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	admin = Caller{KeyID: "kadmin", Admin: true}
	alice = Caller{KeyID: "kalice"}
	bob   = Caller{KeyID: "kbob"}
)

// put adds one template of the given layers for c.
func put(t *testing.T, s *Store, c Caller, name, tag string, layers ...[]byte) Template {
	t.Helper()
	txn := s.Begin()
	defer txn.Close()
	var m Manifest
	for _, b := range layers {
		l, err := txn.AddLayer(context.Background(), bytes.NewReader(b), LayerSource{DiffID: digestOf(b)})
		if err != nil {
			t.Fatal(err)
		}
		m.Layers = append(m.Layers, l)
	}
	m.Source = Source{Kind: "upload"}
	tp, err := txn.Put(c, name, tag, m)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func TestStoreNamesOwnersAndDigests(t *testing.T) {
	s := openStore(t, t.TempDir())
	base := layerTar(t, map[string]string{"etc/os-release": "base\n"})
	pub := put(t, s, admin, "python", "3.12", base)
	mine := put(t, s, alice, "python", "3.12", base, layerTar(t, map[string]string{"alice": "x"}))
	if pub.Owner != "" || mine.Owner != alice.KeyID {
		t.Fatalf("owners %q %q", pub.Owner, mine.Owner)
	}
	cases := []struct {
		name   string
		c      Caller
		ref    string
		digest string
		kind   fault.Kind
	}{
		{"alice gets her own first", alice, "python:3.12", mine.Digest, ""},
		{"bob gets the public one", bob, "python:3.12", pub.Digest, ""},
		{"bob cannot name alice's by digest", bob, mine.Digest, "", fault.NotFound},
		{"bob names the public one by digest", bob, "python:3.12@" + pub.Digest, pub.Digest, ""},
		{"a digest that is not the name's", bob, "python:3.12@" + mine.Digest, "", fault.NotFound},
		{"admin sees alice's by digest", admin, mine.Digest, mine.Digest, ""},
		{"unknown", alice, "nope", "", fault.NotFound},
		{"latest is the default tag", alice, "python", "", fault.NotFound},
		{"bad name", alice, "Python!", "", fault.Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp, err := s.Resolve(c.c, c.ref)
			if c.kind != "" {
				if fault.KindOf(err) != c.kind {
					t.Fatalf("got %v, want %s", err, c.kind)
				}
				return
			}
			if err != nil || tp.Digest != c.digest {
				t.Fatalf("got %s %v, want %s", tp.Digest, err, c.digest)
			}
		})
	}
	if n := len(s.List(bob)); n != 1 {
		t.Errorf("bob lists %d templates, want the public one", n)
	}
	if _, err := s.Remove(bob, "python:3.12"); fault.KindOf(err) != fault.Forbidden {
		t.Errorf("bob removed the public template: %v", err)
	}
	// The store survives a restart.
	again, err := Open(s.dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if tp, err := again.Resolve(alice, "python:3.12"); err != nil || tp.Digest != mine.Digest {
		t.Errorf("after reopening: %s %v", tp.Digest, err)
	}
}

func TestStoreRefusesWrongDigest(t *testing.T) {
	s := openStore(t, t.TempDir())
	txn := s.Begin()
	defer txn.Close()
	b := layerTar(t, map[string]string{"a": "1"})
	_, err := txn.AddLayer(context.Background(), bytes.NewReader(b), LayerSource{DiffID: digestOf([]byte("something else"))})
	if fault.KindOf(err) != fault.Invalid {
		t.Fatalf("got %v, want invalid", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.dir, "layers")); len(entries) != 0 {
		t.Errorf("the refused layer left %d entries", len(entries))
	}
	if entries, _ := os.ReadDir(filepath.Join(s.dir, "tmp")); len(entries) != 0 {
		t.Errorf("staging holds %d entries", len(entries))
	}
}

func TestStoreGC(t *testing.T) {
	s := openStore(t, t.TempDir())
	shared := layerTar(t, map[string]string{"shared": "s"})
	a := put(t, s, alice, "a", "1", shared, layerTar(t, map[string]string{"only-a": "a"}))
	b := put(t, s, alice, "b", "1", shared)
	used := map[string]bool{}
	s.SetInUse(func() map[string]bool { return used })
	if _, err := s.Remove(alice, "a:1"); err != nil {
		t.Fatal(err)
	}
	used[a.Digest] = true // a sandbox of a still runs
	if n, _, err := s.GC(context.Background()); err != nil || n != 0 {
		t.Fatalf("GC removed %d layers of a template a sandbox uses (%v)", n, err)
	}
	delete(used, a.Digest)
	n, freed, err := s.GC(context.Background())
	if err != nil || n != 1 || freed == 0 {
		t.Fatalf("GC removed %d layers (%d bytes), want a's own one: %v", n, freed, err)
	}
	if _, err := s.LayerDirs(b.Digest); err != nil {
		t.Errorf("b lost a layer it shares: %v", err)
	}
	// A transaction's layers are kept until it closes.
	txn := s.Begin()
	l, err := txn.AddLayer(context.Background(), bytes.NewReader(layerTar(t, map[string]string{"pending": "p"})), LayerSource{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := s.GC(context.Background()); n != 0 {
		t.Error("GC removed a layer a pull holds")
	}
	txn.Close()
	if n, _, _ := s.GC(context.Background()); n != 1 {
		t.Error("GC kept a released layer")
	}
	if _, err := os.Lstat(s.layerPath(l.Digest)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the layer's directory is still there: %v", err)
	}
}

func TestStoreResolvesUserThroughLayers(t *testing.T) {
	s := openStore(t, t.TempDir())
	base := layerTar(t, map[string]string{
		"etc/passwd": "root:x:0:0::/root:/bin/sh\napp:x:1001:1002::/home/app:/bin/sh\nold:x:1003:1003::/:/bin/sh\n",
		"etc/group":  "root:x:0:\nstaff:x:50:\n",
	})
	var up bytes.Buffer
	tw := tar.NewWriter(&up)
	_ = tw.WriteHeader(&tar.Header{Name: "etc/.wh.group", Typeflag: tar.TypeReg, Mode: 0o644})
	_ = tw.Close()
	tp := put(t, s, admin, "u", "1", base, up.Bytes())
	cases := []struct {
		user     string
		uid, gid int
		bad      bool
	}{
		{"", 0, 0, false},
		{"app", 1001, 1002, false},
		{"1001", 1001, 1002, false},
		{"4242", 4242, 0, false},
		{"app:77", 1001, 77, false},
		{"app:staff", 0, 0, true}, // /etc/group is whited out above
		{"nobody-here", 0, 0, true},
		{"70000", 0, 0, true},
	}
	for _, c := range cases {
		uid, gid, err := s.ResolveUser(tp.Manifest.Layers, c.user)
		if c.bad != (err != nil) || (!c.bad && (uid != c.uid || gid != c.gid)) {
			t.Errorf("user %q: %d:%d %v", c.user, uid, gid, err)
		}
	}
}

func TestStoreRefusesWithoutRoom(t *testing.T) {
	s := openStore(t, t.TempDir())
	s.SetRoom(func() int64 { return 10 })
	txn := s.Begin()
	defer txn.Close()
	_, err := txn.AddLayer(context.Background(), bytes.NewReader(layerTar(t, map[string]string{"big": "0123456789abcdef"})), LayerSource{})
	if fault.KindOf(err) != fault.TooLarge {
		t.Fatalf("got %v, want too_large", err)
	}
	s.SetRoom(func() int64 { return 0 })
	if _, err := txn.AddLayer(context.Background(), bytes.NewReader(layerTar(t, map[string]string{"a": "1"})), LayerSource{}); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("got %v, want conflict", err)
	}
}

func TestParseRef(t *testing.T) {
	d := "sha256:" + string(bytes.Repeat([]byte("a"), 64))
	cases := []struct {
		in   string
		want Ref
		bad  bool
	}{
		{"python", Ref{Name: "python", Tag: "latest"}, false},
		{"python-data:3.12", Ref{Name: "python-data", Tag: "3.12"}, false},
		{"team.py:1@" + d, Ref{Name: "team.py", Tag: "1", Digest: d}, false},
		{"team/py:1", Ref{}, true},
		{d, Ref{Digest: d}, false},
		{"Py", Ref{}, true},
		{"a:", Ref{}, true},
		{"a@sha256:zz", Ref{}, true},
		{"../x", Ref{}, true},
		{"", Ref{}, true},
	}
	for _, c := range cases {
		r, err := ParseRef("template", c.in)
		if c.bad != (err != nil) || (!c.bad && r != c.want) {
			t.Errorf("%q: %+v %v", c.in, r, err)
		}
	}
}
