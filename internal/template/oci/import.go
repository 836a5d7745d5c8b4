package oci

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/template"
)

// Caps of an import, with their reasons.
const (
	// maxImportEntries bounds the entries of an uploaded archive: a
	// layout or a docker save holds a few files per layer.
	maxImportEntries = 4 * template.MaxLayers * 4
	// maxIndexDepth bounds nested image indexes followed in a layout.
	maxIndexDepth = 4
)

// layoutName is what an OCI layout may hold: every other entry of an
// uploaded layout is refused before anything is read from it.
var layoutName = regexp.MustCompile(`^(oci-layout|index\.json|blobs/sha256/[a-f0-9]{64})$`)

// ImportArgs is template.import's arguments.
type ImportArgs struct {
	Name      string    `json:"name" required:"true" maxLength:"128" doc:"the template's name"`
	Tag       string    `json:"tag,omitempty" maxLength:"128" doc:"the template's tag (default latest)"`
	Overrides Overrides `json:"overrides,omitzero"`
	// Body is the uploaded archive: an OCI image layout as a tar, or a
	// docker save tarball. Run consumes it.
	Body io.Reader `json:"-"`
	// Progress, if set, receives the import's steps.
	Progress template.Progress `json:"-"`
}

// Importer stores uploaded images.
type Importer struct {
	store *template.Store
	// tmp is where an upload is kept while it is read (the store's
	// staging directory); max caps it.
	tmp string
	max int64
}

// NewImporter makes an importer for the store: uploads are staged in tmp
// and may be at most max bytes.
func NewImporter(st *template.Store, tmp string, max int64) *Importer {
	return &Importer{store: st, tmp: tmp, max: max}
}

// Import reads an uploaded OCI layout or docker save tarball and stores its
// image as a.Name:a.Tag for c.
func (im *Importer) Import(ctx context.Context, c template.Caller, a ImportArgs) (template.Template, error) {
	if err := checkName(a.Name, a.Tag); err != nil {
		return template.Template{}, err
	}
	if a.Body == nil {
		return template.Template{}, fault.New(fault.Invalid, "template.import takes an uploaded archive (HTTP only)")
	}
	dir, err := os.MkdirTemp(im.tmp, "import-")
	if err != nil {
		return template.Template{}, fmt.Errorf("stage upload: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	archive := filepath.Join(dir, "upload.tar")
	if err := saveCapped(ctx, archive, a.Body, im.max); err != nil {
		return template.Template{}, err
	}
	a.Progress.Send(template.Event{Step: "resolve", Message: "upload received"})
	img, err := openUpload(archive, filepath.Join(dir, "layout"))
	if err != nil {
		return template.Template{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return template.Template{}, fault.Wrap(fault.Invalid, err, "the uploaded image's digest cannot be read")
	}
	return store(ctx, im.store, nil, c, img, template.Source{Kind: "upload", ImageDigest: d.String()}, a.Name, tagOr(a.Tag), a.Overrides, a.Progress)
}

// saveCapped copies r to a new file p, at most max bytes.
func saveCapped(ctx context.Context, p string, r io.Reader, max int64) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // G304: a file of the server's staging directory
	if err != nil {
		return fmt.Errorf("stage upload: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(template.Reader(ctx, r), max+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fault.Wrap(fault.Invalid, err, "the upload could not be read")
	}
	if n > max {
		return fault.New(fault.TooLarge, fmt.Sprintf("the upload is larger than a template may be (%d bytes, SANDBOX_TEMPLATE_MAX_SIZE)", max))
	}
	return nil
}

// openUpload reads the uploaded archive as an OCI layout (unpacked into
// layoutDir, only the names a layout has) or, failing that, as a docker
// save tarball.
func openUpload(archive, layoutDir string) (v1.Image, error) {
	names, err := listTar(archive)
	if err != nil {
		return nil, err
	}
	if names["oci-layout"] && names["index.json"] {
		if err := unpackLayout(archive, layoutDir); err != nil {
			return nil, err
		}
		return layoutImage(layoutDir)
	}
	if names["manifest.json"] {
		img, err := tarball.Image(func() (io.ReadCloser, error) { return os.Open(archive) }, nil) //nolint:gosec // G304: the staged upload
		if err != nil {
			return nil, fault.Wrap(fault.Invalid, err, "the docker save tarball holds no single image: "+clip(err.Error()))
		}
		return img, nil
	}
	return nil, fault.New(fault.Invalid, "the upload is neither an OCI image layout (oci-layout, index.json, blobs/) nor a docker save tarball (manifest.json)")
}

// listTar names the archive's regular files, refusing more than
// maxImportEntries entries.
func listTar(archive string) (map[string]bool, error) {
	f, err := os.Open(archive) //nolint:gosec // G304: the staged upload
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	names := map[string]bool{}
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, fault.Wrap(fault.Invalid, err, "the upload is not a tar archive")
		}
		if n >= maxImportEntries {
			return nil, fault.New(fault.TooLarge, fmt.Sprintf("the upload holds more than %d entries", maxImportEntries))
		}
		if h.Typeflag == tar.TypeReg {
			names[filepath.Clean(h.Name)] = true
		}
	}
}

// unpackLayout writes the layout's files (and only those: layoutName) into
// dir; any other regular file is refused, directories are made as needed.
func unpackLayout(archive, dir string) error {
	f, err := os.Open(archive) //nolint:gosec // G304: the staged upload
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
		return err
	}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fault.Wrap(fault.Invalid, err, "the upload is not a tar archive")
		}
		clean := filepath.Clean(h.Name)
		switch {
		case h.Typeflag == tar.TypeDir:
			continue
		case h.Typeflag != tar.TypeReg:
			return fault.New(fault.Invalid, fmt.Sprintf("the layout holds %q, which is not a regular file", h.Name))
		case clean == "manifest.json" || clean == "repositories":
			continue // docker save's own index beside the layout
		case !layoutName.MatchString(clean):
			return fault.New(fault.Invalid, fmt.Sprintf("the layout holds %q, which an OCI layout does not have", h.Name))
		}
		out, err := os.OpenFile(filepath.Join(dir, clean), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // G304: a name matched against layoutName
		if err != nil {
			return fault.Wrap(fault.Invalid, err, fmt.Sprintf("the layout names %q twice", h.Name))
		}
		_, err = io.Copy(out, tr) // #nosec G110 -- a plain tar of the staged upload: an entry is at most the upload's bytes, capped at max
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("stage layout: %w", err)
		}
	}
}

// layoutImage picks the layout's image for this platform (or its only one).
func layoutImage(dir string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "the OCI layout cannot be read")
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "the OCI layout's index cannot be read")
	}
	return pickImage(idx, 0)
}

func pickImage(idx v1.ImageIndex, depth int) (v1.Image, error) {
	if depth > maxIndexDepth {
		return nil, fault.New(fault.Invalid, "the image index nests too deep")
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "the image index cannot be read")
	}
	var candidates []v1.Descriptor
	for _, d := range im.Manifests {
		if d.Platform != nil && (d.Platform.OS != "linux" || d.Platform.Architecture != runtime.GOARCH) {
			continue
		}
		candidates = append(candidates, d)
	}
	if len(candidates) != 1 {
		return nil, fault.New(fault.Invalid, fmt.Sprintf("the layout holds %d images for linux/%s; upload one", len(candidates), runtime.GOARCH))
	}
	d := candidates[0]
	if d.MediaType.IsIndex() {
		sub, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, fault.Wrap(fault.Invalid, err, "a nested image index cannot be read")
		}
		return pickImage(sub, depth+1)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "the layout's image cannot be read")
	}
	return img, nil
}
