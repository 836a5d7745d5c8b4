package sandbox

import (
	"path/filepath"

	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
	"github.com/sandhold/sandhold/internal/sandbox/forklower"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
)

// ImageBytes sums the blocks the workspace images under the data dir hold
// on the host (a staged copy's included), one stat each.
func ImageBytes(dataDir string) int64 {
	return imageBytes(filepath.Join(dataDir, "workspaces"))
}

func imageBytes(root string) int64 {
	return diskbudget.EntriesBytes(root, volume.ImageName, volume.ImageName+volume.TmpSuffix, forklower.UpperImage, forklower.UpperImage+volume.TmpSuffix, forklower.FlatImage+volume.TmpSuffix)
}
