package archive

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// TestExtractMillionEntryTar builds a 1,000,000-entry tar.gz streaming to
// disk and checks it is refused at entry 10,001 with bounded allocation:
// walking all million headers would allocate gigabytes.
func TestExtractMillionEntryTar(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1,000,000-entry archive")
	}
	const entries = 1_000_000
	p := filepath.Join(t.TempDir(), "million.tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	h := &tar.Header{Typeflag: tar.TypeReg, Mode: 0o644}
	for i := range entries {
		h.Name = "f" + strconv.Itoa(i)
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	must(t, f.Close())
	src, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close() //nolint:errcheck // opened read-only: a close error cannot lose anything

	d := newDest(t)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Extract(context.Background(), src, FormatTarGz, d.root, "dst", DefaultLimits())
	runtime.ReadMemStats(&after)
	ae := wantReason(t, err, ReasonTooManyEntries)
	if ae.Entry != "f10000" {
		t.Fatalf("refused at %q, want the 10,001st entry f10000", ae.Entry)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d KiB while refusing", alloc>>10)
	if alloc > 64<<20 {
		t.Fatalf("allocated %d MiB while refusing a million entries", alloc>>20)
	}
	d.assertUntouched(t)
}
