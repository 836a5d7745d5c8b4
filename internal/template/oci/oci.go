// Package oci fills the template store from OCI images: pulled from a
// registry the operator allows (SANDBOX_REGISTRIES), or uploaded as an OCI
// image layout or a `docker save` tarball. It reads images with
// go-containerregistry, verifies every layer against the image (the
// compressed blob's digest by the library, the uncompressed stream's diff
// id by the store, which unpacks it under the archive rules of
// internal/template/layer) and turns the image's config into the
// template's.
//
// What it stops: a pull from a registry the operator did not allow (no
// server-side request to an address a tenant chose), the server's registry
// credentials reaching a client (they are read from a file by the server,
// used by the library and never put in a message, a log or an audit
// record), a layer that is not what its image says, an image for another
// OS or architecture, an upload larger than a template may be, and an
// upload that is neither an OCI layout nor a docker save tarball (its
// entries are checked before anything is read from them).
package oci

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/template"
)

// Overrides are what a pull or import sets on the template beside the
// image's config.
type Overrides struct {
	Limits  template.Limits `json:"limits,omitzero"`
	Browser bool            `json:"browser,omitempty"`
}

// store adds img to the store as name:tag for c: each layer (unless the
// store has it) unpacked and checked against the image's diff ids, and
// the image's config as the template's.
func store(ctx context.Context, st *template.Store, txn *template.Txn, c template.Caller, img v1.Image, src template.Source, name, tag string, ov Overrides, progress template.Progress) (template.Template, error) {
	if txn == nil {
		txn = st.Begin()
		defer txn.Close()
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return template.Template{}, fault.Wrap(fault.Invalid, err, "the image's config cannot be read")
	}
	if cf.OS != "" && cf.OS != "linux" {
		return template.Template{}, fault.New(fault.Invalid, fmt.Sprintf("the image is for %s, not linux", cf.OS))
	}
	if cf.Architecture != "" && cf.Architecture != runtime.GOARCH {
		return template.Template{}, fault.New(fault.Invalid, fmt.Sprintf("the image is for %s, this server runs %s", cf.Architecture, runtime.GOARCH))
	}
	layers, err := img.Layers()
	if err != nil {
		return template.Template{}, fault.Wrap(fault.Invalid, err, "the image's layers cannot be listed")
	}
	if len(layers) == 0 {
		return template.Template{}, fault.New(fault.Invalid, "the image has no layers")
	}
	if len(layers) > template.MaxLayers {
		return template.Template{}, fault.New(fault.TooLarge, fmt.Sprintf("the image has %d layers; a template has at most %d", len(layers), template.MaxLayers))
	}
	m := template.Manifest{Source: src}
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return template.Template{}, err
		}
		got, cached, err := addLayer(ctx, txn, l)
		if err != nil {
			return template.Template{}, err
		}
		m.Layers = append(m.Layers, got)
		progress.Send(template.Event{Step: "layer", Layer: i + 1, Layers: len(layers), Digest: got.Digest, Bytes: got.Bytes, Cached: cached})
	}
	m.Config = configOf(cf.Config, ov)
	uid, gid, err := st.ResolveUser(m.Layers, m.Config.User)
	if err != nil {
		return template.Template{}, err
	}
	m.Config.UID, m.Config.GID = uid, gid
	t, err := txn.Put(c, name, tag, m)
	if err != nil {
		return template.Template{}, err
	}
	progress.Send(template.Event{Step: "done", Digest: t.Digest, Bytes: t.Bytes, Layers: len(m.Layers)})
	return t, nil
}

// addLayer adds one image layer to the store, unless it is there.
func addLayer(ctx context.Context, txn *template.Txn, l v1.Layer) (template.Layer, bool, error) {
	mt, err := l.MediaType()
	if err == nil && !mt.IsLayer() {
		return template.Layer{}, false, fault.New(fault.Invalid, fmt.Sprintf("a layer has media type %s", mt))
	}
	if err == nil && (mt == types.DockerForeignLayer || strings.Contains(string(mt), "nondistributable")) {
		return template.Layer{}, false, fault.New(fault.Invalid, "the image has a foreign (non-distributable) layer")
	}
	diff, err := l.DiffID()
	if err != nil {
		return template.Layer{}, false, fault.Wrap(fault.Invalid, err, "a layer's diff id cannot be read")
	}
	if have, ok := txn.HasLayer(diff.String()); ok {
		return have, true, nil
	}
	size, err := l.Size()
	if err != nil {
		return template.Layer{}, false, fault.Wrap(fault.Invalid, err, "a layer's size cannot be read")
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return template.Layer{}, false, fault.Wrap(fault.Unavailable, err, "a layer cannot be read")
	}
	defer func() { _ = rc.Close() }()
	got, err := txn.AddLayer(ctx, rc, template.LayerSource{DiffID: diff.String(), Compressed: size})
	if err != nil {
		return template.Layer{}, false, err
	}
	// Reading to the end lets the library check the blob's digest.
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return template.Layer{}, false, fault.Wrap(fault.Invalid, err, "a layer does not match its digest")
	}
	return got, false, nil
}

// configOf is the template's config from an image's.
func configOf(c v1.Config, ov Overrides) template.Config {
	return template.Config{
		Env: c.Env, WorkingDir: c.WorkingDir, User: c.User,
		Entrypoint: c.Entrypoint, Cmd: c.Cmd, Labels: c.Labels,
		Limits: ov.Limits, Browser: ov.Browser,
	}
}
