package archive

import (
	"errors"
	"io"
	"os"
	"sync"
)

// Stream is an archive read from a pipe while its packing runs elsewhere
// (the init packs into the pipe's other end). Read to EOF: a failure of
// the packing surfaces as the error of the last Read (the stream is then
// partial and must be abandoned). Close ends the packing early.
type Stream struct {
	r    *os.File
	done chan struct{}
	res  Result
	err  error

	once sync.Once
}

// NewStream reads the pack from r; the packing calls finish once, with
// its outcome, after it closed the pipe's other end.
func NewStream(r *os.File) (s *Stream, finish func(Result, error)) {
	s = &Stream{r: r, done: make(chan struct{})}
	return s, func(res Result, err error) {
		s.res, s.err = res, err
		close(s.done)
	}
}

func (s *Stream) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if errors.Is(err, io.EOF) {
		<-s.done
		if s.err != nil {
			return n, s.err
		}
	}
	return n, err
}

// Close stops reading; the packer's next write fails and the packing ends.
func (s *Stream) Close() error {
	s.once.Do(func() {
		_ = s.r.Close()
		<-s.done
	})
	return nil
}

// Result is what the packing emitted, once Read returned EOF.
func (s *Stream) Result() Result {
	<-s.done
	return s.res
}
