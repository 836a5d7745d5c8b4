package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/testenv"
)

// holdSeals keeps every seal from starting until the returned release is
// called (or the seal is cancelled).
func holdSeals(t *testing.T) (release func()) {
	t.Helper()
	release, restore := HoldSeals()
	t.Cleanup(restore)
	return release
}

// xfsImage makes a store and a 64 MiB image with 12 MiB of data on XFS.
func xfsImage(t *testing.T) (*Store, *os.File, string) {
	t.Helper()
	mnt := testenv.RequireXFS(t)
	s, err := Open(filepath.Join(mnt, "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	f, err := os.Create(filepath.Join(mnt, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(random(t, 12<<20), 4<<20); err != nil {
		t.Fatal(err)
	}
	return s, f, mnt
}

// digestElsewhere is the digest of f's capture on a store without shared
// blocks (chunked and hashed before the answer).
func digestElsewhere(t *testing.T, f *os.File, in Info) string {
	t.Helper()
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Capture(context.Background(), f, 64<<20, in)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sealing() || m.Digest == "" {
		t.Fatalf("a capture without shared blocks answered %q without a digest", m.State)
	}
	return m.Digest
}

// TestCaptureSealsAfterItAnswers: on XFS a capture answers with the
// snapshot sealing (its clone durable, no digest); a restore works from
// the clone meanwhile, an export is refused and a wait for the seal ends
// with its context; the seal then gives it the digest a capture that
// hashes first gives the same image, the chunks restore it, the clone
// goes, and the seal is told.
func TestCaptureSealsAfterItAnswers(t *testing.T) {
	ctx := context.Background()
	s, f, mnt := xfsImage(t)
	in := Info{Name: "n", Owner: "k", Sandbox: "sb", Meta: json.RawMessage(`{"x":1}`)}
	want := digestElsewhere(t, f, in)
	var told []*Manifest
	var mu sync.Mutex
	s.OnSealed(func(m *Manifest, err error) {
		if err != nil {
			t.Errorf("seal: %v", err)
		}
		mu.Lock()
		told = append(told, m)
		mu.Unlock()
	})
	release := holdSeals(t)
	m, err := s.Capture(ctx, f, 64<<20, in)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Sealing() || m.Digest != "" || len(m.Chunks) != 0 {
		t.Fatalf("capture on XFS answered state %q digest %q with %d chunks, want sealing", m.State, m.Digest, len(m.Chunks))
	}
	if got, err := s.Get("k", false, m.ID); err != nil || !got.Sealing() {
		t.Fatalf("stored snapshot: %v %+v", err, got)
	}
	if !s.Holds(m) {
		t.Error("the store does not hold a sealing snapshot's clone")
	}
	out := filepath.Join(mnt, "from-clone.img")
	if err := s.Restore(ctx, m, out); err != nil {
		t.Fatal(err)
	}
	sameFile(t, f, out)
	if err := s.Export(ctx, m, new(discard)); !fault.Is(err, fault.Conflict) {
		t.Errorf("export of a sealing snapshot: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.WaitSealed(cctx, m); !errors.Is(err, context.Canceled) {
		t.Errorf("wait with a cancelled context: %v", err)
	}

	release()
	sealed, err := s.WaitSealed(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if sealed.Sealing() || sealed.Digest != want || len(sealed.Chunks) != 3 {
		t.Fatalf("sealed: state %q digest %q (want %q), %d chunks", sealed.State, sealed.Digest, want, len(sealed.Chunks))
	}
	if _, err := os.Lstat(s.sealingPath("k", m.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the clone stays after the seal: %v", err)
	}
	mu.Lock()
	if len(told) != 1 || told[0].ID != m.ID || told[0].Digest != want {
		t.Errorf("seals told: %+v", told)
	}
	mu.Unlock()
	out2 := filepath.Join(mnt, "from-chunks.img")
	if err := s.Restore(ctx, m, out2); err != nil { // the caller's manifest still reads sealing
		t.Fatal(err)
	}
	sameFile(t, f, out2)
	if err := s.Export(ctx, sealed, new(discard)); err != nil {
		t.Errorf("export once sealed: %v", err)
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// TestDeleteWhileSealing: deleting a sealing snapshot cancels its seal:
// no chunk, clone or manifest is left, the seal is not told, and a wait
// for it ends as not found.
func TestDeleteWhileSealing(t *testing.T) {
	ctx := context.Background()
	s, f, _ := xfsImage(t)
	s.OnSealed(func(m *Manifest, err error) { t.Errorf("a deleted snapshot's seal was told: %s %v", m.ID, err) })
	holdSeals(t)
	m, err := s.Capture(ctx, f, 64<<20, Info{Owner: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, "k", false, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitSealed(ctx, m); !errors.Is(err, ErrNotFound) {
		t.Errorf("wait for a deleted snapshot's seal: %v", err)
	}
	if _, err := os.Lstat(s.sealingPath("k", m.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the clone stays: %v", err)
	}
	if n := s.Usage("k", false); n != 0 {
		t.Errorf("the owner's pool holds %d bytes after the delete", n)
	}
}

// failSeals makes the next n seals fail, and every failed seal run again
// after wait; it returns how many seals have started.
func failSeals(t *testing.T, n int, wait time.Duration) (started func() int) {
	t.Helper()
	var mu sync.Mutex
	count := 0
	setSealHook(func(context.Context, string) error {
		mu.Lock()
		defer mu.Unlock()
		count++
		if count <= n {
			return errInjected
		}
		return nil
	})
	old := sealBackoff
	sealBackoff = func(int) time.Duration { return wait }
	t.Cleanup(func() {
		setSealHook(nil)
		sealBackoff = old
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return count
	}
}

var errInjected = errors.New("injected seal failure")

// TestFailedSealRunsAgain: a seal that fails is told with its error and
// runs again after its backoff while the store is open (not only at the
// next start's Recover): the snapshot is then sealed with the digest a
// capture that hashes first gives, its clone gone, and the seal told.
func TestFailedSealRunsAgain(t *testing.T) {
	ctx := context.Background()
	s, f, _ := xfsImage(t)
	want := digestElsewhere(t, f, Info{Owner: "k"})
	failSeals(t, 2, time.Millisecond)
	told := make(chan error, 8)
	s.OnSealed(func(_ *Manifest, err error) { told <- err })
	m, err := s.Capture(ctx, f, 64<<20, Info{Owner: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Sealing() {
		t.Fatalf("capture on XFS answered state %q, want sealing", m.State)
	}
	for i := range 3 {
		var err error
		select {
		case err = <-told:
		case <-time.After(time.Minute): // a bound on a hang, not a timing
			t.Fatalf("after %d seals told, no seal ran again", i)
		}
		if i < 2 && !errors.Is(err, errInjected) {
			t.Fatalf("seal %d told %v, want the injected failure", i+1, err)
		}
		if i == 2 && err != nil {
			t.Fatalf("the third seal: %v", err)
		}
	}
	sealed, err := s.Get("k", false, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sealed.Sealing() || sealed.Digest != want {
		t.Fatalf("after the retries: state %q digest %q, want %q", sealed.State, sealed.Digest, want)
	}
	if _, err := os.Lstat(s.sealingPath("k", m.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the clone stays after the seal: %v", err)
	}
}

// TestFailedSealWaitsAnswerAndDelete: a wait for a seal that failed
// answers its error at once (it does not wait for the next try), and
// deleting the snapshot while its seal waits to run again ends that wait:
// the seal is not tried again, nothing of the snapshot is left.
func TestFailedSealWaitsAnswerAndDelete(t *testing.T) {
	ctx := context.Background()
	s, f, _ := xfsImage(t)
	started := failSeals(t, 1, time.Hour)
	told := make(chan error, 8)
	s.OnSealed(func(_ *Manifest, err error) { told <- err })
	m, err := s.Capture(ctx, f, 64<<20, Info{Owner: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-told; !errors.Is(err, errInjected) {
		t.Fatalf("first seal told %v, want the injected failure", err)
	}
	if _, err := s.WaitSealed(ctx, m); !errors.Is(err, errInjected) {
		t.Errorf("wait for a failed seal: %v, want its error", err)
	}
	if _, err := s.Delete(ctx, "k", false, m.ID); err != nil {
		t.Fatal(err)
	}
	s.Close() // returns once no seal runs or waits
	if n := started(); n != 1 {
		t.Errorf("%d seals started, want 1 (none after the delete)", n)
	}
	select {
	case err := <-told:
		t.Errorf("a deleted snapshot's seal was told again: %v", err)
	default:
	}
	if _, err := os.Lstat(s.sealingPath("k", m.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the clone stays: %v", err)
	}
}

// TestRecoverSealsAgain: a store opened over a snapshot a stopped server
// left sealing seals it again from its clone; one whose clone is not whole
// is removed; a clone whose snapshot was sealed goes, and one of no
// snapshot once it is older than orphanCloneAge.
func TestRecoverSealsAgain(t *testing.T) {
	ctx := context.Background()
	s, f, _ := xfsImage(t)
	want := digestElsewhere(t, f, Info{Owner: "k"})
	release := holdSeals(t)
	left, err := s.Capture(ctx, f, 64<<20, Info{Owner: "k"})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := s.Capture(ctx, f, 64<<20, Info{Owner: "k"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close() // the server stops: both stay sealing
	if err := os.Truncate(s.sealingPath("k", broken.ID), 1<<20); err != nil {
		t.Fatal(err)
	}
	stale := s.sealingPath("k", "sn00000000000000aa")
	if err := os.WriteFile(stale, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{left.ID, broken.ID} {
		if m, err := s.Get("k", false, id); err != nil || !m.Sealing() {
			t.Fatalf("after the stop %s: %v", id, err)
		}
	}
	release()

	s2, err := Open(s.Dir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Close)
	sealing, removed := s2.Recover()
	if len(sealing) != 1 || sealing[0] != left.ID || len(removed) != 1 || removed[0] != broken.ID {
		t.Fatalf("recover sealed %v and removed %v, want [%s] and [%s]", sealing, removed, left.ID, broken.ID)
	}
	m, err := s2.WaitSealed(ctx, left)
	if err != nil {
		t.Fatal(err)
	}
	if m.Digest != want {
		t.Errorf("sealed again: digest %q, want %q", m.Digest, want)
	}
	if _, err := s2.Get("k", false, broken.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("the snapshot with a partial clone: %v", err)
	}
	if _, err := os.Lstat(s2.sealingPath("k", broken.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("its clone stays: %v", err)
	}
	// A clone of no snapshot goes only once it is old (another node may
	// be writing its manifest); one whose snapshot is sealed goes now.
	if _, err := os.Lstat(stale); err != nil {
		t.Errorf("a young clone without a manifest went: %v", err)
	}
	old := time.Now().Add(-orphanCloneAge - time.Minute)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s2.sealingPath("k", left.ID), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2.Recover()
	if _, err := os.Lstat(s2.sealingPath("k", left.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the clone of a sealed snapshot stays: %v", err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an old clone without a manifest stays: %v", err)
	}
}

// TestTwoNodesSealOnce: two nodes starting together on one shared store
// both recover a snapshot left sealing; one seals it (told once), the
// other waits for it and ends without a word once it is sealed (its
// WaitSealed answers the digest). When the node that seals goes without
// sealing (its store closed: its lock goes as a dead node's does), the
// other seals it — told once too.
func TestTwoNodesSealOnce(t *testing.T) {
	ctx := context.Background()
	s, f, _ := xfsImage(t)
	want := digestElsewhere(t, f, Info{Owner: "k"})
	var mu sync.Mutex
	told := map[string]int{}
	var gate chan struct{}
	entered := make(chan string, 16)
	hold := func() {
		g := make(chan struct{})
		gate = g
		setSealHook(func(ctx context.Context, id string) error {
			entered <- id
			select {
			case <-g:
			case <-ctx.Done():
			}
			return nil
		})
	}
	t.Cleanup(func() { setSealHook(nil) })
	node := func(name string) *Store {
		st, err := Open(s.Dir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		st.OnSealed(func(m *Manifest, err error) {
			mu.Lock()
			told[name+" "+m.ID]++
			mu.Unlock()
			if err != nil {
				t.Errorf("node %s: seal %s: %v", name, m.ID, err)
			}
		})
		return st
	}
	idle := func(st *Store) bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.seals) == 0
	}
	leaveSealing := func() *Manifest {
		hold()
		m, err := s.Capture(ctx, f, 64<<20, Info{Owner: "k"})
		if err != nil {
			t.Fatal(err)
		}
		if got := <-entered; got != m.ID {
			t.Fatalf("seal of %s started, want %s", got, m.ID)
		}
		s.Close() // the server stops: it stays sealing
		return m
	}
	tells := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range told {
			out[k] = v
		}
		return out
	}

	m1 := leaveSealing()
	a, b := node("a"), node("b")
	if sealing, _ := a.Recover(); len(sealing) != 1 {
		t.Fatalf("node a recovered %v", sealing)
	}
	<-entered // a's seal holds the snapshot
	if sealing, _ := b.Recover(); len(sealing) != 1 {
		t.Fatalf("node b recovered %v", sealing)
	}
	close(gate)
	got, err := b.WaitSealed(ctx, m1)
	if err != nil || got.Digest != want {
		t.Fatalf("node b waited for a's seal: %v, digest %q want %q", err, got.Digest, want)
	}
	testenv.Eventually(t, "both nodes' seal runs end", func() bool { return idle(a) && idle(b) })
	if n := tells(); len(n) != 1 || n["a "+m1.ID] != 1 {
		t.Errorf("the seal was told %v, want once by node a", n)
	}

	m2 := leaveSealing()
	c, d := node("c"), node("d")
	c.Recover()
	<-entered // c's seal holds it
	d.Recover()
	c.Close() // c goes without sealing it
	if got := <-entered; got != m2.ID {
		t.Fatalf("node d started sealing %s, want %s", got, m2.ID)
	}
	close(gate)
	if got, err := d.WaitSealed(ctx, m2); err != nil || got.Digest != want {
		t.Fatalf("node d sealed: %v, digest %q want %q", err, got.Digest, want)
	}
	testenv.Eventually(t, "d's seal run ends", func() bool { return idle(d) })
	if n := tells(); len(n) != 2 || n["d "+m2.ID] != 1 {
		t.Errorf("the seals were told %v, want m1 once by a and m2 once by d", n)
	}
	if _, err := os.Lstat(d.sealingPath("k", m2.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the clone stays: %v", err)
	}
}
