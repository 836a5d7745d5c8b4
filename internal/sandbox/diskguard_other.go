//go:build !linux

package sandbox

// ImageBytes is zero: there are no workspace images off Linux.
func ImageBytes(string) int64 { return 0 }

func imageBytes(string) int64 { return 0 }
