package outcopy

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/outbuf"
)

// TestOutputCopiesWait: copies already done are waited for without the
// grace timer; a copy still blocked past the grace is ended by expire —
// once — and then waited for. The blocked copy reads a pipe the way an
// execution's output arrives from the init (non-blocking, polled), whose
// writer never closes: only closing the reader ends it.
func TestOutputCopiesWait(t *testing.T) {
	c := NewCopies(2)
	c.Done()
	c.Done()
	var expired atomic.Int32
	c.Wait(time.Hour, func() { expired.Add(1) })
	if expired.Load() != 0 {
		t.Fatal("expire called for copies already done")
	}

	r, w, err := os.Pipe() // non-blocking, polled, like the server's ends from the init
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	c = NewCopies(2)
	c.Done()
	go Copy(c, outbuf.NewOutput(1024), r)
	c.Wait(50*time.Millisecond, func() {
		expired.Add(1)
		_ = r.Close()
	})
	if n := expired.Load(); n != 1 {
		t.Fatalf("expire called %d times, want once", n)
	}
}
