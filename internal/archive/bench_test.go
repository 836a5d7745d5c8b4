package archive

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// smallFilesZip is 10,000 files of 1 KiB in 100 directories.
func smallFilesZip(b testing.TB) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	body := []byte(noise(1, 1024))
	for i := range 10_000 {
		w, err := zw.Create(fmt.Sprintf("d%02d/f%05d.txt", i%100, i))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Write(body); err != nil {
			b.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkExtractZip10kFiles extracts a 10,000-small-file zip with every
// cap on (both passes, staging, rename into place).
func BenchmarkExtractZip10kFiles(b *testing.B) {
	data := smallFilesZip(b)
	p := filepath.Join(b.TempDir(), "small.zip")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		b.Fatal(err)
	}
	src, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close() //nolint:errcheck // opened read-only: a close error cannot lose anything
	base := b.TempDir()
	root, err := os.OpenRoot(base)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close() //nolint:errcheck // a root handle: nothing to flush
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		res, err := Extract(context.Background(), src, FormatZip, root, "out"+strconv.Itoa(i), DefaultLimits())
		if err != nil {
			b.Fatal(err)
		}
		if res.Files != 10_000 {
			b.Fatalf("files %d", res.Files)
		}
	}
	b.ReportMetric(float64(10_000*b.N)/b.Elapsed().Seconds(), "files/s")
}
