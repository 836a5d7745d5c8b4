// Package outcopy copies an execution's output pipes from its init into
// the streams the server keeps: the one-shot copy, the copies of a kept
// execution (ExecRequest.Keep) that finish the call's output at its main
// process's exit and read into nothing afterwards, and the count of the
// copies an execution waits for.
package outcopy

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/outbuf"
)

// copyBufSize is the read size of an execution's output pipes: a pipe's
// default capacity is 64 KiB, and 32 KiB reads keep the copies few.
const copyBufSize = 32 << 10

// copyBufs recycles Copy's buffers: two per execution would otherwise be
// 64 KiB allocated and zeroed per command, the largest allocation of the
// exec path.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// Copies counts an execution's output copies down. Unlike a
// WaitGroup it can be asked without blocking: when the copies are done,
// as they are by the time a short command's exit is handled, the execution's
// supervisor waits for them without a goroutine of its own or a timer.
type Copies struct {
	done chan struct{}
	n    int
}

// NewCopies counts n copies down.
func NewCopies(n int) *Copies {
	return &Copies{done: make(chan struct{}, n), n: n}
}

// Done reports one copy finished.
func (c *Copies) Done() { c.done <- struct{}{} }

// Wait waits for every copy. If they are not all done within grace, it
// calls expire (which must make the copies end) and waits on.
func (c *Copies) Wait(grace time.Duration, expire func()) {
	var timer *time.Timer
	for range c.n {
		select {
		case <-c.done:
			continue
		default:
		}
		if timer == nil {
			timer = time.NewTimer(grace)
			defer timer.Stop()
		}
		select {
		case <-c.done:
		case <-timer.C:
			expire()
			<-c.done
		}
	}
}

// Copy copies src into dst until src ends, then closes src and reports
// to wg.
func Copy(wg interface{ Done() }, dst *outbuf.Output, src *os.File) {
	defer wg.Done()
	defer func() { _ = src.Close() }()
	buf := copyBufs.Get().(*[]byte) //nolint:forcetypeassert // the pool holds only *[]byte
	defer copyBufs.Put(buf)
	// A plain read loop: io.CopyBuffer would hand the copy to
	// (*os.File).WriteTo, which ignores the buffer and allocates its own.
	// Output.Write copies what it keeps, so the buffer is free again
	// once the loop ends.
	for {
		n, err := src.Read(*buf)
		if n > 0 {
			_, _ = dst.Write((*buf)[:n])
		}
		if err != nil {
			return
		}
	}
}

// pollable makes f (a pipe's read end from the init) a descriptor the
// runtime's poller reads, so a read waits without a thread and a deadline
// can interrupt it. f is closed.
func pollable(f *os.File) (*os.File, error) {
	if f == nil {
		return nil, nil
	}
	defer func() { _ = f.Close() }()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("dup output pipe: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("output pipe non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil //nolint:gosec // G115: a descriptor is non-negative
}

// KeepStreams turns the process's output pipes into pollable ones; they
// are the copies' to close.
func KeepStreams(p *agent.Process) error {
	o, err := pollable(p.Stdout)
	if err != nil {
		_ = p.Stderr.Close()
		return err
	}
	e, err := pollable(p.Stderr)
	if err != nil {
		_ = o.Close()
		return err
	}
	p.Stdout, p.Stderr = o, e
	return nil
}

// CopyKept copies a kept execution's stream into dst until the call's
// output is complete (EndCall), then reads it into nothing until every
// process holding the pipe has closed it.
func CopyKept(wg interface{ Done() }, dst *outbuf.Output, src *os.File) {
	defer func() { _ = src.Close() }()
	buf := copyBufs.Get().(*[]byte) //nolint:forcetypeassert // the pool holds only *[]byte
	defer copyBufs.Put(buf)
	callDone := false
	done := func() {
		if !callDone {
			callDone = true
			wg.Done()
		}
	}
	defer done()
	for {
		n, err := src.Read(*buf)
		if n > 0 && !callDone {
			_, _ = dst.Write((*buf)[:n])
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && !callDone:
			// The main process has exited: what the pipe holds now is
			// the call's, what comes later its kept processes'.
			_ = src.SetReadDeadline(time.Time{})
			drainNow(src, dst, *buf)
			done()
		default:
			return // EOF: no process holds the pipe any more
		}
	}
}

// drainNow reads what the pipe holds without waiting for more.
func drainNow(src *os.File, dst *outbuf.Output, buf []byte) {
	rc, err := src.SyscallConn()
	if err != nil {
		return
	}
	for {
		n := 0
		rerr := rc.Read(func(fd uintptr) bool {
			var err error
			n, err = unix.Read(int(fd), buf)
			if err != nil {
				n = 0
			}
			return true // never wait: EAGAIN means the pipe is empty
		})
		if n <= 0 || rerr != nil {
			return
		}
		_, _ = dst.Write(buf[:n])
	}
}

// EndCall tells a kept execution's copies that its main process exited.
func EndCall(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.SetReadDeadline(time.Now())
		}
	}
}
