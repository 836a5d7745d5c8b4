package sandbox

import (
	"context"
	"runtime"
	"sync"
	"testing"
)

// promised is what the server has promised to the sandboxes that exist
// (listed and waiting in the pool), read under both locks at once.
func promised(m *Manager) int64 {
	var n int64
	m.pool.Each(func(ready []*Sandbox) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, s := range m.sandboxes {
			n += s.diskBytes()
		}
		for _, s := range ready {
			n += s.diskBytes()
		}
	})
	return n
}

// TestPoolTakeStaysInTheBudget is row 5 of issue 29: pool.take dropped a
// sandbox from the pool's count before create listed it, so the refill it
// woke found room that was not there (30 GB promised on a 25 GB budget).
// Here the create waits, between its take and its listing, for the
// refill's attempt to end; the budget holds two sandboxes, one listed and
// one in the pool, so the refill must be refused.
func TestPoolTakeStaysInTheBudget(t *testing.T) {
	cfg := testConfig(t)
	cfg.WarmPool = 1
	cfg.DiskBudget, cfg.DiskOvercommit = 2*cfg.Default.DiskBytes, 1
	refilled := make(chan error, 16)
	refillHook = func(err error) { refilled <- err }
	t.Cleanup(func() { refillHook = func(error) {} })
	m := newManager(t, cfg, nil)
	if err := <-refilled; err != nil {
		t.Fatalf("first fill: %v", err)
	}
	create(t, m, Spec{}) // from the pool; the refill puts one back
	if err := <-refilled; err != nil {
		t.Fatalf("refill after the first create: %v", err)
	}
	if p := promised(m); p != cfg.DiskBudget {
		t.Fatalf("promised %d, want the whole budget %d", p, cfg.DiskBudget)
	}
	// The second create takes the pool's sandbox; before it is listed,
	// the refill its take woke tries.
	var refillErr error
	takenHook = func() { refillErr = <-refilled }
	t.Cleanup(func() { takenHook = func() {} })
	create(t, m, Spec{})
	if refillErr == nil {
		t.Fatal("the refill found room for a third sandbox while the second was being handed out")
	}
	if p := promised(m); p > cfg.DiskBudget {
		t.Fatalf("promised %d on a budget of %d", p, cfg.DiskBudget)
	}
	if c := m.DiskCommitted(); c != promised(m) {
		t.Fatalf("counted %d, promised %d", c, promised(m))
	}
}

// TestCreatesRacingTheRefillStayInTheBudget: creates from several
// goroutines race the pool's refill; at no moment is more promised than
// the budget, and what is counted is what exists.
func TestCreatesRacingTheRefillStayInTheBudget(t *testing.T) {
	cfg := testConfig(t)
	cfg.WarmPool = 2
	cfg.DiskBudget, cfg.DiskOvercommit = 4*cfg.Default.DiskBytes, 1
	m := newManager(t, cfg, nil)
	for round := range 3 {
		stop := make(chan struct{})
		over := make(chan int64, 1)
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if p := promised(m); p > cfg.DiskBudget {
					over <- p
					return
				}
				runtime.Gosched()
			}
		}()
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = m.Create(context.Background(), owner, Spec{}) // refusals are expected
			}()
		}
		wg.Wait()
		close(stop)
		select {
		case p := <-over:
			t.Fatalf("round %d: promised %d on a budget of %d", round, p, cfg.DiskBudget)
		default:
		}
		if p := promised(m); p > cfg.DiskBudget {
			t.Fatalf("round %d: promised %d on a budget of %d", round, p, cfg.DiskBudget)
		}
		for _, in := range m.List(owner) {
			if err := m.Delete(context.Background(), owner, in.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}
