package sandbox

import (
	"os"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/outbuf"
)

// copyBufSize is the read size of an execution's output pipes: a pipe's
// default capacity is 64 KiB, and 32 KiB reads keep the copies few.
const copyBufSize = 32 << 10

// copyBufs recycles copyOut's buffers: two per execution would otherwise be
// 64 KiB allocated and zeroed per command, the largest allocation of the
// exec path.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// outputCopies counts an execution's output copies down. Unlike a
// WaitGroup it can be asked without blocking: when the copies are done,
// as they are by the time a short command's exit is handled, supervise
// waits for them without a goroutine of its own or a timer.
type outputCopies struct {
	done chan struct{}
	n    int
}

func newOutputCopies(n int) *outputCopies {
	return &outputCopies{done: make(chan struct{}, n), n: n}
}

// Done reports one copy finished.
func (c *outputCopies) Done() { c.done <- struct{}{} }

// wait waits for every copy. If they are not all done within grace, it
// calls expire (which must make the copies end) and waits on.
func (c *outputCopies) wait(grace time.Duration, expire func()) {
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

func copyOut(wg interface{ Done() }, dst *outbuf.Output, src *os.File) {
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

// NewOutput makes a stream of at most limit kept bytes charged to the
// sandbox owner's share of the server's output budget (Config.OutputBudget).
func (s *Sandbox) NewOutput(limit int) *outbuf.Output {
	return s.m.cfg.OutputBudget.NewOutput(s.rec.Owner, limit)
}

// NewOutput is the sandbox's NewOutput, for a capability that keeps the
// process's output itself (shell sessions).
func (p *Proc) NewOutput(limit int) *outbuf.Output { return p.s.NewOutput(limit) }
