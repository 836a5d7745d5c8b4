//go:build amd64

package int80

// Call performs the i386 system call nr with up to three arguments (their
// low 32 bits) and returns the raw result: a value in [-4095, -1] is -errno.
//
//go:noescape
func Call(nr, a1, a2, a3 uintptr) int32
