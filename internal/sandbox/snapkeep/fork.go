package snapkeep

import (
	"context"
	"errors"
	"sync"
)

// MakeForks runs one for forks 0 … n-1, at most parallel at once (the
// copies and init starts share the host's cores and disk). The first
// failure cancels the forks not started yet and is returned — the cause,
// not the cancellations it led to; the caller undoes the forks made.
func MakeForks(ctx context.Context, n, parallel int, one func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			if errs[i] = one(ctx, i); errs[i] != nil {
				cancel() // the rest do not start
			}
		}()
	}
	wg.Wait()
	// The cause, not the cancellations it led to.
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	return first
}
