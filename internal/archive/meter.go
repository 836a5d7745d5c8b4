package archive

import (
	"archive/zip"
	"context"
	"errors"
	"io"
	"math"
)

// budget is the byte accounting of one pass.
type budget struct {
	lim      Limits
	srcSize  int64        // compressed size of the whole archive
	total    int64        // actual bytes produced so far
	consumed func() int64 // tar family: raw archive bytes consumed so far
}

// allowance is floor + compressed*ratio, saturating.
func (b *budget) allowance(compressed int64) int64 {
	r := int64(b.lim.MaxRatio)
	if compressed > 0 && r > 0 && compressed > (math.MaxInt64-b.lim.RatioFloor)/r {
		return math.MaxInt64
	}
	return b.lim.RatioFloor + compressed*r
}

// meter wraps one entry's body and enforces, on every Read, the size claim,
// the entry and total caps and both ratios. Bytes beyond a cap are never
// returned to the caller, so they are never written.
type meter struct {
	ctx      context.Context
	r        io.Reader
	b        *budget
	raw      string
	claim    int64
	n        int64
	csize    int64 // compressed size of this entry when known (zip), else -1
	rawStart int64 // tar family: raw bytes consumed when the entry began
}

func (m *meter) Read(p []byte) (int, error) {
	if err := m.ctx.Err(); err != nil {
		return 0, &Error{Entry: m.raw, Kind: KindCanceled, Reason: ReasonCanceled, Err: err}
	}
	n, err := m.r.Read(p)
	m.n += int64(n)
	m.b.total += int64(n)
	if e := m.check(); e != nil {
		return 0, e
	}
	switch {
	case err == io.EOF:
		if m.n != m.claim {
			return 0, refuse(m.raw, KindInvalid, ReasonSizeMismatch, "entry is shorter than its header says")
		}
		return n, io.EOF
	case err != nil:
		return 0, readError(m.raw, err)
	}
	return n, nil
}

func (m *meter) check() *Error {
	l := m.b.lim
	switch {
	case m.n > m.claim:
		return refuse(m.raw, KindInvalid, ReasonSizeMismatch, "entry is longer than its header says")
	case m.n > l.MaxEntryBytes:
		return refuse(m.raw, KindTooLarge, ReasonEntryTooLarge, "")
	case m.b.total > l.MaxTotalBytes:
		return refuse(m.raw, KindTooLarge, ReasonTotalTooLarge, "")
	case m.b.total > m.b.allowance(m.b.srcSize):
		return refuse(m.raw, KindTooLarge, ReasonRatio, "archive decompresses beyond the ratio cap")
	}
	c := m.csize
	if c < 0 && m.b.consumed != nil {
		c = m.b.consumed() - m.rawStart
	}
	if c >= 0 && m.n > m.b.allowance(c) {
		return refuse(m.raw, KindTooLarge, ReasonRatio, "entry decompresses beyond the ratio cap")
	}
	return nil
}

// readError names what a decoder's error means.
func readError(raw string, err error) error {
	var ae *Error
	switch {
	case errors.As(err, &ae):
		return err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Entry: raw, Kind: KindInvalid, Reason: ReasonSizeMismatch, Detail: "archive data ends early", Err: err}
	case errors.Is(err, zip.ErrFormat):
		// archive/zip reports data longer than the central directory claims so.
		return &Error{Entry: raw, Kind: KindInvalid, Reason: ReasonSizeMismatch, Detail: "entry data disagrees with its header", Err: err}
	case errors.Is(err, errChecksum):
		return &Error{Entry: raw, Kind: KindInvalid, Reason: ReasonChecksum, Err: err}
	}
	return &Error{Entry: raw, Kind: KindInvalid, Reason: ReasonCorrupt, Detail: safeDetail(err), Err: err}
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// ctxReader checks the context on every Read (Pack's copies).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// streamGuard sits between a tar stream's decompressor and archive/tar. It
// caps the whole decompressed stream (headers, PAX records, padding and
// content, which archive/tar partly consumes without the meter seeing it)
// at the overall ratio allowance, and checks the context on every read, so
// a run of a million PAX headers inside one Next call is still bounded and
// cancellable.
type streamGuard struct {
	ctx  context.Context
	r    io.Reader
	b    *budget
	n    int64
	last *string // name of the last header, for errors
}

func (g *streamGuard) Read(p []byte) (int, error) {
	if err := g.ctx.Err(); err != nil {
		return 0, &Error{Entry: *g.last, Kind: KindCanceled, Reason: ReasonCanceled, Err: err}
	}
	n, err := g.r.Read(p)
	g.n += int64(n)
	if g.n > g.b.allowance(g.b.srcSize) {
		return 0, refuse(*g.last, KindTooLarge, ReasonRatio, "archive stream decompresses beyond the ratio cap")
	}
	return n, err
}
