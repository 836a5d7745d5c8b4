package sandbox

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Processes that outlive their execution (ExecRequest.Keep).
//
// A one-shot execution ends what it started: when its main process exits,
// whatever it left running in its execution group is killed, so
// `nohup python3 -m http.server 8000 &` dies with the call. With keep, an
// execution whose main process exits on its own (not killed, not timed
// out) leaves its group as it is: the processes in it run on, within the
// sandbox's limits (pids, memory, CPU time per process), until they exit,
// something in the sandbox kills them, or the sandbox stops or is deleted.
// The call answers when the main process has exited and everything it
// wrote is read: the output streams are read through the runtime's poller,
// and at the main process's exit a read deadline makes each copy read what
// the pipe holds then (all the main process and what it waited for wrote)
// and finish the call's output; from then on the streams are read into
// nothing, so a kept process that writes never blocks on a full pipe and
// never gets EPIPE. Groups with kept processes are at most maxKeptGroups
// per sandbox; one is reused once it is empty.

// maxKeptGroups bounds the execution groups held for kept processes per
// sandbox: each is a cgroup and a few descriptors on the host, and two
// parked readers.
const maxKeptGroups = 8

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

// keepStreams turns the process's output pipes into pollable ones; they
// are the copies' to close.
func keepStreams(p *agent.Process) error {
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

// copyKept copies a kept execution's stream into dst until the call's
// output is complete (endCall), then reads it into nothing until every
// process holding the pipe has closed it.
func copyKept(wg interface{ Done() }, dst *outbuf.Output, src *os.File) {
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

// endCall tells a kept execution's copies that its main process exited.
func endCall(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.SetReadDeadline(time.Now())
		}
	}
}

// checkKeep refuses a keep execution when the sandbox already holds
// maxKeptGroups groups of kept processes (after reusing empty ones).
func (s *Sandbox) checkKeep() error {
	s.pruneKept()
	s.mu.Lock()
	n := len(s.kept)
	s.mu.Unlock()
	if n >= maxKeptGroups {
		return capFault(ratelimit.Executions, maxKeptGroups, execCapRetry, fmt.Sprintf(
			"at most %d executions' kept processes per sandbox: end some of them (kill) or run without keep", maxKeptGroups))
	}
	return nil
}

// keepSlot holds an execution group whose processes outlive their call.
func (s *Sandbox) keepSlot(sl *slot) {
	s.mu.Lock()
	if s.group == nil || sl.gen != s.gen {
		s.mu.Unlock()
		sl.close()
		return
	}
	s.kept = append(s.kept, sl)
	s.mu.Unlock()
}

// pruneKept returns the kept groups whose processes have all exited to
// the pool.
func (s *Sandbox) pruneKept() {
	s.mu.Lock()
	var empty []*slot
	kept := s.kept[:0]
	for _, sl := range s.kept {
		if populated, err := sl.populated(); err == nil && !populated {
			empty = append(empty, sl)
			continue
		}
		kept = append(kept, sl)
	}
	clear(s.kept[len(kept):])
	s.kept = kept
	s.mu.Unlock()
	for _, sl := range empty {
		sl.dirty = true // checked empty again before it is pooled
		s.releaseSlot(sl)
	}
}

// keptSlots are the groups holding kept processes now.
func (s *Sandbox) keptSlots() []*slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*slot(nil), s.kept...)
}
