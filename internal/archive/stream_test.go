package archive

import (
	"errors"
	"io"
	"os"
	"testing"
)

// TestStreamEndsWithThePackingsOutcome: the bytes the packer wrote are
// read, then its failure is the last Read's error (a success is EOF),
// and Result is what it reported.
func TestStreamEndsWithThePackingsOutcome(t *testing.T) {
	boom := errors.New("a name the deny list refuses")
	for _, fail := range []error{nil, boom} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		s, finish := NewStream(r)
		go func() {
			_, _ = w.Write([]byte("tar bytes"))
			_ = w.Close()
			finish(Result{Files: 1}, fail)
		}()
		b, err := io.ReadAll(s)
		if string(b) != "tar bytes" || !errors.Is(err, fail) {
			t.Fatalf("packing failed with %v: read %q, %v", fail, b, err)
		}
		if res := s.Result(); res.Files != 1 {
			t.Fatalf("result %+v", res)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
