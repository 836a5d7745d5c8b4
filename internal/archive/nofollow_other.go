//go:build !linux

package archive

// syscallNoFollow is 0 elsewhere: os.Root still keeps the open inside the
// root; Extract fails closed on these platforms anyway.
const syscallNoFollow = 0

func isLoop(err error) bool { return false }
