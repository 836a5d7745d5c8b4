package agent

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// A Hold keeps a spawned command from starting until the server says so.
//
// The server makes one per held spawn (SpawnReq.Held): a pipe whose reader
// travels with the request and whose writer the server keeps. The init's
// forking thread reads it right before the fork, blocking in read(2) on
// that thread (not through the runtime's poller): when the server writes
// its one byte, the kernel wakes that thread and nothing else, and the
// fork follows. The server writes the byte once the call's audit record
// is durable (dispatch, "Record first"), so the command's preparation —
// the request's way to the init, its checks, pipes and path — runs beside
// the record's sync, and no command starts unrecorded. Closed without the
// byte (the record failed, the call went away, the server ended), the read
// returns at its end and the spawn is refused (CodeNotReleased).
type Hold struct {
	// r is the reader sent with the request; w the writer kept here.
	r, w *os.File
	once sync.Once
}

// NewHold makes a hold.
func NewHold() (*Hold, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("hold: pipe: %w", err)
	}
	return &Hold{r: os.NewFile(uintptr(p[0]), "hold"), w: os.NewFile(uintptr(p[1]), "release")}, nil
}

// Reader is the descriptor to attach to the spawn request.
func (h *Hold) Reader() *os.File { return h.r }

// CloseReader drops this process's copy of the reader once the request
// carries it (or will never be sent).
func (h *Hold) CloseReader() { _ = h.r.Close() }

// End releases the command (err nil) or refuses it, once; later calls do
// nothing. It never blocks: the pipe is empty and holds a page.
func (h *Hold) End(err error) {
	h.once.Do(func() {
		if err == nil {
			_, _ = unix.Write(int(h.w.Fd()), []byte{1})
		}
		_ = h.w.Close()
	})
}
