package store_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// The crash test's child: a process that appends through audit.Log from
// several goroutines in a loop and prints "<seq> <hash>" for every append
// that returned, until it is killed.
const (
	// crashChildEnv names the child's store: "sqlite" (the one in its
	// working directory, which is the data dir) or a PostgreSQL URL.
	crashChildEnv = "AUDIT_TEST_CRASH_CHILD_DB"
	// crashChildMax bounds the child's appends in case nobody kills it.
	crashChildMax = 20000
)

func crashEntry(i int) audit.Entry {
	return audit.Entry{Actor: "key_a", Role: "agent", Action: "exec.run", Target: fmt.Sprint("echo ", i),
		Verdict: audit.Allow, Detail: map[string]any{"i": i}}
}

func auditCrashChild() int {
	ctx := context.Background()
	name := os.Getenv(crashChildEnv)
	var st store.Store
	var err error
	if name == "sqlite" {
		st, err = store.Open(ctx, ".")
	} else {
		st, err = store.OpenPostgres(ctx, name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	l := audit.New(st, ".")
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range crashChildMax / 8 {
				r, err := l.Append(ctx, crashEntry(g*crashChildMax+i))
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
// its caller got, the chain verifies (a crash never leaves the head file
// ahead of the records), and appending goes on. Both back ends.
func TestAuditCrashLosesNoAcknowledgedRecord(t *testing.T) {
	backends := []struct {
		name  string
		fresh func(t *testing.T) (open func(context.Context) (store.Store, error), child, dir string)
	}{
		{"sqlite", func(t *testing.T) (func(context.Context) (store.Store, error), string, string) {
			dir := t.TempDir()
			return func(ctx context.Context) (store.Store, error) {
				return store.OpenSQLite(ctx, filepath.Join(dir, store.FileName))
			}, "sqlite", dir
		}},
		{"postgres", func(t *testing.T) (func(context.Context) (store.Store, error), string, string) {
			url := pgtest.URL(t)
			return func(ctx context.Context) (store.Store, error) { return store.OpenPostgres(ctx, url) }, url, t.TempDir()
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			open, child, dir := b.fresh(t)
			ctx := context.Background()
			st, err := open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			l := audit.New(st, dir)
			for i := range 10 { // the child appends onto an existing chain
				if _, err := l.Append(ctx, crashEntry(i)); err != nil {
					t.Fatal(err)
				}
			}
			_ = st.Close()

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+child)
			cmd.Dir = dir
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
				if len(f) != 2 {
					t.Fatalf("child printed %q", sc.Text())
				}
				seq, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
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

			st2, err := open(ctx)
			if err != nil {
				t.Fatalf("reopen after the crash: %v", err)
			}
			defer func() { _ = st2.Close() }()
			stored := map[int64]string{}
			if err := st2.ScanAudit(ctx, func(r store.AuditRecord) error { stored[r.Seq] = r.Hash; return nil }); err != nil {
				t.Fatal(err)
			}
			for seq, hash := range acked {
				if got, ok := stored[seq]; !ok || got != hash {
					t.Fatalf("record %d was acknowledged (hash %s) but after the crash is %q (present %v)", seq, hash, got, ok)
				}
			}
			l2 := audit.New(st2, dir)
			res, err := l2.Verify(ctx)
			if err != nil || !res.OK || res.Records != int64(len(stored)) {
				t.Fatalf("verify after the crash = %+v (%v); %d acknowledged, %d stored", res, err, len(acked), len(stored))
			}
			if _, err := l2.Append(ctx, crashEntry(-1)); err != nil {
				t.Fatal(err)
			}
			if res, err := l2.Verify(ctx); err != nil || !res.OK || res.Records != int64(len(stored))+1 {
				t.Fatalf("verify after appending past the crash = %+v (%v)", res, err)
			}
			t.Logf("%d acknowledged, %d stored", len(acked), len(stored))
		})
	}
}
