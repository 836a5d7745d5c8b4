package release

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// ImageArchiveName is the release's container image: the OCI layout as an
// OCI archive (skopeo copy oci-archive:, ctr images import, podman load),
// which keeps the manifest digest the provenance records.
func ImageArchiveName(arch string) string { return "sandhold-image-linux-" + arch + ".oci.tar" }

// WriteLayoutArchive tars the OCI layout directory dir into out: names in
// order, times at created, numeric owners 0, so the same layout gives the
// same bytes.
func WriteLayoutArchive(dir, out string, created time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644) // #nosec G302 G304 -- a public build artifact at the build's path
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	werr := func() error {
		for _, p := range names {
			st, err := os.Lstat(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: created, Mode: 0o644, Format: tar.FormatPAX}
			switch {
			case st.IsDir():
				h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			case st.Mode().IsRegular():
				h.Typeflag, h.Size = tar.TypeReg, st.Size()
			default:
				return fmt.Errorf("%s: not a file or directory", rel)
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if h.Typeflag == tar.TypeReg {
				in, err := os.Open(p) // #nosec G304 -- inside the layout we wrote
				if err != nil {
					return err
				}
				_, err = io.Copy(tw, in)
				_ = in.Close()
				if err != nil {
					return err
				}
			}
		}
		return tw.Close()
	}()
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return werr
	}
	return os.Rename(tmp, out)
}

// maxLayoutArchive bounds what reading an image archive unpacks.
const maxLayoutArchive = 8 << 30

// ImageOfArchive unpacks an OCI archive into a temporary directory and
// answers its one image's manifest digest and the SHA-256 of the binary
// in its last layer.
func ImageOfArchive(archive string) (digest, binarySHA256 string, err error) {
	dir, err := os.MkdirTemp("", "sandhold-image-")
	if err != nil {
		return "", "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	f, err := os.Open(archive) // #nosec G304 -- the release's own file
	if err != nil {
		return "", "", err
	}
	defer func() { _ = f.Close() }()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", "", err
	}
	defer func() { _ = root.Close() }()
	tr := tar.NewReader(f)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", "", err
		}
		name := strings.TrimSuffix(h.Name, "/")
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return "", "", err
			}
		case tar.TypeReg:
			total += h.Size
			if total > maxLayoutArchive {
				return "", "", fmt.Errorf("more than %d bytes", int64(maxLayoutArchive))
			}
			w, err := root.Create(name)
			if err != nil {
				return "", "", err
			}
			_, err = io.Copy(w, io.LimitReader(tr, h.Size))
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return "", "", err
			}
		default:
			return "", "", fmt.Errorf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return "", "", err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return "", "", err
	}
	if len(im.Manifests) != 1 {
		return "", "", fmt.Errorf("%d images in the archive, want 1", len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return "", "", err
	}
	sum, err := binaryOf(img)
	return im.Manifests[0].Digest.String(), sum, err
}

// releaseImage builds the image of the release's amd64 binary from the
// root tarball and puts its OCI archive into the release directory.
func releaseImage(_ context.Context, out, rootfs string, epoch int64, version, commit string) (*ImageInfo, error) {
	const arch = "amd64"
	work, err := os.MkdirTemp("", "sandhold-image-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(work) }()
	created := time.Unix(epoch, 0)
	info, err := BuildImage(ImageOptions{RootFS: rootfs, Binary: filepath.Join(out, BinaryName(arch)), Arch: arch, Created: created,
		Version: version, Commit: commit, Ref: "ghcr.io/sandhold/sandhold:" + version, Out: work})
	if err != nil {
		return nil, err
	}
	if err := WriteLayoutArchive(filepath.Join(work, ImageLayout), filepath.Join(out, ImageArchiveName(arch)), created); err != nil {
		return nil, err
	}
	return &info, nil
}

// verifyImage checks the release's image archive against the provenance:
// its digest, and that it carries the release's own binary.
func verifyImage(dir string, prov Provenance, sums map[string]string) error {
	im := prov.Image
	name := ImageArchiveName(im.Arch)
	if _, ok := sums[name]; !ok {
		return fmt.Errorf("%s: in provenance, missing from %s", name, SumsFile)
	}
	d, bin, err := ImageOfArchive(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if d != im.Digest {
		return fmt.Errorf("%s: digest %s, provenance says %s", name, d, im.Digest)
	}
	want, err := FileSHA256(filepath.Join(dir, BinaryName(im.Arch)))
	if err != nil {
		return err
	}
	if bin != want || im.BinarySHA256 != want {
		return fmt.Errorf("%s: its binary (sha256 %s) is not the release's %s (%s)", name, bin, BinaryName(im.Arch), want)
	}
	return nil
}
