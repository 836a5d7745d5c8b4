// Package process holds what the server keeps of a running command: its
// output streams with bounded memory, and its status.
//
// A command may print 10 GB; the server keeps at most a fixed number of
// bytes of each stream — the first half and the last half of the cap — and
// counts the rest, so memory stays bounded whatever the command does while
// readers still see the beginning, the end and where bytes were dropped.
package process

import (
	"fmt"
	"sync"
)

// Output is one captured stream (stdout or stderr). It is an io.Writer;
// readers read by byte offset into the whole stream and can wait for more.
type Output struct {
	headCap int
	tailCap int

	// mu guards everything below.
	mu      sync.Mutex
	head    []byte // the first headCap bytes
	tail    []byte // ring of the last tailCap bytes after head
	tailPos int    // next write position in tail once it is full
	total   int64  // bytes written in all
	closed  bool
	changed chan struct{} // closed and replaced on every write and on Close
}

// NewOutput keeps at most limit bytes: limit/2 from the start and the rest
// from the end. limit must be positive.
func NewOutput(limit int) *Output {
	if limit < 2 {
		limit = 2
	}
	h := limit / 2
	return &Output{headCap: h, tailCap: limit - h, changed: make(chan struct{})}
}

// Write records p. It never fails, so a command's output is always drained.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	o.total += int64(n)
	if room := o.headCap - len(o.head); room > 0 {
		k := min(room, len(p))
		o.head = append(o.head, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		if len(o.tail) < o.tailCap {
			k := min(o.tailCap-len(o.tail), len(p))
			o.tail = append(o.tail, p[:k]...)
			p = p[k:]
			continue
		}
		// Only the last tailCap bytes of p can survive.
		if len(p) > o.tailCap {
			p = p[len(p)-o.tailCap:]
		}
		k := copy(o.tail[o.tailPos:], p)
		o.tailPos = (o.tailPos + k) % o.tailCap
		p = p[k:]
	}
	o.notify()
	return n, nil
}

// Close marks the stream complete and wakes waiting readers.
func (o *Output) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.notify()
}

func (o *Output) notify() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// Total is the number of bytes the stream has produced.
func (o *Output) Total() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// Truncated reports whether bytes were dropped.
func (o *Output) Truncated() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total > int64(o.headCap+o.tailCap)
}

// tailBytes returns the ring in order. Callers hold mu.
func (o *Output) tailBytes() []byte {
	if len(o.tail) < o.tailCap || o.tailPos == 0 {
		return append([]byte(nil), o.tail...)
	}
	out := make([]byte, 0, o.tailCap)
	out = append(out, o.tail[o.tailPos:]...)
	return append(out, o.tail[:o.tailPos]...)
}

// Text returns the kept output with a marker where the middle was dropped,
// and whether anything was dropped.
func (o *Output) Text() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	dropped := o.total - int64(len(o.head)+len(o.tail))
	if dropped <= 0 {
		return string(o.head) + string(o.tailBytes()), false
	}
	return fmt.Sprintf("%s\n... [%d bytes truncated] ...\n%s", o.head, dropped, o.tailBytes()), true
}

// ReadAt returns up to max bytes of the stream from offset, the offset to
// read from next, and how many bytes before the returned data were dropped
// (the caller asked for bytes that are no longer kept). It does not block.
func (o *Output) ReadAt(offset int64, max int) (data []byte, next int64, dropped int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if offset < 0 {
		offset = 0
	}
	if offset >= o.total || max <= 0 {
		return nil, max64(offset, 0), 0
	}
	headLen := int64(len(o.head))
	if offset < headLen {
		end := min(headLen, offset+int64(max))
		return append([]byte(nil), o.head[offset:end]...), end, 0
	}
	tail := o.tailBytes()
	tailStart := o.total - int64(len(tail))
	if offset < tailStart {
		dropped = tailStart - offset
		offset = tailStart
	}
	from := offset - tailStart
	end := min(int64(len(tail)), from+int64(max))
	return tail[from:end], tailStart + end, dropped
}

// Wait returns a channel closed at the next write or at Close, and whether
// the stream is already closed.
func (o *Output) Wait() (<-chan struct{}, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed, o.closed
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
