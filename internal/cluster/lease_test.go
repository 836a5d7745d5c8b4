package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// fakeLease fails its renewals with errs, in order, then succeeds.
type fakeLease struct {
	errs    []error
	renewed atomic.Int64
}

func (f *fakeLease) Renew(context.Context) error {
	n := f.renewed.Add(1)
	if int(n) <= len(f.errs) {
		return f.errs[n-1]
	}
	return nil
}

func (f *fakeLease) Release(context.Context) error { return nil }

// TestKeepLeaseStopsOnlyWhenTheNameIsLost: a store out of reach is
// retried; another server having taken the name ends the keeper with a
// call of lost.
func TestKeepLeaseStopsOnlyWhenTheNameIsLost(t *testing.T) {
	l := &fakeLease{errs: []error{errors.New("connection refused"), store.ErrNodeLost}}
	lost := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		KeepLease(context.Background(), l, slog.New(slog.DiscardHandler), func(err error) { lost <- err })
	}()
	select {
	case err := <-lost:
		if !errors.Is(err, store.ErrNodeLost) || l.renewed.Load() != 2 {
			t.Fatalf("lost after %d renewals with %v, want after 2 with ErrNodeLost", l.renewed.Load(), err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the keeper never reported the lost name")
	}
	<-done

	// Renewals that succeed never call lost; the keeper ends with ctx.
	ok := &fakeLease{}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() {
		defer close(done)
		KeepLease(ctx, ok, slog.New(slog.DiscardHandler), func(error) { t.Error("lost called for a held name") })
	}()
	deadline := time.Now().Add(time.Minute)
	for ok.renewed.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the keeper never renewed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}
