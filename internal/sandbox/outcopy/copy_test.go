package outcopy

import (
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/outbuf"
)

// TestCopyOutReusesItsBuffer: copying a command's output allocates no
// 32 KiB buffer per stream once the pool is warm (it did, twice per
// execution, through (*os.File).WriteTo).
func TestCopyOutReusesItsBuffer(t *testing.T) {
	copyOnce := func() string {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		out := outbuf.NewOutput(1 << 10)
		var wg sync.WaitGroup
		wg.Add(1)
		go Copy(&wg, out, r)
		_, _ = w.WriteString("hello\n")
		_ = w.Close()
		wg.Wait()
		s, _ := out.Text()
		return s
	}
	if got := copyOnce(); got != "hello\n" {
		t.Fatalf("copied %q", got)
	}
	const n = 50
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		copyOnce()
	}
	runtime.ReadMemStats(&after)
	perCopy := (after.TotalAlloc - before.TotalAlloc) / n
	// A pipe, its two files, the output and a goroutine are a few KiB; a
	// fresh copy buffer alone would be 32 KiB.
	if perCopy >= copyBufSize/2 {
		t.Fatalf("%d bytes allocated per copy, want well under the %d of a fresh buffer", perCopy, copyBufSize)
	}
	t.Logf("%d bytes allocated per copy", perCopy)
}
