// Package outbuf holds what the server keeps of a running command: its
// output streams with bounded memory, and its status.
//
// A command may print 10 GB; the server keeps at most a fixed number of
// bytes of each stream — the first half and the last half of the cap — and
// counts the rest, so memory stays bounded whatever the command does while
// readers still see the beginning, the end and where bytes were dropped.
// A Budget bounds the bytes of all streams together, per key and in all.
package outbuf

import (
	"fmt"
	"sync"

	"github.com/sandhold/sandhold/internal/fault"
)

// minGrow is the smallest buffer an Output allocates: most streams are a
// few lines.
const minGrow = 512

// Output is one captured stream (stdout or stderr). It is an io.Writer;
// readers read by byte offset into the whole stream and can wait for more.
type Output struct {
	// budget and ent charge the buffers to a Budget; nil: unbudgeted.
	budget *Budget
	ent    *entry

	// mu guards everything below.
	mu sync.Mutex
	// headCap and tailCap are the bytes kept from the start and the end;
	// a budget that cannot give more lowers them to what is held.
	headCap int
	tailCap int
	head    []byte // the first headCap bytes
	tail    []byte // ring of the last tailCap bytes after head
	tailPos int    // next write position in tail once it is full
	total   int64  // bytes written in all
	closed  bool
	// evicted: a Budget took the bytes of this finished stream.
	evicted bool
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

// grow returns buf with room for want bytes (capacity at most limit),
// charging the budget for the new capacity; with less budget it returns
// what could be had, maybe buf itself. Callers hold mu.
func (o *Output) grow(buf []byte, want, limit int) []byte {
	if cap(buf) >= want {
		return buf
	}
	n := min(max(want, 2*cap(buf), minGrow), limit)
	if o.budget != nil {
		n = cap(buf) + int(o.budget.reserve(o.ent, int64(n-cap(buf))))
		if n <= cap(buf) {
			return buf
		}
	}
	nb := make([]byte, len(buf), n)
	copy(nb, buf)
	return nb
}

// Write records p. It never fails, so a command's output is always drained.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	o.total += int64(n)
	if room := o.headCap - len(o.head); room > 0 && len(p) > 0 {
		k := min(room, len(p))
		o.head = o.grow(o.head, len(o.head)+k, o.headCap)
		if cap(o.head) < len(o.head)+k {
			// The budget gave less: the head ends here, and gives half
			// of what it holds to the ring, so the latest bytes are
			// kept too.
			k = 0
			o.squeezeHead()
		}
		o.head = append(o.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 && len(o.tail) < o.tailCap {
		o.tail = o.grow(o.tail, min(len(o.tail)+len(p), o.tailCap), o.tailCap)
		if cap(o.tail) < o.tailCap && cap(o.tail) < len(o.tail)+len(p) {
			// The budget gave less: the ring is what is held.
			o.tailCap = cap(o.tail)
		}
	}
	for len(p) > 0 && o.tailCap > 0 {
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

// squeezeHead ends the head at half of what it holds and gives the rest
// of its capacity back to the budget, for the ring. Callers hold mu.
func (o *Output) squeezeHead() {
	keep := len(o.head) / 2
	freed := cap(o.head) - keep
	o.head = trim(o.head[:keep])
	o.headCap = keep
	o.budget.unreserve(o.ent, int64(freed))
}

// Close marks the stream complete and wakes waiting readers. A budgeted
// stream gives back the capacity it does not use and may be evicted from
// now on.
func (o *Output) Close() {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.closed = true
	o.notify()
	var freed int
	if o.budget != nil {
		freed = cap(o.head) - len(o.head) + cap(o.tail) - len(o.tail)
		o.head = trim(o.head)
		o.tail = trim(o.tail)
	}
	o.mu.Unlock()
	if o.budget != nil {
		o.budget.finish(o.ent, int64(freed))
	}
}

// trim returns buf without spare capacity.
func trim(buf []byte) []byte {
	if cap(buf) == len(buf) {
		return buf
	}
	if len(buf) == 0 {
		return nil
	}
	return append([]byte(nil), buf...)
}

// Release gives a budgeted stream's bytes back to its Budget at once (its
// owner is done with it); it keeps them readable. Without it they go back
// when the garbage collector takes the Output.
func (o *Output) Release() {
	if o.budget != nil {
		o.budget.release(o.ent)
	}
}

// drop empties an evicted stream (Budget.evictLocked).
func (o *Output) drop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.head, o.tail, o.tailPos = nil, nil, 0
	o.evicted = true
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

// Evicted reports whether a Budget took the kept bytes of this finished
// stream: none of it can be read any more.
func (o *Output) Evicted() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.evicted
}

// Gone answers a read of this stream (name, of command id) from offset
// off: a gone fault (410) when the bytes asked for were evicted by a
// Budget, else nil. An offset at or past the stream's end asks for
// nothing it lost.
func (o *Output) Gone(name, id string, off int64) error {
	if total := o.Total(); o.Evicted() && off < total {
		return fault.Errorf(fault.Gone, "the %s of command %s is no longer kept: the server's output budget evicted it (%d bytes) to make room for newer output; "+
			"read output while the command runs or soon after it ends", name, id, total)
	}
	return nil
}

// Truncated reports whether bytes were dropped.
func (o *Output) Truncated() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.evicted || o.total > int64(len(o.head)+len(o.tail))
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

// EvictedText is what Text returns for an evicted stream.
const EvictedText = "[output evicted: the server's output budget needed the room]"

// Text returns the kept output with a marker where the middle was dropped,
// and whether anything was dropped.
func (o *Output) Text() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.evicted {
		return EvictedText, true
	}
	dropped := o.total - int64(len(o.head)+len(o.tail))
	if dropped <= 0 {
		return string(o.head) + string(o.tailBytes()), false
	}
	return fmt.Sprintf("%s\n... [%d bytes truncated] ...\n%s", o.head, dropped, o.tailBytes()), true
}

// ReadAt returns up to max bytes of the stream from offset, the offset to
// read from next, and how many bytes before the returned data were dropped
// (the caller asked for bytes that are no longer kept). It does not block.
// An evicted stream returns nothing from any offset before its end (see
// Evicted).
func (o *Output) ReadAt(offset int64, max int) (data []byte, next int64, dropped int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if offset < 0 {
		offset = 0
	}
	if offset >= o.total || max <= 0 || o.evicted {
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
