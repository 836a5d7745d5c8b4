// Package snapshot keeps snapshots of sandboxes' writable state: the
// workspace image of a sandbox (its ext4 file system, which holds the
// workspace and, for a template sandbox, the root's writable layer), cut
// into fixed-size chunks named by their sha256, with a manifest that lists
// the chunks and carries the sandbox's settings as an opaque document
// (the sandbox package's). The store knows nothing of sandboxes: it turns
// an image file into a snapshot and a snapshot back into an image file.
//
// # The store
//
//	<dir>/meta/<id>.json                 a snapshot's manifest
//	<dir>/chunks/<owner>/<aa>/<sha256>   one chunk, shared by every snapshot
//	                                     of that owner that holds it
//	<dir>/chunks/<owner>/.lock           flock: shared while a snapshot is
//	                                     written or read, exclusive for GC
//	<dir>/tmp/                           files being written
//	<dir>/export.key                     the key that signs exports
//
// Chunks are deduplicated per owner (a key): snapshots of one sandbox, and
// of the owner's other sandboxes, share the chunks they have in common, and
// no owner's chunks are ever another's — so neither the disk accounting nor
// the timing of a snapshot tells one tenant what another stored. A chunk
// that is all zeros (or a hole of the sparse image) is not stored: the
// restored image has a hole there.
//
// Copy-on-write: where the store's file system shares blocks (FICLONERANGE:
// XFS with reflink, btrfs), a new chunk is a clone of the image's range and
// a restore clones the chunks back; elsewhere (ext4) the chunk is written
// and a restore copies it in the kernel (copy_file_range), keeping holes.
//
// Every file is written atomically (temporary file, fsync, rename,
// directory fsync). The directory may be shared by the nodes of a cluster
// (SANDBOX_SNAPSHOT_DIR on a shared file system): the locks are flock(2)
// locks, the ids random.
package snapshot

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
)

// Sizes and caps of the store, with their reasons.
const (
	// ChunkSize is the unit of deduplication: large enough that a 100 MB
	// workspace is 25 files (each an inode and an fsync), small enough
	// that one changed file costs a few MiB, and a multiple of every file
	// system's block size (a clone needs aligned ranges).
	ChunkSize = 4 << 20
	// maxImageBytes bounds an image (and so a manifest's chunk count):
	// far above any workspace quota.
	maxImageBytes = 1 << 42
	// maxManifestBytes bounds a manifest read back or imported: 1 M
	// chunks of ~100 bytes of JSON each.
	maxManifestBytes = 128 << 20
	// maxMetaBytes bounds the opaque settings document.
	maxMetaBytes = 64 << 10
	// maxSnapshots bounds the manifests listed at once.
	maxSnapshots = 100000
)

// Manifest is one snapshot. Its Digest covers the content (Content): the
// image's size, the chunks and the settings; the rest is bookkeeping.
type Manifest struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Owner   string    `json:"owner"`
	Sandbox string    `json:"sandbox" doc:"the sandbox it was taken of"`
	Created time.Time `json:"created"`
	// Hibernation marks a sandbox's own snapshot while it hibernates:
	// not listed, removed when the sandbox resumes or is deleted.
	Hibernation bool `json:"hibernation,omitempty"`
	// Imported: made by an import, not taken of a sandbox here.
	Imported bool `json:"imported,omitempty"`
	// Parked: the image itself, moved into the store whole (park.go), not
	// chunks; it has no content digest.
	Parked bool `json:"parked,omitempty"`
	// State is StateSealing while the snapshot is its clone only (no
	// chunks, no digest yet: seal.go); "" once it is sealed.
	State string `json:"state,omitempty"`
	Content
	Digest string `json:"digest"`
	// Bytes is the data the snapshot holds (its chunks, each once).
	Bytes int64 `json:"bytes"`
}

// Content is what a snapshot's digest covers.
type Content struct {
	ImageSize int64   `json:"image_size"`
	ChunkSize int64   `json:"chunk_size"`
	Chunks    []Chunk `json:"chunks"`
	// Meta is the sandbox's settings, as the sandbox package writes them.
	Meta json.RawMessage `json:"meta"`
}

// Chunk is one stored range of the image.
type Chunk struct {
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Digest string `json:"digest"` // hex sha256
}

// digest is the content's sha256 in the form sha256:<hex>.
func (c Content) digest() (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// check validates a content from outside (an import) or read back: chunk
// size fixed, offsets aligned, ascending and inside the image, digests well
// formed; it is the bound of every loop over the chunks.
func (c Content) check() error {
	switch {
	case c.ChunkSize != ChunkSize:
		return fmt.Errorf("chunk size %d, want %d", c.ChunkSize, ChunkSize)
	case c.ImageSize <= 0 || c.ImageSize > maxImageBytes:
		return fmt.Errorf("image size %d out of range", c.ImageSize)
	case int64(len(c.Chunks)) > c.ImageSize/ChunkSize+1:
		return fmt.Errorf("%d chunks for an image of %d bytes", len(c.Chunks), c.ImageSize)
	case len(c.Meta) > maxMetaBytes:
		return fmt.Errorf("settings of %d bytes", len(c.Meta))
	}
	next := int64(0)
	for i, ch := range c.Chunks {
		if ch.Offset < next || ch.Offset%ChunkSize != 0 || ch.Length <= 0 || ch.Length > ChunkSize ||
			ch.Offset+ch.Length > c.ImageSize || !validDigest(ch.Digest) {
			return fmt.Errorf("chunk %d malformed", i)
		}
		next = ch.Offset + ch.Length
	}
	return nil
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

func validDigest(d string) bool { return hexDigest.MatchString(d) }

var idForm = regexp.MustCompile(`^sn[0-9a-f]{16}$`)

// ValidID tells whether id has the form of a snapshot id (sn + 16 hex).
func ValidID(id string) bool { return idForm.MatchString(id) }

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "sn" + hex.EncodeToString(b[:])
}

// Store is a directory of snapshots.
type Store struct {
	dir string
	key []byte // signs exports (export.go)
	sealer
}

// ErrNotFound: no such snapshot (or not the caller's); the edge answers 404.
var ErrNotFound = errors.New("no such snapshot")

// Open opens (making it if need be) the store in dir. key signs exports;
// nil: a key kept in dir (made on first use).
func Open(dir string, key []byte) (*Store, error) {
	for _, d := range []string{dir, filepath.Join(dir, "meta"), filepath.Join(dir, "chunks"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("snapshot store: %w", err)
		}
	}
	s := &Store{dir: dir}
	// Files a crash left half written go (a shared directory's other
	// nodes write theirs under names of their own, removed by age).
	s.cleanTmp(time.Hour)
	if key == nil {
		var err error
		if key, err = s.localKey(); err != nil {
			return nil, err
		}
	}
	s.key = key
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) cleanTmp(age time.Duration) {
	entries, _ := os.ReadDir(filepath.Join(s.dir, "tmp"))
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > age {
			_ = os.RemoveAll(filepath.Join(s.dir, "tmp", e.Name()))
		}
	}
}

func (s *Store) localKey() ([]byte, error) {
	p := filepath.Join(s.dir, "export.key")
	b, err := os.ReadFile(p) //nolint:gosec // G304: the store's own file
	if err == nil && len(b) == 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read snapshot export key: %w", err)
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	if err := writeAtomic(s.tmpDir(), p, k); err != nil {
		return nil, fmt.Errorf("write snapshot export key: %w", err)
	}
	return k, nil
}

func (s *Store) tmpDir() string { return filepath.Join(s.dir, "tmp") }

func (s *Store) metaPath(id string) string { return filepath.Join(s.dir, "meta", id+".json") }

// ownerDir is the owner's chunk pool: named by a hash of the key id, so no
// id shapes a path.
func (s *Store) ownerDir(owner string) string {
	sum := sha256.Sum256([]byte("snapshot-owner\x00" + owner))
	return filepath.Join(s.dir, "chunks", hex.EncodeToString(sum[:12]))
}

func chunkPath(ownerDir, digest string) string {
	return filepath.Join(ownerDir, digest[:2], digest)
}

// Get returns snapshot id if the caller may see it: its owner, or an admin.
func (s *Store) Get(owner string, admin bool, id string) (*Manifest, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	m, err := s.read(id)
	if err != nil {
		return nil, err
	}
	if !admin && m.Owner != owner {
		return nil, ErrNotFound
	}
	return m, nil
}

func (s *Store) read(id string) (*Manifest, error) {
	b, err := readCapped(s.metaPath(id), maxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", id, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", id, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return &m, nil
}

// List returns the snapshots the caller sees (an admin: all), oldest first;
// hibernation snapshots only with hidden.
func (s *Store) List(owner string, admin, hidden bool) ([]Manifest, error) {
	all, err := s.all()
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, m := range all {
		if (admin || m.Owner == owner) && (hidden || !m.Hibernation) {
			m.Chunks = nil // the list is a summary
			out = append(out, m)
		}
	}
	return out, nil
}

func (s *Store) all() ([]Manifest, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, "meta"))
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []Manifest
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !ValidID(id) {
			continue
		}
		if len(out) >= maxSnapshots {
			break
		}
		m, err := s.read(id)
		if err != nil {
			continue // removed meanwhile, or damaged: not listed
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Delete removes snapshot id (the caller's, or any for an admin) and the
// chunks no other snapshot of its owner holds.
func (s *Store) Delete(ctx context.Context, owner string, admin bool, id string) (*Manifest, error) {
	m, err := s.Get(owner, admin, id)
	if err != nil {
		return nil, err
	}
	if m.Sealing() {
		// Its seal (on this node) ends first, unfinished; one sealed
		// meanwhile leaves no clone.
		s.cancelSeal(m.ID)
	}
	lk, err := s.lockOwner(m.Owner, true)
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	if err := os.Remove(s.sealingPath(m.Owner, m.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove snapshot %s: %w", id, err)
	}
	if m.Parked {
		if err := os.Remove(s.parkedPath(m.Owner, m.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove snapshot %s: %w", id, err)
		}
	}
	if err := os.Remove(s.metaPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove snapshot %s: %w", id, err)
	}
	_ = syncDir(filepath.Join(s.dir, "meta"))
	if err := s.collectLocked(ctx, m.Owner); err != nil {
		return m, err
	}
	return m, nil
}

// collectLocked removes the owner's chunks that no manifest of the owner
// names. The caller holds the owner's lock exclusively.
func (s *Store) collectLocked(ctx context.Context, owner string) error {
	all, err := s.all()
	if err != nil {
		return err
	}
	used := make(map[string]bool)
	for _, m := range all {
		if m.Owner == owner {
			for _, c := range m.Chunks {
				used[c.Digest] = true
			}
		}
	}
	// Walked and removed through a root at the owner's pool: nothing in
	// it (a symlink included) reaches out of it.
	root, err := os.OpenRoot(s.ownerDir(owner))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("collect chunks: %w", err)
	}
	defer func() { _ = root.Close() }()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() || !validDigest(d.Name()) || used[d.Name()] {
			return nil
		}
		return root.Remove(p)
	})
}

// Usage is the bytes the owner's chunks hold on the disk ("" and all:
// every owner's).
func (s *Store) Usage(owner string, all bool) int64 {
	root := filepath.Join(s.dir, "chunks")
	if !all {
		root = s.ownerDir(owner)
	}
	return diskBytes(root)
}

// put writes a manifest.
func (s *Store) put(m *Manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := writeAtomic(s.tmpDir(), s.metaPath(m.ID), b); err != nil {
		return fmt.Errorf("write snapshot %s: %w", m.ID, err)
	}
	return nil
}

// finish fills a new manifest's id, digest and bytes and writes it.
func (s *Store) finish(m *Manifest) error {
	if m.ID == "" {
		m.ID = newID()
	}
	d, err := m.digest()
	if err != nil {
		return err
	}
	m.Digest = d
	seen := make(map[string]bool, len(m.Chunks))
	m.Bytes = 0
	for _, c := range m.Chunks {
		if !seen[c.Digest] {
			seen[c.Digest] = true
			m.Bytes += c.Length
		}
	}
	return s.put(m)
}

// Info is what is written about a new snapshot.
type Info struct {
	Name, Owner, Sandbox string
	Hibernation          bool
	Meta                 json.RawMessage
}

func (in Info) manifest(size int64) *Manifest {
	return &Manifest{Name: in.Name, Owner: in.Owner, Sandbox: in.Sandbox, Created: time.Now().UTC(),
		Hibernation: in.Hibernation, Content: Content{ImageSize: size, ChunkSize: ChunkSize, Meta: slices.Clone(in.Meta)}}
}

// Faults the edge shows.
var (
	errTampered = fault.New(fault.Invalid, "the export is damaged or was altered: its digests or its signature do not match")
)

func readCapped(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p) //nolint:gosec // G304: the store's own files
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%s larger than %d bytes", filepath.Base(p), limit)
	}
	return buf.Bytes(), nil
}

// writeAtomic writes b to p through a temporary file in tmp (same file
// system), fsyncs it, renames it into place and fsyncs the directory.
func writeAtomic(tmp, p string, b []byte) error {
	f, err := os.CreateTemp(tmp, "w-*")
	if err != nil {
		return err
	}
	name := f.Name()
	defer func() { _ = os.Remove(name) }()
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, p); err != nil {
		return err
	}
	return syncDir(filepath.Dir(p))
}

func syncDir(dir string) error {
	d, err := os.Open(dir) //nolint:gosec // G304: the store's own directories
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
