package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

// image makes a sparse file of size bytes with data at the given offsets.
func image(t *testing.T, size int64, data map[int64][]byte) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off, b := range data {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func random(t *testing.T, n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func sameFile(t *testing.T, a *os.File, bPath string) {
	t.Helper()
	want, err := io.ReadAll(io.NewSectionReader(a, 0, 1<<40))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(bPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("restored image differs (%d vs %d bytes)", len(got), len(want))
	}
}

func TestCaptureRestoreDedupDelete(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(64 << 20)
	a, b := random(t, 3<<20), random(t, 100)
	img := image(t, size, map[int64][]byte{0: a, 20 << 20: b, 40 << 20: make([]byte, ChunkSize)}) // the last: zeros
	m1, err := s.Capture(ctx, img, size, Info{Name: "one", Owner: "k1", Sandbox: "sb1", Meta: json.RawMessage(`{"x":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(m1.Chunks) != 2 {
		t.Fatalf("chunks = %d, want 2 (holes and zeros are not stored)", len(m1.Chunks))
	}
	out := filepath.Join(t.TempDir(), "restored.img")
	if err := s.Restore(ctx, m1, out); err != nil {
		t.Fatal(err)
	}
	sameFile(t, img, out)

	// A second snapshot with one chunk changed stores one new chunk.
	before := s.Usage("k1", false)
	if _, err := img.WriteAt(random(t, 10), 20<<20); err != nil {
		t.Fatal(err)
	}
	m2, err := s.Capture(ctx, img, size, Info{Name: "two", Owner: "k1", Sandbox: "sb1"})
	if err != nil {
		t.Fatal(err)
	}
	if grew := s.Usage("k1", false) - before; grew <= 0 || grew > 64<<10 {
		t.Fatalf("second snapshot grew the pool by %d bytes, want one small chunk", grew)
	}
	if m1.Digest == m2.Digest {
		t.Fatal("different content, same digest")
	}

	// Another owner sees neither.
	if _, err := s.Get("k2", false, m1.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other owner's Get: %v, want not found", err)
	}
	if l, _ := s.List("k2", false, false); len(l) != 0 {
		t.Fatalf("other owner lists %d snapshots", len(l))
	}

	// Deleting the first keeps the second whole.
	if _, err := s.Delete(ctx, "k1", false, m1.ID); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(t.TempDir(), "restored.img")
	if err := s.Restore(ctx, m2, out2); err != nil {
		t.Fatal(err)
	}
	sameFile(t, img, out2)
	if _, err := s.Delete(ctx, "k1", false, m2.ID); err != nil {
		t.Fatal(err)
	}
	if u := s.Usage("k1", false); u != 0 {
		t.Fatalf("pool holds %d bytes after every snapshot went", u)
	}
}

func exportOf(t *testing.T, s *Store, m *Manifest) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Export(context.Background(), m, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rewrite applies f to every entry of an export.
func rewrite(t *testing.T, exp []byte, f func(h *tar.Header, body []byte) []byte) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(exp))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		body = f(h, body)
		if body == nil {
			continue
		}
		h.Size = int64(len(body))
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(body)
	}
	_ = tw.Close()
	return out.Bytes()
}

// withExtra appends an entry the manifest does not name.
func withExtra(t *testing.T, exp []byte) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(exp))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		body, _ := io.ReadAll(tr)
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(body)
	}
	_ = tw.WriteHeader(&tar.Header{Name: "chunks/extra", Size: 3, Mode: 0o600, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("abc"))
	_ = tw.Close()
	return out.Bytes()
}

func TestExportImport(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(32 << 20)
	img := image(t, size, map[int64][]byte{0: random(t, 5<<20), 16 << 20: random(t, 4096)})
	m, err := s.Capture(ctx, img, size, Info{Name: "x", Owner: "k1", Sandbox: "sb1", Meta: json.RawMessage(`{"limits":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	exp := exportOf(t, s, m)

	got, err := s.Import(ctx, bytes.NewReader(exp), ImportOptions{Owner: "k2", MaxImage: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != m.Digest || got.ID == m.ID || got.Owner != "k2" {
		t.Fatalf("imported %+v", got)
	}
	out := filepath.Join(t.TempDir(), "r.img")
	if err := s.Restore(ctx, got, out); err != nil {
		t.Fatal(err)
	}
	sameFile(t, img, out)

	flip := func(b []byte) []byte { c := bytes.Clone(b); c[len(c)/2] ^= 1; return c }
	other, err := Open(t.TempDir(), nil) // another server's key
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		store *Store
		exp   []byte
	}{
		{"ChunkByteFlipped", s, rewrite(t, exp, func(h *tar.Header, b []byte) []byte {
			if h.Name != manifestName {
				return flip(b)
			}
			return b
		})},
		{"ChunkMissing", s, rewrite(t, exp, func(h *tar.Header, b []byte) []byte {
			if h.Name != manifestName {
				return nil
			}
			return b
		})},
		{"ManifestEditedAndRedigested", s, rewrite(t, exp, func(h *tar.Header, b []byte) []byte {
			if h.Name != manifestName {
				return b
			}
			var e exported
			_ = json.Unmarshal(b, &e)
			e.Meta = json.RawMessage(`{"limits":{"memory":999999999999}}`)
			e.Digest, _ = e.digest()
			out, _ := json.Marshal(e)
			return out
		})},
		{"SignedByAnotherServer", other, exp},
		{"Truncated", s, exp[:len(exp)/2]},
		{"ExtraEntry", s, withExtra(t, exp)},
		{"Untouched", s, exp},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := tc.store.List("k3", false, true)
			_, err := tc.store.Import(ctx, bytes.NewReader(tc.exp), ImportOptions{Owner: "k3", MaxImage: 1 << 30})
			if tc.name == "Untouched" {
				// The control case: the same bytes import.
				if err != nil {
					t.Fatalf("untouched export refused: %v", err)
				}
				return
			}
			if !fault.Is(err, fault.Invalid) {
				t.Fatalf("import: %v, want refused as invalid", err)
			}
			after, _ := tc.store.List("k3", false, true)
			if len(after) != len(before) {
				t.Fatal("a refused import left a snapshot")
			}
		})
	}
}

// TestParkAcrossFileSystems: a parked image moves into a store on another
// file system (a copy of its data, holes kept) and back.
func TestParkAcrossFileSystems(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "snapstore-")
	if err != nil {
		t.Skip("no /dev/shm:", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(shm) })
	cases := []struct{ name, store string }{
		{"SameFileSystem", ""},
		{"OtherFileSystem", shm},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.store
			if dir == "" {
				dir = t.TempDir()
			}
			s, err := Open(filepath.Join(dir, "store"), nil)
			if err != nil {
				t.Fatal(err)
			}
			size := int64(64 << 20)
			img := image(t, size, map[int64][]byte{8 << 20: random(t, 1<<20)})
			want, _ := io.ReadAll(io.NewSectionReader(img, 0, size))
			path := img.Name()
			m, err := s.PrepareParked(Info{Owner: "k", Sandbox: "sb", Hibernation: true}, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Park(m, path); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the parked image is still in the workspace: %v", err)
			}
			if u := s.Usage("k", false); u < 1<<20 || u > 4<<20 {
				t.Errorf("the parked image holds %d bytes in the store (sparse: about 1 MiB)", u)
			}
			if err := s.Export(context.Background(), m, io.Discard); err == nil {
				t.Error("a parked image exports")
			}
			if !s.Holds(m) {
				t.Error("the store does not hold the image it parked")
			}
			if err := s.Restore(context.Background(), m, path); err != nil {
				t.Fatal(err)
			}
			if s.Holds(m) {
				t.Error("the store holds an image it moved out")
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("unparked image differs: %v", err)
			}
			if _, err := s.Delete(context.Background(), "k", false, m.ID); err != nil {
				t.Fatal(err)
			}
			if u := s.Usage("k", false); u != 0 {
				t.Errorf("%d bytes left after the delete", u)
			}
		})
	}
}
