package cdp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Pipe is Chromium's --remote-debugging-pipe transport: the browser reads
// protocol messages from its descriptor 3 and writes them to its
// descriptor 4, each message one JSON text followed by a NUL byte. The
// descriptors are made by whoever starts the browser (inside a sandbox:
// its init) and held by the browser and the server only, so, unlike a
// TCP port, nothing else can stand in for the browser by listening first.
type Pipe struct {
	in  io.WriteCloser // to the browser's descriptor 3
	out io.ReadCloser  // from its descriptor 4
	rd  *bufio.Reader

	// wmu serialises writes: a message is written whole or the pipe is
	// broken (a part of one would corrupt every later message).
	wmu    sync.Mutex
	broken error
}

// pipeReadBuffer is the reader's buffer (messages are mostly small; a
// larger one is assembled from several reads, up to MaxMessage).
const pipeReadBuffer = 64 << 10

// NewPipe frames messages over in (the browser's descriptor 3) and out
// (its descriptor 4).
func NewPipe(in io.WriteCloser, out io.ReadCloser) *Pipe {
	return &Pipe{in: in, out: out, rd: bufio.NewReaderSize(out, pipeReadBuffer)}
}

// errTooLarge is a message over MaxMessage: the browser has gone wrong.
var errTooLarge = fmt.Errorf("cdp: a message from the browser is over %d bytes", MaxMessage)

// Read returns the next message (without its NUL). It is called by one
// reader only.
func (p *Pipe) Read() ([]byte, error) {
	var msg []byte
	for {
		chunk, err := p.rd.ReadSlice(0)
		if len(msg)+len(chunk) > MaxMessage+1 {
			return nil, errTooLarge
		}
		msg = append(msg, chunk...)
		switch {
		case err == nil:
			return msg[:len(msg)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// Write sends one message. A failed or timed-out write breaks the pipe
// for good: the browser may have read part of the message.
func (p *Pipe) Write(msg []byte) error {
	if bytes.IndexByte(msg, 0) >= 0 {
		return errors.New("cdp: a message holds a NUL byte")
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.broken != nil {
		return p.broken
	}
	if f, ok := p.in.(*os.File); ok {
		// A browser that stops reading (frozen with its sandbox, wedged)
		// must not hold the writer forever.
		_ = f.SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), 0)
	if _, err := p.in.Write(buf); err != nil {
		p.broken = fmt.Errorf("%w: %w", ErrClosed, err)
		return p.broken
	}
	return nil
}

// Close closes both descriptors; the browser sees the end of its input
// and exits.
func (p *Pipe) Close() error {
	return errors.Join(p.in.Close(), p.out.Close())
}
