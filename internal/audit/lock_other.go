//go:build !unix

package audit

import "errors"

// lock is unsupported here: without a lock between processes the head
// file could be written out of order, so appends to a file-headed log fail.
func (k *keptFile) lock() (func(), error) {
	return nil, errors.New("audit lock: not supported on this platform")
}
