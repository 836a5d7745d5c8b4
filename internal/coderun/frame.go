package coderun

import (
	"bytes"
	"io"
	"strconv"
)

// The driver protocol. Requests go to the interpreter's stdin as
// "<decimal length>\n<body>". Replies come back on its stdout and stderr
// as frames, each written with ONE write() of at most PIPE_BUF bytes, so
// that the cells' own output (and any process they leave behind) writing
// to the same pipe can never tear a frame:
//
//	0x1e <nonce: 32 hex> <kind: 'C' more follows | 'E' end of message> <length: 4 hex> <payload> 0x1f
//
// A message is the concatenation of its frames' payloads (JSON). Bytes
// outside frames are the cells' raw output. The nonce is random per
// interpreter, so output that happens to look like a frame does not parse
// as one; code that goes looking for the nonce can only confuse its own
// session. Payloads are JSON and so never hold the start byte, which lets
// a fake header be told from a real one without waiting for its length.
const (
	frameStart = 0x1e
	frameEnd   = 0x1f
	nonceLen   = 32
	// frameHeader is start byte, nonce, kind and length.
	frameHeader = 1 + nonceLen + 1 + 4
	// maxFramePayload keeps a whole frame within PIPE_BUF (4096), the
	// size up to which a pipe write is atomic.
	maxFramePayload = 4096 - frameHeader - 1
	// maxMessageBytes caps one reassembled message (a result with images):
	// it is held in server memory.
	maxMessageBytes = 32 << 20
	// readChunk is how much one read takes from a pipe.
	readChunk = 32 << 10
)

// event is what a pipe reader reports: raw output, one complete message,
// or the end of the stream.
type event struct {
	raw []byte
	msg []byte
	// oversize reports a message that exceeded maxMessageBytes (dropped).
	oversize bool
	eof      bool
}

// frameParser splits a byte stream into raw output and messages.
type frameParser struct {
	start   []byte // 0x1e + nonce
	buf     []byte
	msg     []byte
	dropped bool // the message being assembled went over the cap
}

func newFrameParser(nonce string) *frameParser {
	return &frameParser{start: append([]byte{frameStart}, nonce...)}
}

// feed adds p and returns the events it completes. At eof everything
// pending is flushed as raw output.
func (f *frameParser) feed(p []byte, eof bool, emit func(event)) {
	f.buf = append(f.buf, p...)
	for len(f.buf) > 0 {
		i := bytes.Index(f.buf, f.start)
		if i < 0 {
			// Keep a tail that may be the beginning of a frame start.
			keep := min(len(f.buf), len(f.start)-1)
			if eof {
				keep = 0
			}
			// Only keep bytes that could still start a frame.
			if keep > 0 {
				if j := bytes.LastIndexByte(f.buf[len(f.buf)-keep:], frameStart); j >= 0 {
					keep -= j
				} else {
					keep = 0
				}
			}
			if n := len(f.buf) - keep; n > 0 {
				emit(event{raw: bytes.Clone(f.buf[:n])})
				f.buf = f.buf[n:]
			}
			break
		}
		if i > 0 {
			emit(event{raw: bytes.Clone(f.buf[:i])})
			f.buf = f.buf[i:]
		}
		n, kind, ok := f.header()
		if !ok {
			if len(f.buf) < frameHeader && !eof {
				break // wait for the rest of the header
			}
			emit(event{raw: []byte{f.buf[0]}})
			f.buf = f.buf[1:]
			continue
		}
		// A real payload is JSON, which never holds the start byte (it
		// is escaped): a start byte inside means this header is fake,
		// and waiting for its length would swallow the real frame.
		if bytes.IndexByte(f.buf[frameHeader:min(len(f.buf), frameHeader+n)], frameStart) >= 0 {
			emit(event{raw: []byte{f.buf[0]}})
			f.buf = f.buf[1:]
			continue
		}
		if len(f.buf) < frameHeader+n+1 {
			if eof {
				emit(event{raw: bytes.Clone(f.buf)})
				f.buf = f.buf[:0]
			}
			break
		}
		if f.buf[frameHeader+n] != frameEnd {
			emit(event{raw: []byte{f.buf[0]}})
			f.buf = f.buf[1:]
			continue
		}
		payload := f.buf[frameHeader : frameHeader+n]
		if len(f.msg)+len(payload) > maxMessageBytes {
			f.dropped = true
			f.msg = f.msg[:0]
		} else if !f.dropped {
			f.msg = append(f.msg, payload...)
		}
		f.buf = f.buf[frameHeader+n+1:]
		if kind == 'E' {
			if f.dropped {
				emit(event{oversize: true})
			} else {
				emit(event{msg: append([]byte{}, f.msg...)})
			}
			f.msg, f.dropped = f.msg[:0], false
		}
	}
	if eof {
		emit(event{eof: true})
	}
	// Do not let a huge buffer linger after a flood.
	if cap(f.buf) > 4*readChunk && len(f.buf) < readChunk {
		f.buf = bytes.Clone(f.buf)
	}
}

// header parses the frame header at the start of buf.
func (f *frameParser) header() (n int, kind byte, ok bool) {
	if len(f.buf) < frameHeader {
		return 0, 0, false
	}
	kind = f.buf[len(f.start)]
	if kind != 'C' && kind != 'E' {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(string(f.buf[len(f.start)+1:frameHeader]), 16, 16)
	if err != nil || int(v) > maxFramePayload {
		return 0, 0, false
	}
	return int(v), kind, true
}

// readFrames reads r until EOF and sends its events to ch; it closes
// nothing. done stops it early (the session is gone).
func readFrames(r io.Reader, nonce string, ch chan<- event, done <-chan struct{}) {
	p := newFrameParser(nonce)
	buf := make([]byte, readChunk)
	send := func(e event) {
		select {
		case ch <- e:
		case <-done:
		}
	}
	for {
		n, err := r.Read(buf)
		p.feed(buf[:n], err != nil, send)
		if err != nil {
			return
		}
	}
}
