package snapkeep

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestMakeForks: at most parallel forks run at once; the first failure is
// the answer (not the cancellations it led to) and the forks after it do
// not start.
func TestMakeForks(t *testing.T) {
	var mu sync.Mutex
	running, most, made, started := 0, 0, 0, 0
	// one fails the fail-th fork to start (from 1; 0: none).
	one := func(fail int) func(context.Context, int) error {
		return func(context.Context, int) error {
			mu.Lock()
			running++
			started++
			nth := started
			most = max(most, running)
			mu.Unlock()
			defer func() {
				mu.Lock()
				running--
				mu.Unlock()
			}()
			if nth == fail {
				return errors.New("refused")
			}
			mu.Lock()
			made++
			mu.Unlock()
			return nil
		}
	}
	if err := MakeForks(context.Background(), 8, 2, one(0)); err != nil || made != 8 || most > 2 {
		t.Fatalf("MakeForks: %v, made %d, at most %d at once", err, made, most)
	}
	made, started = 0, 0
	// One at a time: the fourth to start fails, so three were made and
	// none starts after it.
	err := MakeForks(context.Background(), 8, 1, one(4))
	if err == nil || err.Error() != "refused" {
		t.Fatalf("the failed fork's error: %v", err)
	}
	if made != 3 || started != 4 {
		t.Errorf("%d forks made, %d started; the failure of the fourth stops the rest", made, started)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := MakeForks(ctx, 3, 1, one(0)); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled fork: %v", err)
	}
}
