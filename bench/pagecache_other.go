//go:build !linux

package main

import "os"

// dropCached does nothing where there is no posix_fadvise: the figures
// that depend on a cold cache are then warm-cache figures.
func dropCached(*os.File) {}
