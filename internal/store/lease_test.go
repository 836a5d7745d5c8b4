package store_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// leaseChildEnv names the data dir a child process holds (leaseChild):
// the test kills it to see the kernel give the lock back.
const leaseChildEnv = "STORE_TEST_LEASE_CHILD_DIR"

func holder(id string) store.Holder {
	return store.Holder{ID: id, Host: "test-host", PID: os.Getpid(), Started: time.Now()}
}

// leaseChild holds its data dir, says so, and waits to be killed.
func leaseChild() int {
	st, err := store.Open(context.Background(), os.Getenv(leaseChildEnv))
	if err != nil {
		return 2
	}
	if _, err := st.HoldNode(context.Background(), store.Holder{ID: "child", Host: "child-host", PID: os.Getpid(), Started: time.Now()}, time.Hour); err != nil {
		return 3
	}
	_, _ = os.Stdout.WriteString("held\n")
	select {}
}

// TestSQLiteOneServerPerDataDir: a second server on a data dir is refused
// while the first holds it, with the first's pid in the message; a clean
// release and a killed holder both free it.
func TestSQLiteOneServerPerDataDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() store.Store {
		st, err := store.Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	a, b := open(), open()
	la, err := a.HoldNode(ctx, holder("a"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.HoldNode(ctx, holder("b"), time.Hour)
	if !errors.Is(err, store.ErrNodeHeld) || !strings.Contains(err.Error(), "test-host") || !strings.Contains(err.Error(), "SANDBOX_DATA_DIR") {
		t.Fatalf("a second server on the data dir: %v, want ErrNodeHeld naming the holder and what to change", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.HoldNode(ctx, holder("b"), time.Hour)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	_ = lb.Release(ctx)

	// A holder that dies without releasing (SIGKILL): the kernel drops
	// its lock, so the next server starts at once.
	cmd := exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec // G204: this test binary
	cmd.Env = append(os.Environ(), leaseChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child: %q %v", line, err)
	}
	if _, err := b.HoldNode(ctx, holder("b"), time.Hour); !errors.Is(err, store.ErrNodeHeld) || !strings.Contains(err.Error(), "child-host") {
		t.Fatalf("while the child holds it: %v", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	lb, err = b.HoldNode(ctx, holder("b"), time.Hour)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	_ = lb.Release(ctx)
}

// TestPostgresNodeNameLease: one live server per node name on one
// database, whatever their data dirs: a second is refused with what to
// change, another name is not; a released name is free at once, an
// expired one to the next server, and the old holder's renewal then says
// it lost the name.
func TestPostgresNodeNameLease(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	open := func(node string) *store.Postgres {
		st, err := store.OpenPostgres(ctx, url, store.WithNode(node), store.WithDataDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	a, b, other := open("node-a"), open("node-a"), open("node-b")
	la, err := a.HoldNode(ctx, holder("a"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.HoldNode(ctx, holder("b"), time.Hour)
	if !errors.Is(err, store.ErrNodeHeld) || !strings.Contains(err.Error(), "SANDBOX_NODE_NAME") || !strings.Contains(err.Error(), "test-host") {
		t.Fatalf("a second server under the same name: %v, want ErrNodeHeld naming the holder and SANDBOX_NODE_NAME", err)
	}
	lo, err := other.HoldNode(ctx, holder("o"), time.Hour)
	if err != nil {
		t.Fatalf("another name: %v", err)
	}
	defer func() { _ = lo.Release(ctx) }()
	if err := la.Renew(ctx); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.HoldNode(ctx, holder("b"), 200*time.Millisecond)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	// b stops renewing (a node that hangs or loses the database): once
	// its lease expires, a takes the name, and b's next renewal is lost.
	deadline := time.Now().Add(30 * time.Second)
	for {
		la, err = a.HoldNode(ctx, holder("a2"), time.Hour)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrNodeHeld) || time.Now().After(deadline) {
			t.Fatalf("taking an expired name: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer func() { _ = la.Release(ctx) }()
	if err := lb.Renew(ctx); !errors.Is(err, store.ErrNodeLost) {
		t.Fatalf("the old holder's renewal: %v, want ErrNodeLost", err)
	}
}
