package release

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// rootEntry is one entry of a synthetic root tarball.
type rootEntry struct {
	name, body string
	typ        byte
	mtime      time.Time
	uname      string
	xattr      string
}

func writeRoot(t *testing.T, p string, entries []rootEntry) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, ModTime: e.mtime, AccessTime: e.mtime, ChangeTime: e.mtime, Uname: e.uname, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if e.typ == tar.TypeDir {
			h.Mode = 0o755
		}
		if e.xattr != "" {
			h.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": e.xattr}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

var epoch = time.Unix(1_780_000_000, 0).UTC()

// rootFixture is the same content twice: in another order, with other
// times (after the epoch, so clamped), other owner names and build noise
// the image leaves out (/dev, apt's lists).
func rootFixture(t *testing.T, dir string, variant int) string {
	later := epoch.Add(time.Duration(variant+1) * time.Hour)
	old := epoch.Add(-48 * time.Hour)
	es := []rootEntry{
		{name: "./", typ: tar.TypeDir, mtime: old},
		{name: "./usr/", typ: tar.TypeDir, mtime: old},
		{name: "./usr/bin/", typ: tar.TypeDir, mtime: later},
		{name: "./usr/bin/bash", typ: tar.TypeReg, body: "#!bash", mtime: old, uname: "root"},
		{name: "./usr/bin/ping", typ: tar.TypeReg, body: "ping", mtime: old, xattr: "\x01\x00\x00\x02"},
		{name: "./usr/local/", typ: tar.TypeDir, mtime: old},
		{name: "./etc/", typ: tar.TypeDir, mtime: later},
		{name: "./etc/os-release", typ: tar.TypeReg, body: "ID=debian\n", mtime: later},
	}
	if variant == 1 {
		for i, j := 0, len(es)-1; i < j; i, j = i+1, j-1 {
			es[i], es[j] = es[j], es[i]
		}
		es = append(es, rootEntry{name: "./dev/", typ: tar.TypeDir, mtime: later}, rootEntry{name: "./var/lib/apt/lists/x", typ: tar.TypeReg, body: "noise", mtime: later})
		es[0].uname = "someone"
	}
	p := filepath.Join(dir, "root.tar")
	writeRoot(t, p, es)
	return p
}

func fakeBinary(t *testing.T, dir, body string) string {
	p := filepath.Join(dir, "sandhold")
	if err := os.WriteFile(p, []byte("\x7fELF"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImageReproducible(t *testing.T) {
	base := t.TempDir()
	var infos []ImageInfo
	for i := range 2 {
		in := filepath.Join(base, "in", string(rune('a'+i)))
		if err := os.MkdirAll(in, 0o700); err != nil {
			t.Fatal(err)
		}
		info, err := BuildImage(ImageOptions{RootFS: rootFixture(t, in, i), Binary: fakeBinary(t, in, "same"), Created: epoch,
			Version: "v1.2.3", Commit: "abc", Out: filepath.Join(base, "out", string(rune('a'+i)))})
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if infos[0].RootFSSHA256 == infos[1].RootFSSHA256 {
		t.Fatal("the fixture's two root tarballs should differ as bytes")
	}
	if infos[0].Digest != infos[1].Digest || infos[0].ConfigDigest != infos[1].ConfigDigest {
		t.Fatalf("the same content gave two images:\n%+v\n%+v", infos[0], infos[1])
	}

	// Another binary is another image, and its root layer is the same.
	in := filepath.Join(base, "in", "c")
	_ = os.MkdirAll(in, 0o700)
	other, err := BuildImage(ImageOptions{RootFS: rootFixture(t, in, 0), Binary: fakeBinary(t, in, "other"), Created: epoch, Version: "v1.2.3", Commit: "abc", Out: filepath.Join(base, "out", "c")})
	if err != nil {
		t.Fatal(err)
	}
	if other.Digest == infos[0].Digest || other.Layers[0] != infos[0].Layers[0] || other.Layers[1] == infos[0].Layers[1] {
		t.Fatalf("binary change: %+v vs %+v", other, infos[0])
	}
}

func TestImageOutputs(t *testing.T) {
	dir := t.TempDir()
	info, err := BuildImage(ImageOptions{RootFS: rootFixture(t, dir, 1), Binary: fakeBinary(t, dir, "bin"), Created: epoch,
		Version: "v0.1.0", Commit: "deadbeef", Ref: "registry.example/sandhold:v0.1.0", Out: filepath.Join(dir, "out")})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")

	// docker load reads manifest.json: the tag, the config, the layers.
	tarPath := filepath.Join(out, ImageTarName)
	d, binSum, err := ImageOfTarball(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	if d != info.ConfigDigest || binSum != info.BinarySHA256 {
		t.Fatalf("tarball digest %s bin %s, built %+v", d, binSum, info)
	}
	f, _ := os.Open(tarPath)
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Name == "manifest.json" {
			if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 || manifest[0].RepoTags[0] != "registry.example/sandhold:v0.1.0" || len(manifest[0].Layers) != 2 ||
		manifest[0].Config != strings.TrimPrefix(info.ConfigDigest, "sha256:")+".json" && manifest[0].Config != info.ConfigDigest {
		t.Fatalf("manifest.json: %+v", manifest)
	}

	// The OCI layout holds the same image, by the same digest.
	idx, err := layout.ImageIndexFromPath(filepath.Join(out, ImageLayout))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != info.Digest ||
		im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v0.1.0" {
		t.Fatalf("layout index: %+v %v", im, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.Entrypoint[0] != "/usr/local/bin/sandhold" || cf.Config.Labels["org.opencontainers.image.revision"] != "deadbeef" || !cf.Created.Equal(epoch) || cf.Architecture != "amd64" {
		t.Fatalf("config: %+v", cf)
	}

	// The root layer: sorted, clamped, without the build's noise, with
	// the file capability kept.
	layers, _ := img.Layers()
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	lt := tar.NewReader(rc)
	var names []string
	for {
		h, err := lt.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.ModTime.After(epoch) || h.Uname != "" {
			t.Errorf("%s: time %v owner %q", h.Name, h.ModTime, h.Uname)
		}
		if h.Name == "usr/bin/ping" && h.PAXRecords["SCHILY.xattr.security.capability"] != "\x01\x00\x00\x02" {
			t.Errorf("ping lost its file capability: %v", h.PAXRecords)
		}
	}
	want := "etc/ etc/os-release usr/ usr/bin/ usr/bin/bash usr/bin/ping usr/local/"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("root layer entries:\n got %s\nwant %s", got, want)
	}
}

func TestImageRefusesANonELFBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sandhold")
	_ = os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o600)
	if _, err := BuildImage(ImageOptions{RootFS: rootFixture(t, dir, 0), Binary: bin, Created: epoch, Out: filepath.Join(dir, "out")}); err == nil {
		t.Fatal("a shell script was taken for the binary")
	}
}

// The release's image: the OCI archive's digest and binary are checked
// against the provenance; a swapped binary or image is caught.
func TestReleaseImageVerifies(t *testing.T) {
	dir := t.TempDir()
	rel := filepath.Join(dir, "rel")
	_ = os.MkdirAll(rel, 0o700)
	bin := filepath.Join(rel, BinaryName("amd64"))
	if err := os.WriteFile(bin, []byte("\x7fELFrelease"), 0o600); err != nil {
		t.Fatal(err)
	}
	info, err := releaseImage(t.Context(), rel, rootFixture(t, dir, 0), epoch.Unix(), "v1.0.0", "abc")
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{ImageArchiveName("amd64"): "x"}
	prov := Provenance{Image: info}
	if err := verifyImage(rel, prov, sums); err != nil {
		t.Fatalf("a good release: %v", err)
	}
	// The archive is reproducible too.
	first, _ := FileSHA256(filepath.Join(rel, ImageArchiveName("amd64")))
	if _, err := releaseImage(t.Context(), rel, rootFixture(t, dir, 1), epoch.Unix(), "v1.0.0", "abc"); err != nil {
		t.Fatal(err)
	}
	if again, _ := FileSHA256(filepath.Join(rel, ImageArchiveName("amd64"))); again != first {
		t.Fatal("the OCI archive differs between two builds of the same content")
	}

	for _, tc := range []struct {
		name   string
		mutate func(p *Provenance)
		want   string
	}{
		{"digest", func(p *Provenance) { p.Image.Digest = "sha256:" + strings.Repeat("0", 64) }, "provenance says"},
		{"binary", func(p *Provenance) { _ = os.WriteFile(bin, []byte("\x7fELFswapped"), 0o600) }, "is not the release's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *info
			p := Provenance{Image: &c}
			tc.mutate(&p)
			if err := verifyImage(rel, p, sums); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
