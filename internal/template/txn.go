package template

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/sandhold/sandhold/internal/archive/spec"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/rootfs"
	"github.com/sandhold/sandhold/internal/template/layer"
)

// MaxLayers caps a template's layers: each is a layer of its sandboxes'
// overlay roots.
const MaxLayers = rootfs.MaxLayers

// maxTrailing caps what may follow a layer's end-of-archive marker (tar
// pads to a record; anything much longer is not a layer).
const maxTrailing = 1 << 20

// Txn is one build, pull, import or commit: the layers and manifests it
// adds or uses are held (kept from GC) until Close.
type Txn struct {
	s    *Store
	held []string
}

// Begin starts a transaction. Close it.
func (s *Store) Begin() *Txn { return &Txn{s: s} }

// Close releases what the transaction held.
func (t *Txn) Close() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for _, d := range t.held {
		if t.s.holds[d]--; t.s.holds[d] <= 0 {
			delete(t.s.holds, d)
		}
	}
	t.held = nil
}

// holdLocked keeps d from GC until Close. Callers hold s.mu.
func (t *Txn) holdLocked(d string) {
	t.s.holds[d]++
	t.held = append(t.held, d)
}

// Use holds the template digest (a build's FROM, a commit's parent) and
// its layers, and returns its manifest; the template must exist.
func (t *Txn) Use(digest string) (*Manifest, error) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	m := t.s.manifests[digest]
	if m == nil {
		return nil, fault.New(fault.NotFound, "template not found")
	}
	t.holdLocked(digest)
	for _, l := range m.Layers {
		t.holdLocked(l.Digest)
	}
	return m, nil
}

// HasLayer says whether the layer digest is in the store, and if so holds
// it: a pull need not fetch it again.
func (t *Txn) HasLayer(digest string) (Layer, bool) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	st, ok := t.s.layers[digest]
	if ok {
		t.holdLocked(digest)
	}
	return Layer{Digest: digest, Bytes: st.Bytes, Entries: st.Entries}, ok
}

// LayerSource says what a layer stream should be.
type LayerSource struct {
	// DiffID is the digest the uncompressed stream must have (an image's
	// diff id); "" takes what it is.
	DiffID string
	// Compressed is the size of the compressed blob it came from (0: not
	// compressed): the layer may unpack to at most MaxRatio times it
	// (above RatioFloor), the archive rules' bomb check.
	Compressed int64
}

// The compression ratio cap of a layer, with its floor: a small, very
// compressible layer (a sparse database file, zeros) is no bomb.
const (
	MaxRatio   = 100
	RatioFloor = 64 << 20
)

// AddLayer unpacks the uncompressed layer stream r into the store (the
// archive rules of package layer), checks it against src and holds it. A
// layer already in the store is kept as it is. Refusals are faults a
// client may read.
func (t *Txn) AddLayer(ctx context.Context, r io.Reader, src LayerSource) (Layer, error) {
	s := t.s
	want := src.DiffID
	lim := s.opts.Layer
	if src.Compressed > 0 {
		if c := max(src.Compressed*MaxRatio, RatioFloor); c < lim.MaxBytes {
			lim.MaxBytes = c
		}
	}
	if room := s.roomNow(); room < lim.MaxBytes {
		if room <= 0 {
			return Layer{}, fault.New(fault.Conflict, "the server's disk budget (SANDBOX_DISK_BUDGET) has no room for another template layer")
		}
		lim.MaxBytes = room
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "layer-")
	if err != nil {
		return Layer{}, fmt.Errorf("stage template layer: %w", err)
	}
	kept := false
	defer func() {
		if !kept {
			_ = os.RemoveAll(tmp)
		}
	}()
	h := sha256.New()
	st, err := layer.Unpack(ctx, io.TeeReader(r, h), tmp, lim)
	if err != nil {
		return Layer{}, layerFault(err)
	}
	// The digest covers the whole stream: the end-of-archive padding too.
	if n, err := io.Copy(h, io.LimitReader(r, maxTrailing+1)); err != nil {
		return Layer{}, fault.Wrap(fault.Invalid, err, "template layer: the stream failed after its last entry")
	} else if n > maxTrailing {
		return Layer{}, fault.New(fault.Invalid, "template layer: data follows the archive's end")
	}
	digest := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if want != "" && digest != want {
		return Layer{}, fault.New(fault.Invalid, fmt.Sprintf("template layer: its content is %s, the image says %s", digest, want))
	}
	if err := os.Chmod(tmp, 0o755); err != nil { //nolint:gosec // G302: a layer's root, read by sandboxes through id-mapped clones
		return Layer{}, fmt.Errorf("stage template layer: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.layers[digest]; ok {
		t.holdLocked(digest)
		return Layer{Digest: digest, Bytes: have.Bytes, Entries: have.Entries}, nil
	}
	p := s.layerPath(digest)
	// A directory without a record is a crash's leftover: not a layer.
	if _, err := os.Lstat(p); err == nil {
		if err := os.RemoveAll(p); err != nil {
			return Layer{}, fmt.Errorf("replace template layer: %w", err)
		}
	}
	if err := os.Rename(tmp, p); err != nil {
		return Layer{}, fmt.Errorf("store template layer: %w", err)
	}
	kept = true
	rec, _ := json.Marshal(st)
	if err := writeAtomic(p+".json", rec); err != nil {
		_ = os.RemoveAll(p)
		return Layer{}, err
	}
	s.layers[digest] = st
	t.holdLocked(digest)
	return Layer{Digest: digest, Bytes: st.Bytes, Entries: st.Entries}, nil
}

// layerFault turns a layer refusal into the edge's kind with a message
// naming the entry and the rule.
func layerFault(err error) error {
	var se *spec.Error
	if errors.As(err, &se) {
		return se.Fault("template layer refused: ")
	}
	return err
}

func (s *Store) roomNow() int64 {
	s.mu.Lock()
	room := s.room
	s.mu.Unlock()
	if room == nil {
		return s.opts.Layer.MaxBytes
	}
	return room()
}

// Put stores manifest m and, if name is not empty, names it name:tag for
// c (replacing c's earlier template of that name). Every layer must be in
// the store (held by this transaction or used by another template).
func (t *Txn) Put(c Caller, name, tag string, m Manifest) (Template, error) {
	s := t.s
	if len(m.Layers) == 0 {
		return Template{}, fault.New(fault.Invalid, "a template needs at least one layer")
	}
	if len(m.Layers) > MaxLayers {
		return Template{}, fault.New(fault.TooLarge, fmt.Sprintf("a template has at most %d layers; this one has %d (squash some steps)", MaxLayers, len(m.Layers)))
	}
	if b := m.Bytes(); s.opts.MaxBytes > 0 && b > s.opts.MaxBytes {
		return Template{}, fault.New(fault.TooLarge, fmt.Sprintf("the template's layers hold %s, more than the server's %s per template (SANDBOX_TEMPLATE_MAX_SIZE)",
			humanize.IBytes(uint64(b)), humanize.IBytes(uint64(s.opts.MaxBytes)))) // #nosec G115 -- both positive
	}
	if name != "" {
		if _, err := ParseRef("name", name+":"+tag); err != nil {
			return Template{}, err
		}
		if name == Host {
			return Template{}, fault.InvalidField("name", "host is the built-in template's name")
		}
	}
	if m.Created.IsZero() {
		m.Created = time.Now().UTC().Truncate(time.Second)
	}
	if m.Config.Shell == "" {
		m.Config.Shell = s.shellOf(m.Layers)
	}
	digest, b, err := m.Digest()
	if err != nil {
		return Template{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range m.Layers {
		if _, ok := s.layers[l.Digest]; !ok {
			return Template{}, fault.New(fault.Invalid, "a layer of the template is not in the store")
		}
	}
	if s.manifests[digest] == nil {
		if err := writeAtomic(s.manifestPath(digest), b); err != nil {
			return Template{}, err
		}
		mm := m
		s.manifests[digest] = &mm
	}
	t.holdLocked(digest)
	e := entry{Owner: ownerOf(c), Name: name, Tag: tag, Digest: digest, Created: m.Created}
	if name == "" {
		return s.templateOf(e, s.manifests[digest]), nil
	}
	replaced := false
	for i := range s.index {
		if s.index[i].Owner == e.Owner && s.index[i].Name == name && s.index[i].Tag == tag {
			s.index[i] = e
			replaced = true
		}
	}
	if !replaced {
		if len(s.index) >= maxTemplates {
			return Template{}, fault.New(fault.Conflict, fmt.Sprintf("the store holds %d template names; remove some first", maxTemplates))
		}
		s.index = append(s.index, e)
	}
	if err := s.saveIndexLocked(); err != nil {
		return Template{}, err
	}
	return s.templateOf(e, s.manifests[digest]), nil
}

// shellOf is the shell a template's command lines run with: bash where it
// has one (usr/bin/bash on a merged-/usr tree, bin/bash otherwise), else
// sh.
func (s *Store) shellOf(layers []Layer) string {
	for _, p := range []string{"usr/bin/bash", "bin/bash"} {
		if s.Has(layers, p) {
			return "/bin/bash"
		}
	}
	return "/bin/sh"
}
