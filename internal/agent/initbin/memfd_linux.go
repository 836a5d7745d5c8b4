package initbin

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// seals are the seals the memfd must carry before it is handed out: no
// write, no shrink, no grow, and no change to the seals themselves.
const seals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// mfdExec asks for an executable memfd on kernels with vm.memfd_noexec
// (6.3+); older kernels reject the flag with EINVAL and get the old
// behaviour (every memfd executable).
const mfdExec = 0x10 // MFD_EXEC

// Memfd returns a close-on-exec memfd holding program, sealed, positioned
// at 0. It checks the seals it set rather than trusting the calls.
func Memfd(program []byte) (*os.File, error) { return memfd("sandhold-init", program) }

func memfd(name string, program []byte) (*os.File, error) {
	if len(program) == 0 {
		return nil, errors.New("empty program")
	}
	const flags = unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(name, flags|mfdExec)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate(name, flags)
	}
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	fail := func(err error) (*os.File, error) {
		_ = f.Close()
		return nil, err
	}
	for rest := program; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err != nil {
			return fail(fmt.Errorf("write memfd: %w", err))
		}
		rest = rest[n:]
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return fail(fmt.Errorf("seal memfd: %w", err))
	}
	got, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return fail(fmt.Errorf("read memfd seals: %w", err))
	}
	if got&seals != seals {
		return fail(fmt.Errorf("memfd seals %#x, want %#x", got, seals))
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return fail(fmt.Errorf("rewind memfd: %w", err))
	}
	return f, nil
}
