package skills_test

import "io/fs"

// fsMode turns unix mode bits (with the file type) into an fs.FileMode.
func fsMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&0o170000 == 0o120000 {
		mode |= fs.ModeSymlink
	}
	return mode
}
