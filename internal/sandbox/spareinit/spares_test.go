package spareinit

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestTakeCountsWhatFoundNone: a take that finds no spare ready counts as
// missed where spares are kept, and as nothing where none are; a failed
// clone frees nothing it did not get and ends with Close.
func TestTakeCountsWhatFoundNone(t *testing.T) {
	for _, want := range []int{0, 1} {
		stop := make(chan struct{})
		allocs := make(chan struct{}, 1)
		p := New(Config{
			Want: want,
			Alloc: func() (int, error) {
				select {
				case allocs <- struct{}{}:
				default:
				}
				return 0, errors.New("no host id range free")
			},
			Free:  func(int) { t.Error("freed a slot that was never allocated") },
			Retry: time.Hour, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Stop: stop,
		})
		if want > 0 {
			<-allocs // the filler tried, and failed
		}
		if _, ok := p.Take(); ok {
			t.Fatalf("want %d: took a spare that was never cloned", want)
		}
		if st := p.Status(); st != (Status{Target: want, Missed: int64(want)}) {
			t.Fatalf("want %d: status %+v", want, st)
		}
		close(stop)
		p.Close()
	}
}
