//go:build !linux

package archive

import (
	"fmt"
	"os"
)

// ChildMain: the extractor runs inside a sandbox, which needs Linux.
func ChildMain() int {
	fmt.Fprintln(os.Stderr, "sandhold-archive: the extractor runs inside a Linux sandbox only")
	return 2
}
