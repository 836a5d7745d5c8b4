package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/template/templatetest"
)

var admin = template.Caller{KeyID: "kadmin", Admin: true}

func openStore(t *testing.T) *template.Store {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the template store sets owners: run as root")
	}
	st, err := template.Open(t.TempDir(), template.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// testImage is a busybox image with a second layer and a config.
func testImage(t *testing.T, extra ...templatetest.File) v1.Image {
	t.Helper()
	var layers []v1.Layer
	for _, b := range [][]byte{templatetest.BusyboxTar(t), templatetest.Tar(t, extra...)} {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Env: []string{"PATH=/bin", "IMAGE=test"}, WorkingDir: "/home/user", User: "user", Cmd: []string{"/bin/sh"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// serve runs an in-process registry holding img at repo:tag and returns its
// host and the number of requests that carried credentials.
func serve(t *testing.T, img v1.Image, repo string, auth string) (host string, authed *atomic.Int64) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	authed = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "" {
			authed.Add(1)
			if auth != "" && got != "Basic "+auth {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		} else if auth != "" && r.Method == http.MethodGet {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	ref, err := name.ParseReference(u.Host + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	opts := []remote.Option{}
	if auth != "" {
		raw, _ := base64.StdEncoding.DecodeString(auth)
		user, pass, _ := strings.Cut(string(raw), ":")
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: user, Password: pass}))
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		t.Fatal(err)
	}
	return u.Host, authed
}

func TestPullStoresTheImage(t *testing.T) {
	st := openStore(t)
	img := testImage(t, templatetest.File{Name: "etc/image-release", Body: "pulled\n"})
	host, _ := serve(t, img, "team/busybox:1", "")
	p, err := NewPuller(st, PullerOptions{Registries: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	var events []template.Event
	tp, err := p.Pull(context.Background(), admin, PullArgs{Image: host + "/team/busybox:1", Name: "bb", Tag: "1",
		Overrides: Overrides{Limits: template.Limits{MemoryBytes: 64 << 20}}, Progress: func(e template.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if tp.Manifest.Source.ImageDigest != want.String() || !strings.HasSuffix(tp.Manifest.Source.Image, "@"+want.String()) {
		t.Errorf("source %+v, want the image's digest %s", tp.Manifest.Source, want)
	}
	cfg := tp.Manifest.Config
	if cfg.User != "user" || cfg.UID != 1000 || cfg.WorkingDir != "/home/user" || cfg.Limits.MemoryBytes != 64<<20 || len(tp.Manifest.Layers) != 2 {
		t.Errorf("config %+v, %d layers", cfg, len(tp.Manifest.Layers))
	}
	if b, err := st.ReadFile(tp.Manifest.Layers, "etc/image-release", 100); err != nil || string(b) != "pulled\n" {
		t.Errorf("the pulled layer: %q %v", b, err)
	}
	if len(events) != 4 || events[3].Step != "done" {
		t.Errorf("progress %+v", events)
	}
	// Pulled again, every layer is already in the store.
	events = nil
	if _, err := p.Pull(context.Background(), admin, PullArgs{Image: host + "/team/busybox:1", Name: "bb", Tag: "2", Progress: func(e template.Event) { events = append(events, e) }}); err != nil {
		t.Fatal(err)
	}
	if !events[1].Cached || !events[2].Cached {
		t.Errorf("a second pull fetched layers again: %+v", events)
	}
}

func TestPullRefusals(t *testing.T) {
	st := openStore(t)
	host, _ := serve(t, testImage(t), "x:1", "")
	cases := []struct {
		name       string
		registries []string
		image      string
		kind       fault.Kind
		msg        string
	}{
		{"no registry allowed", nil, host + "/x:1", fault.Forbidden, "SANDBOX_REGISTRIES"},
		{"another registry", []string{"registry.example.com"}, host + "/x:1", fault.Forbidden, "not in SANDBOX_REGISTRIES"},
		{"docker hub by default name", []string{host}, "python:3.12", fault.Forbidden, "index.docker.io"},
		{"bad reference", []string{host}, "UPPER CASE", fault.Invalid, "image"},
		{"missing tag", []string{host}, host + "/x:nope", fault.Unavailable, "resolve"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPuller(st, PullerOptions{Registries: c.registries})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Pull(context.Background(), admin, PullArgs{Image: c.image, Name: "x"})
			if fault.KindOf(err) != c.kind || !strings.Contains(fault.Public(err), c.msg) {
				t.Errorf("got %v (%s), want %s mentioning %q", err, fault.KindOf(err), c.kind, c.msg)
			}
		})
	}
}

// TestPullUsesTheServersCredentials: a private registry gets the
// credentials from the server's file, and they appear in no error.
func TestPullUsesTheServersCredentials(t *testing.T) {
	st := openStore(t)
	auth := base64.StdEncoding.EncodeToString([]byte("robot:s3cret-pass"))
	host, authed := serve(t, testImage(t), "private:1", auth)
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)), 0o600); err != nil {
		t.Fatal(err)
	}
	anon, _ := NewPuller(st, PullerOptions{Registries: []string{host}})
	_, err := anon.Pull(context.Background(), admin, PullArgs{Image: host + "/private:1", Name: "p"})
	if err == nil {
		t.Fatal("an anonymous pull of a private image succeeded")
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(bad, []byte(fmt.Sprintf(`{"auths":{%q:{"username":"robot","password":"wrong-s3cret"}}}`, host)), 0o600)
	wrong, _ := NewPuller(st, PullerOptions{Registries: []string{host}, AuthFile: bad})
	_, err = wrong.Pull(context.Background(), admin, PullArgs{Image: host + "/private:1", Name: "p"})
	if err == nil || strings.Contains(err.Error(), "wrong-s3cret") || strings.Contains(fault.Public(err), "s3cret") {
		t.Fatalf("wrong credentials: %v", err)
	}
	p, err := NewPuller(st, PullerOptions{Registries: []string{host}, AuthFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pull(context.Background(), admin, PullArgs{Image: host + "/private:1", Name: "p"}); err != nil {
		t.Fatalf("pull with the server's credentials: %v", err)
	}
	if authed.Load() == 0 {
		t.Error("no request carried the credentials")
	}
}

// tarDir packs a directory (an OCI layout) as an upload.
func tarDir(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h, _ := tar.FileInfoHeader(fi, "")
		h.Name = rel
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p) //nolint:gosec // G304: the test's layout
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = tw.Close()
	return buf.Bytes()
}

func TestImportLayoutAndDockerSave(t *testing.T) {
	st := openStore(t)
	img := testImage(t, templatetest.File{Name: "etc/image-release", Body: "uploaded\n"})
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	var save bytes.Buffer
	tag, _ := name.NewTag("example/busybox:1")
	if err := tarball.Write(tag, img, &save); err != nil {
		t.Fatal(err)
	}
	im := NewImporter(st, t.TempDir(), 1<<30)
	want, _ := img.Digest()
	for _, c := range []struct {
		name string
		body []byte
	}{{"oci layout", tarDir(t, dir)}, {"docker save", save.Bytes()}} {
		t.Run(c.name, func(t *testing.T) {
			tp, err := im.Import(context.Background(), admin, ImportArgs{Name: "up", Tag: strings.ReplaceAll(c.name, " ", "-"), Body: bytes.NewReader(c.body)})
			if err != nil {
				t.Fatal(err)
			}
			if tp.Manifest.Source.Kind != "upload" || (c.name == "oci layout" && tp.Manifest.Source.ImageDigest != want.String()) {
				t.Errorf("source %+v", tp.Manifest.Source)
			}
			if b, err := st.ReadFile(tp.Manifest.Layers, "etc/image-release", 100); err != nil || string(b) != "uploaded\n" {
				t.Errorf("the uploaded layer: %q %v", b, err)
			}
		})
	}
}

func TestImportRefusals(t *testing.T) {
	st := openStore(t)
	hostile := func(entries ...templatetest.File) []byte { return templatetest.Tar(t, entries...) }
	cases := []struct {
		name string
		body []byte
		max  int64
		kind fault.Kind
	}{
		{"not a tar", []byte("hello"), 1 << 20, fault.Invalid},
		{"neither layout nor save", hostile(templatetest.File{Name: "README", Body: "x"}), 1 << 20, fault.Invalid},
		{"a layout with a stray file", hostile(templatetest.File{Name: "oci-layout", Body: `{"imageLayoutVersion":"1.0.0"}`},
			templatetest.File{Name: "index.json", Body: `{}`}, templatetest.File{Name: "../../etc/cron.d/x", Body: "x"}), 1 << 20, fault.Invalid},
		{"too large", hostile(templatetest.File{Name: "big", Body: strings.Repeat("x", 4096)}), 1024, fault.TooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			im := NewImporter(st, tmp, c.max)
			_, err := im.Import(context.Background(), admin, ImportArgs{Name: "bad", Body: bytes.NewReader(c.body)})
			if fault.KindOf(err) != c.kind {
				t.Errorf("got %v, want %s", err, c.kind)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("staging holds %d entries", len(left))
			}
		})
	}
}
