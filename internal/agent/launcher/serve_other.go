//go:build !linux

package launcher

import "errors"

// Serve fails: the launcher clones Linux namespaces.
func Serve() error { return errors.New("the launcher needs Linux") }
