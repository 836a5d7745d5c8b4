//go:build !amd64

package int80

// Call is only implemented on amd64; elsewhere there is no int $0x80 entry
// to test, and it reports -ENOSYS.
func Call(nr, a1, a2, a3 uintptr) int32 { return -38 }
