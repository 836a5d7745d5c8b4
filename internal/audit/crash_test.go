package audit

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/store"
)

// The crash test's child: a process that appends from several goroutines
// in a loop and prints "<seq> <hash>" for every append that returned, until
// it is killed.
const (
	crashChildEnv    = "AUDIT_TEST_CRASH_CHILD_DB"
	crashChildDirEnv = "AUDIT_TEST_CRASH_CHILD_DIR"
	// crashChildMax bounds the child's appends in case nobody kills it.
	crashChildMax = 20000
)

func crashChild() int {
	ctx := context.Background()
	name := os.Getenv(crashChildEnv)
	var st store.Store
	var err error
	if path, ok := strings.CutPrefix(name, "sqlite:"); ok {
		st, err = store.OpenSQLite(ctx, path)
	} else {
		st, err = store.OpenPostgres(ctx, name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	l := New(st, os.Getenv(crashChildDirEnv))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range crashChildMax / 8 {
				r, err := l.Append(ctx, entry(g*crashChildMax+i))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				mu.Lock()
				// One write per line: what the parent reads returned.
				_, _ = fmt.Fprintf(os.Stdout, "%d %s\n", r.Seq, r.Hash)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return 0
}

// kill -9 of a process appending in a loop loses no record whose Append
// returned: after reopening, every acknowledged seq is stored with the hash
// its caller got, and the chain verifies.
func TestCrashLosesNoAcknowledgedRecord(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l := New(openStore(t, db), db.dir)
		for i := range 10 { // the child appends onto an existing chain
			if _, err := l.Append(context.Background(), entry(i)); err != nil {
				t.Fatal(err)
			}
		}
		// #nosec G204 -- the test binary re-executed as the child
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+db.name, crashChildDirEnv+"="+db.dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[int64]string{}
		sc := bufio.NewScanner(out)
		killed := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			seq, err := strconv.ParseInt(f[0], 10, 64)
			if len(f) != 2 || err != nil {
				t.Fatalf("child printed %q", sc.Text())
			}
			acked[seq] = f[1]
			if len(acked) == 300 && !killed {
				if err := cmd.Process.Kill(); err != nil { // SIGKILL
					t.Fatal(err)
				}
				killed = true
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("the child stopped after %d appends: %s", len(acked), stderr.String())
		}

		st2, err := db.open(context.Background())
		if err != nil {
			t.Fatalf("reopen after the crash: %v", err)
		}
		defer func() { _ = st2.Close() }()
		stored := storedBySeq(t, st2)
		var maxAcked int64 // for the failure message
		for seq, hash := range acked {
			if s, ok := stored[seq]; !ok || s.Hash != hash {
				t.Fatalf("record %d was acknowledged (hash %s) but after the crash is %+v (present %v)", seq, hash, s, ok)
			}
			maxAcked = max(maxAcked, seq)
		}
		l2 := New(st2, db.dir)
		res, err := l2.Verify(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK {
			t.Fatalf("verify after the crash = %+v (%d records acknowledged, highest %d)", res, len(acked), maxAcked)
		}
		// The log goes on from there, and its head with it.
		if _, err := l2.Append(context.Background(), entry(-1)); err != nil {
			t.Fatal(err)
		}
		if res, err := l2.Verify(context.Background()); err != nil || !res.OK || res.Records != int64(len(stored))+1 {
			t.Fatalf("verify after appending past the crash = %+v (%v)", res, err)
		}
		t.Logf("%d acknowledged, %d stored, verify %+v", len(acked), len(stored), res)
	})
}
