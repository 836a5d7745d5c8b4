// Package template keeps sandbox templates: immutable, content-addressed
// root file systems (layers) with their config, named name:tag per owner,
// in a store in the data dir (internal/template/layer unpacks them). A
// template sandbox's root is an overlay of its template's layers
// (internal/isolate/rootfs); the sources that fill the store (a registry,
// an uploaded image, a Dockerfile build, a sandbox's commit) live in the
// packages below this one.
//
// # The store
//
//	<dir>/layers/<hex>/        one layer, unpacked once, shared read-only by
//	                           every sandbox and template that uses it
//	<dir>/layers/<hex>.json    its size and entry count
//	<dir>/manifests/<hex>.json a template's manifest (layers, config, source)
//	<dir>/index.json           names: owner, name:tag → manifest digest
//	<dir>/tmp/                 layers being unpacked (emptied at open)
//	<dir>/logs/<build>.log     build logs
//
// A layer's name is the sha256 of its uncompressed tar stream (an OCI diff
// id), checked while it is unpacked; a manifest's is the sha256 of its JSON.
// Index and manifests are written atomically (temporary file, fsync,
// rename, directory fsync); a layer appears under its name only once it is
// complete (rename). Every file is the server's (root, 0700 directories):
// no sandbox resolves a path here, each gets descriptors of detached,
// read-only, id-mapped clones of its layers.
//
// Who sees what: a template made by an agent key belongs to that key (only
// it, and admins, see and use it); one made by an admin key is public.
// Names resolve to the caller's own template first, then to the public one,
// so no key can shadow or replace another key's template. Layers are
// shared between owners (content-addressed), never written after they are
// complete.
//
// Garbage: a manifest no name and no sandbox uses, and a layer no manifest
// uses, are removed by GC; what a build or pull under way holds (Txn) is
// kept.
package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/template/layer"
)

// Caps of the store, with their reasons.
const (
	// maxTemplates bounds the names in the index (it is read whole).
	maxTemplates = 4096
	// maxManifest bounds a manifest file read back.
	maxManifest = 1 << 20
	// maxIndex bounds the index file read back.
	maxIndex = 16 << 20
)

// Caller is who asks: the key's id, and whether it is an admin (who sees
// every template, and whose templates are public).
type Caller struct {
	KeyID string
	Admin bool
}

// Options configure a store.
type Options struct {
	// Layer caps one layer; MaxBytes caps a whole template's layers.
	Layer    layer.Limits
	MaxBytes int64
	Log      *slog.Logger
}

// DefaultOptions are the caps of SECURITY.md's template rules.
func DefaultOptions() Options {
	return Options{Layer: layer.DefaultLimits(), MaxBytes: 8 << 30}
}

// Store is the template store of one server.
type Store struct {
	dir  string
	opts Options
	log  *slog.Logger

	// mu guards the fields below and every write of the index, the
	// manifests and the layer directories' names.
	mu        sync.Mutex
	index     []entry
	manifests map[string]*Manifest // by digest
	layers    map[string]layer.Stats
	// holds count what builds and pulls under way hold (layer and
	// manifest digests): GC keeps them.
	holds map[string]int
	// inUse lists the manifest digests sandboxes use (SetInUse).
	inUse func() map[string]bool
	// room is how many more bytes the store may take (SetRoom).
	room func() int64
	// cache is the build cache (cache.go), read on first use.
	cache map[string]cacheEntry
}

// entry is one name of the index.
type entry struct {
	Owner   string    `json:"owner,omitempty"`
	Name    string    `json:"name"`
	Tag     string    `json:"tag"`
	Digest  string    `json:"digest"`
	Created time.Time `json:"created"`
}

type indexFile struct {
	Templates []entry `json:"templates"`
}

// Open opens (making it if needed) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	s := &Store{dir: dir, opts: opts, log: opts.Log, manifests: map[string]*Manifest{},
		layers: map[string]layer.Stats{}, holds: map[string]int{}}
	for _, d := range []string{"", "layers", "manifests", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("create template store: %w", err)
		}
	}
	// Layers a previous run was unpacking never became names.
	if err := os.RemoveAll(filepath.Join(dir, "tmp")); err != nil {
		return nil, fmt.Errorf("clear template staging: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("create template staging: %w", err)
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) load() error {
	b, err := readCapped(filepath.Join(s.dir, "index.json"), maxIndex)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read template index: %w", err)
	}
	if err == nil {
		var idx indexFile
		if err := json.Unmarshal(b, &idx); err != nil {
			return fmt.Errorf("read template index: %w", err)
		}
		s.index = idx.Templates
	}
	entries, err := os.ReadDir(filepath.Join(s.dir, "manifests"))
	if err != nil {
		return fmt.Errorf("list template manifests: %w", err)
	}
	for _, e := range entries {
		hex, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		m, err := s.readManifest("sha256:" + hex)
		if err != nil {
			s.log.Warn("template manifest unreadable; it is ignored", "digest", hex, "err", err)
			continue
		}
		s.manifests["sha256:"+hex] = m
	}
	layers, err := os.ReadDir(filepath.Join(s.dir, "layers"))
	if err != nil {
		return fmt.Errorf("list template layers: %w", err)
	}
	records := map[string]bool{}
	for _, e := range layers {
		if hex, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			records[hex] = true
		}
	}
	for _, e := range layers {
		hex, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			if e.IsDir() && !records[e.Name()] {
				// A crash between the rename and the record: not a layer.
				if err := os.RemoveAll(filepath.Join(s.dir, "layers", e.Name())); err != nil {
					return fmt.Errorf("remove a half-stored template layer: %w", err)
				}
			}
			continue
		}
		b, err := readCapped(filepath.Join(s.dir, "layers", e.Name()), maxManifest)
		var st layer.Stats
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil {
			s.log.Warn("template layer record unreadable; the layer is ignored", "digest", hex, "err", err)
			continue
		}
		if fi, err := os.Lstat(filepath.Join(s.dir, "layers", hex)); err != nil || !fi.IsDir() {
			continue
		}
		s.layers["sha256:"+hex] = st
	}
	return nil
}

func (s *Store) readManifest(digest string) (*Manifest, error) {
	b, err := readCapped(s.manifestPath(digest), maxManifest)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if d, _, err := m.Digest(); err != nil || d != digest {
		return nil, fmt.Errorf("manifest does not match its digest")
	}
	return &m, nil
}

func (s *Store) manifestPath(digest string) string {
	return filepath.Join(s.dir, "manifests", strings.TrimPrefix(digest, "sha256:")+".json")
}

func (s *Store) layerPath(digest string) string {
	return filepath.Join(s.dir, "layers", strings.TrimPrefix(digest, "sha256:"))
}

// SetInUse gives the store the manifest digests sandboxes use, for GC.
func (s *Store) SetInUse(f func() map[string]bool) {
	s.mu.Lock()
	s.inUse = f
	s.mu.Unlock()
}

// SetRoom gives the store what it may still take of the disk budget.
func (s *Store) SetRoom(f func() int64) {
	s.mu.Lock()
	s.room = f
	s.mu.Unlock()
}

// Usage is the bytes the store's layers hold.
func (s *Store) Usage() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, st := range s.layers {
		n += st.Bytes
	}
	return n
}

// visible says whether c may see and use a template owned by owner.
func visible(c Caller, owner string) bool { return owner == "" || c.Admin || owner == c.KeyID }

// ownerOf is the owner a template c makes gets: "" (public) for admins.
func ownerOf(c Caller) string {
	if c.Admin {
		return ""
	}
	return c.KeyID
}

// Resolve finds the template ref names for c: by name, c's own first,
// then the public one; by digest, any manifest c may see (a digest names
// content, which c may use if any name it sees points there, or it owns
// a sandbox of it: the caller checks the latter).
func (s *Store) Resolve(c Caller, ref string) (Template, error) {
	r, err := ParseRef("template", ref)
	if err != nil {
		return Template{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resolveLocked(c, r)
}

func (s *Store) resolveLocked(c Caller, r Ref) (Template, error) {
	notFound := fault.New(fault.NotFound, fmt.Sprintf("template %q not found", r.String()))
	if r.Name == "" {
		// By digest alone: the best name c sees for it.
		var best *entry
		for i := range s.index {
			e := &s.index[i]
			if e.Digest == r.Digest && visible(c, e.Owner) && (best == nil || e.Owner == c.KeyID) {
				best = e
			}
		}
		if best == nil {
			if m := s.manifests[r.Digest]; m != nil && c.Admin {
				return s.templateOf(entry{Digest: r.Digest, Created: m.Created}, m), nil
			}
			return Template{}, notFound
		}
		return s.templateOf(*best, s.manifests[best.Digest]), nil
	}
	var found *entry
	for _, owner := range []string{c.KeyID, ""} {
		for i := range s.index {
			e := &s.index[i]
			if e.Owner == owner && e.Name == r.Name && e.Tag == r.Tag {
				found = e
				break
			}
		}
		if found != nil {
			break
		}
	}
	if found == nil || (r.Digest != "" && found.Digest != r.Digest) {
		return Template{}, notFound
	}
	m := s.manifests[found.Digest]
	if m == nil {
		return Template{}, fault.New(fault.Unavailable, fmt.Sprintf("template %q has lost its manifest", r.String()))
	}
	return s.templateOf(*found, m), nil
}

func (s *Store) templateOf(e entry, m *Manifest) Template {
	return Template{Name: e.Name, Tag: e.Tag, Digest: e.Digest, Owner: e.Owner, Created: e.Created, Bytes: m.Bytes(), Manifest: *m}
}

// List returns the templates c sees, by name and tag.
func (s *Store) List(c Caller) []Template {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Template
	for _, e := range s.index {
		if m := s.manifests[e.Digest]; m != nil && visible(c, e.Owner) {
			out = append(out, s.templateOf(e, m))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		if out[i].Tag != out[j].Tag {
			return out[i].Tag < out[j].Tag
		}
		return out[i].Owner < out[j].Owner
	})
	return out
}

// Remove drops c's name ref (an admin's: the public one, or any key's
// given by digest). The layers go at the next GC unless another template
// or a sandbox uses them.
func (s *Store) Remove(c Caller, ref string) (Template, error) {
	r, err := ParseRef("template", ref)
	if err != nil {
		return Template{}, err
	}
	if r.Name == "" {
		return Template{}, fault.InvalidField("template", "remove a template by its name:tag")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.resolveLocked(c, r)
	if err != nil {
		return Template{}, err
	}
	if t.Owner != ownerOf(c) && !c.Admin {
		return Template{}, fault.New(fault.Forbidden, "only its owner or an admin may remove a public template")
	}
	kept := s.index[:0]
	for _, e := range s.index {
		if e.Owner != t.Owner || e.Name != t.Name || e.Tag != t.Tag {
			kept = append(kept, e)
		}
	}
	s.index = kept
	if err := s.saveIndexLocked(); err != nil {
		return Template{}, err
	}
	return t, nil
}

// Manifest returns the manifest of a digest (nil if unknown).
func (s *Store) Manifest(digest string) *Manifest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.manifests[digest]
}

// LayerDirs returns the directories of a manifest's layers, lowest first;
// a missing layer is an error (the template cannot be used).
func (s *Store) LayerDirs(digest string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.manifests[digest]
	if m == nil {
		return nil, fault.New(fault.NotFound, "the sandbox's template is no longer in the store")
	}
	dirs := make([]string, 0, len(m.Layers))
	for _, l := range m.Layers {
		if _, ok := s.layers[l.Digest]; !ok {
			return nil, fault.New(fault.Unavailable, "a layer of the sandbox's template is missing from the store")
		}
		dirs = append(dirs, s.layerPath(l.Digest))
	}
	return dirs, nil
}

func (s *Store) saveIndexLocked() error {
	sort.Slice(s.index, func(i, j int) bool {
		a, b := s.index[i], s.index[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Tag != b.Tag {
			return a.Tag < b.Tag
		}
		return a.Owner < b.Owner
	})
	b, err := json.MarshalIndent(indexFile{Templates: s.index}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode template index: %w", err)
	}
	return writeAtomic(filepath.Join(s.dir, "index.json"), b)
}

// GC removes manifests no name, no sandbox and no transaction uses, then
// layers no manifest and no transaction uses. It returns how many layers
// and bytes it freed.
func (s *Store) GC(ctx context.Context) (layers int, freed int64, err error) {
	s.mu.Lock()
	var used map[string]bool
	if s.inUse != nil {
		inUse := s.inUse
		s.mu.Unlock()
		used = inUse() // outside the lock: the caller's own locks
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	named := map[string]bool{}
	for _, e := range s.index {
		named[e.Digest] = true
	}
	for d := range s.manifests {
		if named[d] || used[d] || s.holds[d] > 0 {
			continue
		}
		if err := os.Remove(s.manifestPath(d)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return layers, freed, fmt.Errorf("remove template manifest: %w", err)
		}
		delete(s.manifests, d)
	}
	keep := map[string]bool{}
	for _, m := range s.manifests {
		for _, l := range m.Layers {
			keep[l.Digest] = true
		}
	}
	for d, st := range s.layers {
		if keep[d] || s.holds[d] > 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return layers, freed, err
		}
		if err := s.removeLayerLocked(d); err != nil {
			return layers, freed, err
		}
		layers++
		freed += st.Bytes
	}
	return layers, freed, nil
}

// removeLayerLocked removes a layer: its record first (a crash leaves a
// directory without a record, which load ignores and the next GC of that
// name replaces), then its tree, renamed aside first so that a half-removed
// tree is never found under the layer's name.
func (s *Store) removeLayerLocked(d string) error {
	p := s.layerPath(d)
	if err := os.Remove(p + ".json"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove template layer record: %w", err)
	}
	delete(s.layers, d)
	aside := filepath.Join(s.dir, "tmp", "gc-"+filepath.Base(p))
	if err := os.Rename(p, aside); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove template layer: %w", err)
	}
	if err := os.RemoveAll(aside); err != nil {
		return fmt.Errorf("remove template layer: %w", err)
	}
	return nil
}

// LayerLimits are the caps of one layer.
func (s *Store) LayerLimits() layer.Limits { return s.opts.Layer }

// StagingDir is the store's scratch directory (emptied at open), on the
// same file system as its layers: uploads and builds stage there.
func (s *Store) StagingDir() string { return filepath.Join(s.dir, "tmp") }

// LogPath is where the log of build id is kept.
func (s *Store) LogPath(id string) string {
	return filepath.Join(s.dir, "logs", filepath.Base(id)+".log")
}

func readCapped(p string, max int64) ([]byte, error) {
	f, err := os.Open(p) //nolint:gosec // G304: a file of the server's own store
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", filepath.Base(p), max)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && fi.Size() > 0 {
		return nil, err
	}
	return b, nil
}

// writeAtomic writes p through a temporary file, fsynced and renamed into
// place, and fsyncs the directory: a crash leaves the old or the new.
func writeAtomic(p string, b []byte) error {
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) //nolint:gosec // G304: a file of the server's own store
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(p), err)
	}
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, p)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(p), werr)
	}
	return syncDir(filepath.Dir(p))
}

func syncDir(dir string) error {
	d, err := os.Open(dir) //nolint:gosec // G304: a directory of the server's own store
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
