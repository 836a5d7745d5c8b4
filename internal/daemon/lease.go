package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/cluster"
	"github.com/sandhold/sandhold/internal/store"
)

// releaseTimeout bounds giving the node's lease up at a stop.
const releaseTimeout = 5 * time.Second

// nodeLoss is closed when another server took this node's name (Run then
// stops, as on a signal, and returns the reason).
type nodeLoss struct {
	once sync.Once
	ch   chan struct{}
	err  error
}

func (n *nodeLoss) lose(err error) {
	n.once.Do(func() { n.err = err; close(n.ch) })
}

// holdNode takes this server's node (store.Store.HoldNode: the data dir,
// and in a cluster the node name) before anything touches a sandbox
// record, and keeps it until Close. Another live server holding it is a
// refusal to start that says who.
func (d *Daemon) holdNode(ctx context.Context) error {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("node lease: %w", err)
	}
	host, _ := os.Hostname()
	h := store.Holder{ID: hex.EncodeToString(raw[:]), Host: host, PID: os.Getpid(), Started: time.Now().UTC()}
	lease, err := d.store.HoldNode(ctx, h, cluster.LeaseTTL)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	d.lost = &nodeLoss{ch: make(chan struct{})}
	kctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cluster.KeepLease(kctx, lease, d.log, func(err error) {
			d.log.Error("another server took this node's name while this one could not renew its lease: stopping", "err", err)
			d.lost.lose(err)
		})
	}()
	d.closers = append(d.closers, func() error {
		cancel()
		<-done
		rctx, rcancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer rcancel()
		return lease.Release(rctx)
	})
	return nil
}

// untilLost is ctx, also cancelled when the node is lost; err says why.
func (d *Daemon) untilLost(ctx context.Context) (context.Context, func(), func() error) {
	if d.lost == nil {
		return ctx, func() {}, func() error { return nil }
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := make(chan struct{})
	go func() {
		select {
		case <-d.lost.ch:
			cancel()
		case <-stop:
		}
	}()
	return ctx, func() { close(stop); cancel() }, func() error {
		select {
		case <-d.lost.ch:
			return fmt.Errorf("stopped: %w", d.lost.err)
		default:
			return nil
		}
	}
}
