package sandboxinit

import (
	"fmt"
	"os"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"
)

// awaitRelease blocks the calling thread until the server releases the
// command or ends the hold (agent.Hold tells the story).
func awaitRelease(f *os.File) error {
	var b [1]byte
	for {
		n, err := unix.Read(int(f.Fd()), b[:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("wait for the release: %w", err)
		case n == 1 && b[0] == 1:
			return nil
		}
		return &proto.Error{Code: proto.CodeNotReleased, Msg: "the command was not released: its call's record was not stored"}
	}
}
