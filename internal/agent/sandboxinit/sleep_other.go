//go:build !linux

package sandboxinit

// SetKeeper does nothing off Linux: there is no sandbox init to sleep.
func SetKeeper(bool) {}
