package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
)

// Sealing. Where the store's file system shares blocks with the image
// (XFS with reflink, btrfs), Capture answers once one clone of the whole
// image and a manifest that reads sealing are durable:
//
//	<dir>/chunks/<owner>/sealing/<id>.img   the clone, until it is sealed
//
// The seal — chunking the clone and hashing every byte, the chunks cloned
// from it, the manifest rewritten with its chunks and digest — runs after
// the answer, on a goroutine of the store. The clone never changes, so
// what the seal hashes is exactly what was captured; until the seal ends
// a restore (a fork on this node) clones the clone back, and whatever
// needs the digest (an export) waits for it (WaitSealed).
//
// Nothing is lost on a crash: the clone is durable before its manifest is
// written, so a manifest that reads sealing has a whole clone, and
// Recover (at the server's start) seals it again; a manifest whose clone
// is missing or of the wrong size is removed. A seal that fails while the
// server runs is tried again after a backoff (1 s, doubling, at most 5
// min) until it seals, its snapshot is deleted or the store closes. On a
// store the nodes of a cluster share, one process seals a snapshot: the
// seal holds an exclusive flock of the clone (claimClone), and a node that
// finds it held (both recovering it at their start, or one recovering
// what another has just captured) waits, and ends without sealing or
// telling once the snapshot is sealed — or seals it if the holder lets go
// without sealing it (a node that dies lets its locks go). A clone left without a
// manifest (a crash between the two) goes with Recover once it is older
// than an hour (on a shared directory, another node may be between the
// two right then). Deleting a sealing snapshot cancels its seal.

// StateSealing is a manifest's State until its digest exists.
const StateSealing = "sealing"

// sealWait bounds how long WaitSealed waits for a seal that runs on
// another node (a shared store): far above a seal of the largest image.
const sealWait = 10 * time.Minute

// sealPoll is how often a seal on another node is looked for.
const sealPoll = 100 * time.Millisecond

// orphanCloneAge is how old a clone without a sealing manifest is before
// Recover removes it: on a shared store another node may be between
// writing the clone and its manifest.
const orphanCloneAge = time.Hour

// Sealing tells whether m is not sealed yet: no chunks, no digest.
func (m *Manifest) Sealing() bool { return m.State == StateSealing }

func (s *Store) sealingPath(owner, id string) string {
	return filepath.Join(s.ownerDir(owner), "sealing", id+".img")
}

// sealer runs a store's seals.
type sealer struct {
	mu     sync.Mutex
	seals  map[string]*sealRun
	onSeal func(*Manifest, error)
	wg     sync.WaitGroup
}

// sealRun is one seal under way (one attempt, or the wait before the
// next).
type sealRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error         // set before done closes
	ended  chan struct{} // closed when the last attempt of the seal has ended
	// failed is the last attempt's error while the next waits for its
	// backoff (guarded by the store's mu).
	failed error
}

// sealHook sees each seal start, before it reads the clone: a test's
// window into a snapshot that is sealing, and its way to fail a seal;
// none when nil. Tests swap it while seals (an earlier test's, on their
// own goroutines) may read it, so it is set and read atomically
// (setSealHook, runSealHook).
var sealHook atomic.Pointer[func(context.Context, string) error]

// setSealHook sets sealHook; nil removes it.
func setSealHook(fn func(context.Context, string) error) {
	if fn == nil {
		sealHook.Store(nil)
		return
	}
	sealHook.Store(&fn)
}

// runSealHook calls sealHook, if one is set.
func runSealHook(ctx context.Context, id string) error {
	if fn := sealHook.Load(); fn != nil {
		return (*fn)(ctx, id)
	}
	return nil
}

// HoldSeals keeps every seal of this process from reading its clone until
// release is called (or the seal is cancelled), and restore puts the hook
// back: other packages' tests' window into a snapshot that stays sealing.
// The server never calls it.
func HoldSeals() (release, restore func()) {
	gate := make(chan struct{})
	setSealHook(func(ctx context.Context, _ string) error {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return nil
	})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	return release, func() {
		release()
		setSealHook(nil)
	}
}

// OnSealed sets what is told of each seal that ends, with the sealed
// manifest (and nil) or the sealing one and why it failed. A seal
// cancelled (its snapshot deleted, the store closed) is not told.
func (s *Store) OnSealed(fn func(*Manifest, error)) {
	s.mu.Lock()
	s.onSeal = fn
	s.mu.Unlock()
}

// startSeal seals m on a goroutine of the store, unless a seal of it runs.
// A seal that fails is told, ends its run (a WaitSealed meanwhile answers
// its error) and runs again after a backoff (sealBackoff) while the
// server runs, until it seals, its snapshot goes or the store closes; a
// run is in s.seals the whole time, so Delete and Close cancel the wait
// as they cancel a seal.
//
// One process seals a snapshot: the run first claims its clone's lock
// (claimClone) and holds it to the end. A run that finds it held — a node
// sharing the store seals it — waits (polling every sealPoll) and ends
// without a word once the snapshot is sealed there, or seals it itself
// if that node lets go without sealing it (it died, or closed its store).
func (s *Store) startSeal(m *Manifest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seals == nil {
		s.seals = make(map[string]*sealRun)
	}
	if _, ok := s.seals[m.ID]; ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	run := &sealRun{cancel: cancel, done: make(chan struct{}), ended: ended}
	s.seals[m.ID] = run
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(ended)
		defer cancel()
		var claim *os.File
		defer func() {
			if claim != nil {
				_ = claim.Close() // lets the lock go
			}
		}()
		end := func(err error) {
			run.err = err
			s.mu.Lock()
			delete(s.seals, m.ID)
			close(run.done)
			s.mu.Unlock()
		}
		for failed := 0; ; {
			var sealed *Manifest
			var err error
			if claim == nil {
				claim, err = s.claimClone(m)
				if errors.Is(err, errSealBusy) {
					if !sleepCtx(ctx, sealPoll) {
						end(ctx.Err())
						return
					}
					continue
				}
				if err == nil {
					// Nothing left to seal — the clone gone, or (the lock
					// taken after the node that held it sealed it) the
					// manifest sealed: that node told it.
					var cur *Manifest
					if claim != nil {
						cur, err = s.read(m.ID)
					}
					if claim == nil || err != nil || !cur.Sealing() {
						if errors.Is(err, ErrNotFound) {
							err = nil
						}
						end(err)
						return
					}
				}
			}
			if err == nil {
				sealed, err = s.seal(ctx, m.Owner, m.ID)
			}
			s.mu.Lock()
			fn := s.onSeal
			s.mu.Unlock()
			if fn != nil && ctx.Err() == nil && !errors.Is(err, ErrNotFound) {
				if sealed == nil {
					sealed = m
				}
				fn(sealed, err)
			}
			retry := err != nil && ctx.Err() == nil && !errors.Is(err, ErrNotFound)
			if !retry {
				end(err)
				return
			}
			run.err = err
			s.mu.Lock()
			next := &sealRun{cancel: cancel, done: make(chan struct{}), ended: ended, failed: err}
			s.seals[m.ID] = next
			close(run.done)
			run = next
			s.mu.Unlock()
			if !sleepCtx(ctx, sealBackoff(failed)) {
				end(ctx.Err())
				return
			}
			failed++
			s.mu.Lock()
			run.failed = nil
			s.mu.Unlock()
		}
	}()
}

// sleepCtx waits d, or less if ctx ends first (then false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sealBackoff is the wait before a failed seal runs again, after failed
// earlier failures: from sealRetryMin, doubling, at most sealRetryMax.
var sealBackoff = func(failed int) time.Duration {
	return min(sealRetryMin<<min(failed, 16), sealRetryMax)
}

// sealRetryMin and sealRetryMax bound the backoff of a failed seal: a
// cause that passes (a full disk freed, an I/O error of the moment) is
// sealed again within seconds, one that stays costs a read every few
// minutes.
const (
	sealRetryMin = time.Second
	sealRetryMax = 5 * time.Minute
)

// seal makes snapshot id's chunks and digest from its clone and removes
// the clone. One deleted meanwhile is ErrNotFound; one sealed already is
// returned as it is.
func (s *Store) seal(ctx context.Context, owner, id string) (*Manifest, error) {
	if err := runSealHook(ctx, id); err != nil {
		return nil, fmt.Errorf("seal snapshot %s: %w", id, err)
	}
	lk, err := s.lockOwner(owner, false)
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	m, err := s.read(id)
	if err != nil {
		return nil, err
	}
	if !m.Sealing() {
		return m, nil
	}
	clone := s.sealingPath(m.Owner, m.ID)
	f, err := os.Open(clone) //nolint:gosec // G304: the store's own clone
	if err != nil {
		return nil, fmt.Errorf("seal snapshot %s: %w", id, err)
	}
	defer func() { _ = f.Close() }()
	if err := s.chunkImage(ctx, f, m.ImageSize, m); err != nil {
		return nil, fmt.Errorf("seal snapshot %s: %w", id, err)
	}
	m.State = ""
	if err := s.finish(m); err != nil {
		return nil, fmt.Errorf("seal snapshot %s: %w", id, err)
	}
	// Sealed and durable: the clone's blocks live on in the chunks.
	_ = os.Remove(clone)
	_ = syncDir(filepath.Dir(clone))
	return m, nil
}

// cancelSeal ends the seal of id under way here, if any (or its wait to
// run again), and waits for it.
func (s *Store) cancelSeal(id string) {
	s.mu.Lock()
	run := s.seals[id]
	s.mu.Unlock()
	if run != nil {
		run.cancel()
		<-run.ended // no attempt after this one, nor one under way
	}
}

// Close ends the seals under way and waits for them; their snapshots stay
// sealing, and the next Recover seals them again. The store stays usable.
func (s *Store) Close() {
	s.mu.Lock()
	for _, run := range s.seals {
		run.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// errSealWait: a seal on another node did not end in time.
var errSealWait = fault.New(fault.Unavailable, "the snapshot's digest is still being computed; try again later")

// WaitSealed returns m once it is sealed (at once when it is), waiting for
// its seal — at most sealWait, and no longer than ctx.
func (s *Store) WaitSealed(ctx context.Context, m *Manifest) (*Manifest, error) {
	if !m.Sealing() {
		return m, nil
	}
	deadline := time.Now().Add(sealWait)
	for {
		s.mu.Lock()
		run := s.seals[m.ID]
		var failed error
		if run != nil && run.failed != nil {
			// Failed, and waiting to run again: its failure is the answer.
			run, failed = nil, run.failed
		}
		s.mu.Unlock()
		if run != nil {
			// This node's run: its seal, or its wait for another node's.
			t := time.NewTimer(time.Until(deadline))
			select {
			case <-run.done:
				t.Stop()
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
				return nil, errSealWait
			}
		}
		cur, err := s.read(m.ID)
		if err != nil {
			return nil, err
		}
		if !cur.Sealing() {
			return cur, nil
		}
		if failed != nil {
			return nil, failed
		}
		if run != nil && run.err != nil {
			return nil, run.err
		}
		if time.Now().After(deadline) {
			return nil, errSealWait
		}
		// Sealed by another node (a shared store), or by this one's
		// Recover that has not started it yet.
		t := time.NewTimer(sealPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// openClone opens sealing snapshot m's clone; sealed meanwhile, it returns
// the sealed manifest instead. The caller holds the owner's lock.
func (s *Store) openClone(m *Manifest) (*os.File, *Manifest, error) {
	f, err := os.Open(s.sealingPath(m.Owner, m.ID)) //nolint:gosec // G304: the store's own clone
	if err == nil {
		return f, nil, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("restore image: %w", err)
	}
	cur, rerr := s.read(m.ID)
	if rerr != nil {
		return nil, nil, rerr
	}
	if cur.Sealing() {
		return nil, nil, fmt.Errorf("restore image: the clone of sealing snapshot %s is gone", m.ID)
	}
	return nil, cur, nil
}

// cloneWhole tells whether sealing snapshot m's clone is there, whole.
func (s *Store) cloneWhole(m *Manifest) bool {
	fi, err := os.Stat(s.sealingPath(m.Owner, m.ID))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == m.ImageSize
}

// removeIncomplete removes sealing snapshot m whose clone was missing or
// not whole, if it still is so with the owner's pool locked exclusively:
// on a shared store, the missing clone may be one another node's seal
// just removed (sealed, under the shared lock) — then it is left alone.
func (s *Store) removeIncomplete(m *Manifest) bool {
	lk, err := s.lockOwner(m.Owner, true)
	if err != nil {
		return false
	}
	defer lk.unlock()
	cur, err := s.read(m.ID)
	if err != nil || !cur.Sealing() || s.cloneWhole(cur) {
		return false
	}
	if err := os.Remove(s.sealingPath(m.Owner, m.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err := os.Remove(s.metaPath(m.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	_ = syncDir(filepath.Join(s.dir, "meta"))
	return true
}

// Recover seals again the snapshots a previous run left sealing whose
// clone is whole, and removes those whose clone is not (and clones left
// without a sealing manifest). It returns the ids it seals and removes.
func (s *Store) Recover() (sealing, removed []string) {
	all, err := s.all()
	if err != nil {
		return nil, nil
	}
	live := make(map[string]bool)
	for i := range all {
		m := &all[i]
		if !m.Sealing() {
			continue
		}
		if s.cloneWhole(m) {
			live[m.ID] = true
			sealing = append(sealing, m.ID)
			s.startSeal(m)
			continue
		}
		if s.removeIncomplete(m) {
			removed = append(removed, m.ID)
		}
	}
	// Clones of no sealing snapshot: one whose snapshot is sealed (a
	// crash before the clone went), or older than orphanCloneAge.
	clones, _ := filepath.Glob(filepath.Join(s.dir, "chunks", "*", "sealing", "sn*.img"))
	for _, p := range clones {
		id := strings.TrimSuffix(filepath.Base(p), ".img")
		if live[id] || !ValidID(id) {
			continue
		}
		m, err := s.read(id)
		fi, serr := os.Stat(p)
		if (err == nil && !m.Sealing()) || (serr == nil && time.Since(fi.ModTime()) > orphanCloneAge) {
			_ = os.Remove(p)
		}
	}
	return sealing, removed
}
