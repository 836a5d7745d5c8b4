package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
)

// pendingChunk is a new chunk written under a temporary name.
type pendingChunk struct {
	f    *os.File
	dest string
}

// commitChunks makes new chunks durable under their names: every file's
// data first (one pass of fsyncs, the first of which writes most of it),
// then the renames and their directories.
func commitChunks(pending []pendingChunk) error {
	for _, p := range pending {
		if err := p.f.Sync(); err != nil {
			return fmt.Errorf("capture image: sync chunk: %w", err)
		}
	}
	dirs := make(map[string]bool)
	for _, p := range pending {
		_ = p.f.Close()
		dir := filepath.Dir(p.dest)
		if !dirs[dir] {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("capture image: %w", err)
			}
			dirs[dir] = true
		}
		if err := os.Rename(p.f.Name(), p.dest); err != nil {
			return fmt.Errorf("capture image: %w", err)
		}
	}
	for dir := range dirs {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("capture image: %w", err)
		}
		_ = syncDir(filepath.Dir(dir))
	}
	return nil
}
