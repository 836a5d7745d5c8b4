package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
)

// An export is a tar stream: manifest.json first (the snapshot without its
// owner, with a signature), then chunks/<sha256> once for each chunk. An
// import checks everything before it keeps anything: the manifest's form
// and digest, the signature, every chunk's size and sha256, and that the
// stream holds exactly the chunks the manifest names.
//
// Why a signature: a snapshot is raw ext4, and a restore mounts it in the
// host's kernel. An image that sandhold's own kernel wrote (a sandbox wrote
// files, the kernel laid out the blocks) is as safe to mount as the
// workspace it came from; blocks crafted by hand are a file system attack
// on the kernel. So only exports signed with this server's export key (in
// a cluster: SANDBOX_CLUSTER_SECRET, shared by the nodes) are imported; a
// digest alone proves nothing, since whoever alters an export can compute
// new ones.

// exportVersion is the format's version.
const exportVersion = 1

// manifestName is the export's first entry.
const manifestName = "manifest.json"

// exported is the manifest as an export carries it.
type exported struct {
	Version int       `json:"version"`
	Name    string    `json:"name"`
	Sandbox string    `json:"sandbox"`
	Created time.Time `json:"created"`
	Content
	Digest    string `json:"digest"`
	Signature string `json:"signature"`
}

// sign is the export key's HMAC of a digest.
func (s *Store) sign(digest string) string {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte("sandhold-snapshot-export-v1\x00" + digest))
	return hex.EncodeToString(h.Sum(nil))
}

// Export writes snapshot m to w.
func (s *Store) Export(ctx context.Context, m *Manifest, w io.Writer) error {
	if m.Parked {
		return fault.New(fault.Conflict, "a hibernated sandbox's image is not exported; resume it and take a snapshot")
	}
	if m.Sealing() {
		return fault.New(fault.Conflict, "the snapshot is being sealed: export it once it reads ready")
	}
	lk, err := s.lockOwner(m.Owner, false)
	if err != nil {
		return err
	}
	defer lk.unlock()
	doc, err := json.Marshal(exported{Version: exportVersion, Name: m.Name, Sandbox: m.Sandbox, Created: m.Created,
		Content: m.Content, Digest: m.Digest, Signature: s.sign(m.Digest)})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	mod := m.Created
	if err := tw.WriteHeader(&tar.Header{Name: manifestName, Mode: 0o600, Size: int64(len(doc)), ModTime: mod, Typeflag: tar.TypeReg}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if _, err := tw.Write(doc); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	od := s.ownerDir(m.Owner)
	sent := make(map[string]bool)
	for _, c := range m.Chunks {
		if sent[c.Digest] {
			continue
		}
		sent[c.Digest] = true
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := exportChunk(tw, chunkPath(od, c.Digest), c, mod); err != nil {
			return err
		}
	}
	return tw.Close()
}

func exportChunk(tw *tar.Writer, path string, c Chunk, mod time.Time) error {
	f, err := os.Open(path) //nolint:gosec // G304: the store's own chunk
	if err != nil {
		return fmt.Errorf("export: chunk %s: %w", c.Digest[:12], err)
	}
	defer func() { _ = f.Close() }()
	if err := tw.WriteHeader(&tar.Header{Name: "chunks/" + c.Digest, Mode: 0o600, Size: c.Length, ModTime: mod, Typeflag: tar.TypeReg}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if _, err := io.CopyN(tw, f, c.Length); err != nil {
		return fmt.Errorf("export: chunk %s: %w", c.Digest[:12], err)
	}
	return nil
}

// ImportOptions bound an import.
type ImportOptions struct {
	Owner string
	// Name replaces the export's name when set.
	Name string
	// MaxImage bounds the image's size (the server's largest quota).
	MaxImage int64
	// MaxBytes bounds the data the owner may add (its snapshot budget
	// left); 0: no bound.
	MaxBytes int64
}

// Import reads an export from r and keeps it as a new snapshot of
// o.Owner, with a new id; nothing is kept unless all of it checks out.
func (s *Store) Import(ctx context.Context, r io.Reader, o ImportOptions) (*Manifest, error) {
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != manifestName || hdr.Typeflag != tar.TypeReg || hdr.Size <= 0 || hdr.Size > maxManifestBytes {
		return nil, fault.New(fault.Invalid, "not a snapshot export: it must begin with manifest.json")
	}
	doc, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "the export could not be read")
	}
	var e exported
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Version != exportVersion {
		return nil, fault.New(fault.Invalid, "not a snapshot export of a version this server reads")
	}
	if err := e.check(); err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "the export's manifest is malformed")
	}
	if o.MaxImage > 0 && e.ImageSize > o.MaxImage {
		return nil, fault.Errorf(fault.TooLarge, "the export's image of %d bytes is larger than this server's largest workspace", e.ImageSize)
	}
	d, err := e.digest()
	if err != nil || d != e.Digest || !hmac.Equal([]byte(s.sign(d)), []byte(e.Signature)) {
		return nil, errTampered
	}
	want := make(map[string]int64)
	var total int64
	for _, c := range e.Chunks {
		if _, ok := want[c.Digest]; !ok {
			want[c.Digest] = c.Length
			total += c.Length
		}
	}
	if o.MaxBytes > 0 && total > o.MaxBytes {
		return nil, fault.Errorf(fault.Conflict, "the export holds %d bytes, more than this key's snapshot budget has left (%d)", total, o.MaxBytes)
	}
	lk, err := s.lockOwner(o.Owner, false)
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	od := s.ownerDir(o.Owner)
	var pending []pendingChunk
	defer func() {
		for _, p := range pending {
			_ = p.f.Close()
			_ = os.Remove(p.f.Name())
		}
	}()
	for len(want) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, errTampered // chunks missing
		}
		if err != nil {
			return nil, fault.Wrap(fault.Invalid, err, "the export could not be read")
		}
		d, ok := strings.CutPrefix(hdr.Name, "chunks/")
		n, wanted := want[d]
		if !ok || !wanted || hdr.Typeflag != tar.TypeReg || hdr.Size != n {
			return nil, errTampered
		}
		delete(want, d)
		p, err := s.receiveChunk(tr, d, n, chunkPath(od, d))
		if err != nil {
			return nil, err
		}
		if p.f != nil {
			pending = append(pending, p)
		}
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		return nil, errTampered // something after the chunks
	}
	if err := commitChunks(pending); err != nil {
		return nil, err
	}
	pending = nil
	name := e.Name
	if o.Name != "" {
		name = o.Name
	}
	m := &Manifest{Name: name, Owner: o.Owner, Sandbox: e.Sandbox, Created: time.Now().UTC(), Imported: true, Content: e.Content}
	if err := s.finish(m); err != nil {
		return nil, err
	}
	return m, nil
}

// receiveChunk reads one chunk of n bytes, checks its sha256 and stages it
// (a chunk the owner holds already is checked and dropped: p.f nil).
func (s *Store) receiveChunk(r io.Reader, digest string, n int64, dest string) (pendingChunk, error) {
	f, err := os.CreateTemp(s.tmpDir(), "import-*")
	if err != nil {
		return pendingChunk{}, fmt.Errorf("import: %w", err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), r, n); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return pendingChunk{}, fault.Wrap(fault.Invalid, err, "the export could not be read")
	}
	if hex.EncodeToString(h.Sum(nil)) != digest {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return pendingChunk{}, errTampered
	}
	if _, err := os.Lstat(dest); err == nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return pendingChunk{}, nil
	}
	return pendingChunk{f: f, dest: dest}, nil
}
