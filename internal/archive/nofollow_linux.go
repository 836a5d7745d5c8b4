package archive

import (
	"errors"
	"syscall"
)

// syscallNoFollow makes Pack's open fail on a symlink swapped in after the
// directory listing instead of following it (os.Root would follow it, but
// only inside the root).
const syscallNoFollow = syscall.O_NOFOLLOW

func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }
