package release

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The container image, built without a Docker daemon: two layers, a
// Debian root (made by mmdebstrap from Debian's packages, `make image`)
// and the static binary, assembled here with go-containerregistry. Every
// byte is a function of the two inputs and SOURCE_DATE_EPOCH: entries in
// name order, times clamped to the epoch, owners numeric, no atime or
// ctime, gzip without a name or time. So the same root tarball and binary
// give the same digest on any machine (TestImageReproducible).
//
// In a pod the image's /usr is the "host" template: the built-in template
// binds the host's /usr read-only into each sandbox, and in a pod that host
// is this image. What sandboxes can run (bash, python3, node, git, …) is
// therefore what the root layer holds; see docs/kubernetes.md.

// ImageOptions say what the image is made of.
type ImageOptions struct {
	// RootFS is a tar of the root file system (mmdebstrap --format=tar).
	RootFS string
	// Binary is the static sandhold binary (linux, Arch).
	Binary string
	Arch   string
	// Created is SOURCE_DATE_EPOCH: every time in the image.
	Created time.Time
	// Version and Commit label the image (org.opencontainers.image.*).
	Version, Commit string
	// Ref names the image in the docker-load tarball (repository:tag).
	Ref string
	// Out is the directory written: oci/ (an OCI image layout),
	// ImageTarName (docker load) and ImageInfoName.
	Out string
}

// ImageInfo is what a build made (ImageInfoName in Out, and the release's
// provenance).
type ImageInfo struct {
	Ref string `json:"ref"`
	// Digest is the manifest's digest: what a registry serves the image
	// by once the OCI layout is copied there (crane push, skopeo copy
	// oci:), and what the Helm chart's image.digest takes.
	Digest string `json:"digest"`
	// ConfigDigest is the image id `docker load` reports.
	ConfigDigest string `json:"config_digest"`
	Arch         string `json:"arch"`
	// RootFSSHA256 and BinarySHA256 are the inputs' digests.
	RootFSSHA256 string   `json:"rootfs_sha256"`
	BinarySHA256 string   `json:"binary_sha256"`
	Layers       []string `json:"layers"` // diff ids, root first
	Created      int64    `json:"source_date_epoch"`
}

// File names in ImageOptions.Out.
const (
	ImageTarName  = "sandhold-image.tar"
	ImageInfoName = "image.json"
	ImageLayout   = "oci"
	// ImageBinaryPath is where the binary lives in the image.
	ImageBinaryPath = "usr/local/bin/sandhold"
	// ImageDataDir is the data dir (the chart mounts its volume there).
	ImageDataDir = "var/lib/sandhold"
)

// dropFromRoot are paths of the root tarball the image leaves out: the
// container runtime makes /dev, /proc and /sys; apt's caches and lists and
// the logs are the build's, not the image's. A dropped directory's
// contents go with it.
var dropFromRoot = []string{"dev", "proc", "sys", "var/cache/apt", "var/lib/apt/lists", "var/log", "var/cache/ldconfig/aux-cache", "etc/machine-id", "etc/hostname", "etc/resolv.conf"}

// BuildImage assembles the image and writes it to o.Out.
func BuildImage(o ImageOptions) (ImageInfo, error) {
	var info ImageInfo
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	if o.Ref == "" {
		o.Ref = "ghcr.io/sandhold/sandhold:dev"
	}
	ref, err := name.NewTag(o.Ref)
	if err != nil {
		return info, fmt.Errorf("image ref %q: %w", o.Ref, err)
	}
	created := o.Created.UTC().Truncate(time.Second)
	if err := os.MkdirAll(o.Out, 0o750); err != nil {
		return info, err
	}
	work, err := os.MkdirTemp(o.Out, ".layers-")
	if err != nil {
		return info, err
	}
	defer func() { _ = os.RemoveAll(work) }()

	rootTar := filepath.Join(work, "root.tar")
	rootSum, err := normalizeRoot(o.RootFS, rootTar, created)
	if err != nil {
		return info, fmt.Errorf("root layer from %s: %w", o.RootFS, err)
	}
	binTar := filepath.Join(work, "bin.tar")
	binSum, err := binaryLayer(o.Binary, binTar, created)
	if err != nil {
		return info, fmt.Errorf("binary layer: %w", err)
	}
	var layers []v1.Layer
	for _, p := range []string{rootTar, binTar} {
		l, err := tarball.LayerFromFile(p, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
		if err != nil {
			return info, err
		}
		layers = append(layers, l)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for i, l := range layers {
		what := []string{"the Debian root (mmdebstrap; see docs/kubernetes.md)", "the sandhold binary " + o.Version}[i]
		img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: what}})
		if err != nil {
			return info, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return info, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = o.Arch, "linux"
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		Entrypoint:   []string{"/" + ImageBinaryPath},
		Cmd:          []string{"serve"},
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SANDBOX_DATA_DIR=/" + ImageDataDir},
		User:         "0:0",
		WorkingDir:   "/",
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
		Volumes:      map[string]struct{}{"/" + ImageDataDir: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "sandhold",
			"org.opencontainers.image.description": "secure multi-tenant sandbox server for AI agents",
			"org.opencontainers.image.version":     o.Version,
			"org.opencontainers.image.revision":    o.Commit,
			"org.opencontainers.image.created":     created.Format(time.RFC3339),
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return info, err
	}
	digest, err := img.Digest()
	if err != nil {
		return info, err
	}
	cfgDigest, err := img.ConfigName()
	if err != nil {
		return info, err
	}

	// The OCI layout (a fresh directory each time) and the docker-load
	// tarball, each written beside and renamed into place.
	lay := filepath.Join(o.Out, ImageLayout)
	tmpLay := filepath.Join(work, ImageLayout)
	p, err := layout.Write(tmpLay, empty.Index)
	if err != nil {
		return info, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.TagStr()})); err != nil {
		return info, err
	}
	if err := os.RemoveAll(lay); err != nil {
		return info, err
	}
	if err := os.Rename(tmpLay, lay); err != nil {
		return info, err
	}
	tmpTar := filepath.Join(work, ImageTarName)
	if err := tarball.WriteToFile(tmpTar, ref, img); err != nil {
		return info, err
	}
	if err := os.Rename(tmpTar, filepath.Join(o.Out, ImageTarName)); err != nil {
		return info, err
	}
	info = ImageInfo{Ref: o.Ref, Digest: digest.String(), ConfigDigest: cfgDigest.String(), Arch: o.Arch,
		RootFSSHA256: rootSum, BinarySHA256: binSum, Created: created.Unix()}
	for _, l := range layers {
		d, err := l.DiffID()
		if err != nil {
			return info, err
		}
		info.Layers = append(info.Layers, d.String())
	}
	j, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return info, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, ImageInfoName), append(j, '\n'), 0o644); err != nil { // #nosec G306 -- a public build artifact
		return info, err
	}
	return info, nil
}

// ImageOfTarball reads a docker-load tarball that BuildImage wrote and
// answers its config digest (the image id; the tarball holds no manifest
// of its own, so the manifest digest is the OCI layout's) and the SHA-256
// of the binary it holds. The release's verify checks both against the
// provenance.
func ImageOfTarball(p string) (configDigest, binarySHA256 string, err error) {
	img, err := tarball.ImageFromPath(p, nil)
	if err != nil {
		return "", "", err
	}
	d, err := img.ConfigName()
	if err != nil {
		return "", "", err
	}
	sum, err := binaryOf(img)
	return d.String(), sum, err
}

// binaryOf answers the SHA-256 of the binary in img's last layer.
func binaryOf(img v1.Image) (string, error) {
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		return "", fmt.Errorf("image layers: %w", errors.Join(err, errors.New("none")))
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		return "", err
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("the image's last layer has no %s", ImageBinaryPath)
		}
		if err != nil {
			return "", err
		}
		if h.Name == ImageBinaryPath {
			sum := sha256.New()
			if _, err := io.Copy(sum, tr); err != nil { // #nosec G110 -- only hashed
				return "", err
			}
			return hex.EncodeToString(sum.Sum(nil)), nil
		}
	}
}

// maxRootEntries bounds the root tarball's entries (a Debian root with
// Chromium has ~40,000): the headers are held to sort them.
const maxRootEntries = 1 << 20

// normalizeRoot rewrites the root tarball into out: entries in name order,
// clamped times, numeric owners, PAX records only for extended attributes
// (file capabilities), the paths of dropFromRoot left out. It answers the
// SHA-256 of the input.
func normalizeRoot(in, out string, created time.Time) (string, error) {
	f, err := os.Open(in) // #nosec G304 -- the build's own input
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	// First pass: the headers and where each body starts, in the input's
	// order; the bodies are read again from those offsets (a tar body is
	// stored as is).
	type entry struct {
		h   *tar.Header
		off int64
	}
	sum := sha256.New()
	cr := &countingReader{r: io.TeeReader(f, sum)}
	tr := tar.NewReader(cr)
	var entries []entry
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		if len(entries) >= maxRootEntries {
			return "", fmt.Errorf("more than %d entries", maxRootEntries)
		}
		nm := cleanName(h.Name)
		if nm == "" || dropped(nm) || seen[nm] {
			continue
		}
		seen[nm] = true
		entries = append(entries, entry{h: normalHeader(h, nm, created), off: cr.n})
	}
	if _, err := io.Copy(io.Discard, cr); err != nil { // the rest, for the digest
		return "", err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].h.Name < entries[j].h.Name })
	o, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600) // #nosec G304 -- the build's temp dir
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(o)
	for _, e := range entries {
		if err := tw.WriteHeader(e.h); err != nil {
			_ = o.Close()
			return "", err
		}
		if e.h.Typeflag == tar.TypeReg && e.h.Size > 0 {
			if _, err := io.Copy(tw, io.NewSectionReader(f, e.off, e.h.Size)); err != nil {
				_ = o.Close()
				return "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		_ = o.Close()
		return "", err
	}
	return hex.EncodeToString(sum.Sum(nil)), o.Close()
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func cleanName(n string) string {
	dir := strings.HasSuffix(n, "/")
	n = strings.TrimPrefix(path.Clean("/"+n), "/")
	if n != "" && dir {
		n += "/"
	}
	return n
}

func dropped(n string) bool {
	n = strings.TrimSuffix(n, "/")
	for _, d := range dropFromRoot {
		if n == d || strings.HasPrefix(n, d+"/") {
			return true
		}
	}
	return false
}

// normalHeader is h with what would differ between two builds of the same
// content taken out.
func normalHeader(h *tar.Header, nm string, created time.Time) *tar.Header {
	n := &tar.Header{
		Typeflag: h.Typeflag, Name: nm, Linkname: h.Linkname, Size: h.Size, Mode: h.Mode,
		Uid: h.Uid, Gid: h.Gid, ModTime: h.ModTime.UTC().Truncate(time.Second),
		Devmajor: h.Devmajor, Devminor: h.Devminor, Format: tar.FormatPAX,
	}
	if n.Typeflag == tar.TypeLink {
		n.Linkname = strings.TrimSuffix(cleanName(h.Linkname), "/")
	}
	if n.ModTime.After(created) || n.ModTime.IsZero() {
		n.ModTime = created
	}
	if n.Typeflag != tar.TypeReg {
		n.Size = 0
	}
	for k, v := range h.PAXRecords {
		if strings.HasPrefix(k, "SCHILY.xattr.") {
			if n.PAXRecords == nil {
				n.PAXRecords = map[string]string{}
			}
			n.PAXRecords[k] = v
		}
	}
	return n
}

// binaryLayer writes the layer holding the binary and the data dir.
func binaryLayer(bin, out string, created time.Time) (string, error) {
	b, err := os.ReadFile(bin) // #nosec G304 -- the build's own binary
	if err != nil {
		return "", err
	}
	if !bytes.HasPrefix(b, []byte("\x7fELF")) {
		return "", fmt.Errorf("%s is not an ELF binary", bin)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "usr/local/bin/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: ImageBinaryPath, Mode: 0o755, Size: int64(len(b))},
		{Typeflag: tar.TypeDir, Name: ImageDataDir + "/", Mode: 0o700},
	} {
		h.ModTime, h.Format = created, tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return "", err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(b); err != nil {
				return "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), os.WriteFile(out, buf.Bytes(), 0o600)
}
