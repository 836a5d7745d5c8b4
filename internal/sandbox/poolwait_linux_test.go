package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/sandbox/volume"
	"golang.org/x/sys/unix"
)

// TestCreateDoesNotWaitForThePoolsTemplate: a create never waits on the
// warm pool's refill. The refill's first step for a size is the workspace
// template (verified, else built with mkfs.ext4 and fsynced); on a loaded
// disk that took long enough that a create started beside it ran out of its
// init's 30 s setup deadline ("init setup: context deadline exceeded",
// a 503) while it waited for the template's lock. Here the template is a
// FIFO, so the refill's open of it blocks until the test writes to it: the
// create must be served meanwhile (by formatting its own image).
func TestCreateDoesNotWaitForThePoolsTemplate(t *testing.T) {
	cfg := testConfig(t)
	cfg.WarmPool = 1
	size := cfg.Default.DiskBytes
	dir := filepath.Join(cfg.DataDir, volume.TemplateDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, volume.TemplateName(size))
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		// Opening the FIFO's write end lets the refill's open return; it
		// then finds no valid template and builds one in its place.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			_ = w.Close()
		}
	}
	t.Cleanup(release)
	m := newManager(t, cfg, nil)
	// The refill has claimed the template once the size has an entry.
	for m.wst.Sizes() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Create(context.Background(), owner, Spec{})
		done <- err
	}()
	// A hang detector, not a timing assertion: a create takes well under a
	// second; one that waits for the blocked refill never returns.
	hang := time.After(2 * time.Minute)
	if dl, ok := t.Deadline(); ok {
		hang = time.After(time.Until(dl) / 2)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("create beside a refill building its template: %v", err)
		}
	case <-hang:
		release()
		err := <-done
		t.Fatalf("the create waited for the warm pool's template (it returned only once the refill was let go; err %v)", err)
	}
	release()
	// The refill goes on once let go: the pool fills.
	for m.PoolStatus().Ready < 1 {
		time.Sleep(10 * time.Millisecond)
	}
}
