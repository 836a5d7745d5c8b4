package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/store"
)

// heldStore holds the next audit commit, once armed, until released.
type heldStore struct {
	store.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (h *heldStore) AppendAuditBatch(ctx context.Context, build func(store.AuditRecord, bool) ([]store.AuditRecord, error),
	beforeCommit func(store.AuditRecord) error) ([]store.AuditRecord, error) {
	if h.armed.CompareAndSwap(true, false) {
		close(h.entered)
		<-h.release
	}
	return h.Store.AppendAuditBatch(ctx, build, beforeCommit)
}

// readSyscall is the number /proc/<pid>/syscall starts with while a thread
// blocks in read(2).
var readSyscall = map[string]string{"amd64": "0 ", "arm64": "63 "}

// TestExecRunStartsOnlyOnceItsRecordIsDurable: exec.run, dispatched with a
// real audit log whose commit is held, gets its command to the init, which
// prepares it and blocks before the fork; the command has not run while
// its call's record is not durable, and runs once it is. Without the hold
// (the record written after the command, or the spawn not held for it)
// the command's file appears while the commit is held and the test fails.
func TestExecRunStartsOnlyOnceItsRecordIsDurable(t *testing.T) {
	nr, ok := readSyscall[runtime.GOARCH]
	if !ok {
		t.Skip("no read(2) number known for", runtime.GOARCH)
	}
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	hs := &heldStore{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	lg := audit.New(hs, dir)
	t.Cleanup(func() { _ = lg.Close() })
	d := dispatch.New(dispatch.Options{Audit: lg})
	for _, tl := range Tools(m, guard.New(guard.Config{})) {
		d.MustRegister(tl)
	}
	c := auth.Caller{KeyID: owner.KeyID, Role: auth.RoleAgent}
	call := func(cmd string) (any, error) {
		return d.Dispatch(context.Background(), c, ToolExec, ExecArgs{ID: s.ID(), Command: cmd})
	}
	// Started, with an execution group to hand out, before the commit is held.
	if _, err := call("true"); err != nil {
		t.Fatal(err)
	}
	// The command's file, seen from the host through the init's root.
	pid := s.inst.Pid
	mark := fmt.Sprintf("/proc/%d/root/workspace/ran", pid)

	hs.armed.Store(true)
	type answer struct {
		res any
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := call("touch /workspace/ran")
		done <- answer{res, err}
	}()
	<-hs.entered
	// Bounded wait for the command either to run (the order is broken) or
	// to be held: the init's forking thread (its main thread) blocked in
	// read(2) on the hold.
	held := false
	for range 3000 {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, pid))
		if err != nil {
			close(hs.release)
			t.Skip("cannot read the init's system call:", err)
		}
		if strings.HasPrefix(string(b), nr) {
			held = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, statErr := os.Stat(mark)
	close(hs.release)
	if !errors.Is(statErr, os.ErrNotExist) {
		t.Fatalf("the command ran while its call's record was not durable (%v)", statErr)
	}
	if !held {
		t.Fatal("the init never held the command")
	}
	select {
	case a := <-done:
		t.Fatalf("answered while the record was not durable: %v, %v", a.res, a.err)
	default:
	}
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	if r, ok := a.res.(ExecResult); !ok || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("result %+v", a.res)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the released command left no file on the host (%v): this test cannot see a command run", err)
	}
	recs, err := lg.Query(context.Background(), audit.Filter{Action: ToolExec})
	if err != nil {
		t.Fatal(err)
	}
	var call2, outcome *audit.Record
	for i := range recs {
		switch r := &recs[i]; {
		case r.Action == ToolExec && r.Target == "touch /workspace/ran":
			call2 = r
		case r.Action == ToolExec+dispatch.OutcomeSuffix && call2 != nil && r.Detail["call_seq"] == float64(call2.Seq):
			outcome = r
		}
	}
	if call2 == nil || outcome == nil || outcome.Detail["exit_code"] != float64(0) {
		t.Fatalf("records %+v: want the call's and its outcome (exit 0)", recs)
	}
}
