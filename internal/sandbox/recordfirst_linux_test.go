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

// toolSpawn is a command tool that starts its command through
// Sandbox.Spawn (the path of e2b.process_start, shell sessions and the
// interpreters), held for its record like exec.run's.
const toolSpawn = "test.spawn"

type spawnArgs struct {
	ID   string   `json:"id"`
	Argv []string `json:"argv"`
}

func spawnTool(m *Manager) dispatch.Tool {
	return dispatch.Define(toolSpawn, dispatch.Spec{Risk: guard.Safe, Commands: dispatch.HeldCommand},
		func(ctx context.Context, c auth.Caller, a spawnArgs) (int, error) {
			s, err := m.Resolve(ctx, c, a.ID)
			if err != nil {
				return 0, err
			}
			p, err := s.Spawn(ctx, SpawnSpec{Argv: a.Argv, Cwd: "/workspace"})
			if err != nil {
				return 0, err
			}
			defer p.Release()
			return (<-p.Exited()).Code, nil
		}, dispatch.Hooks[spawnArgs, int]{
			Describe: func(a spawnArgs) dispatch.Target {
				return dispatch.Target{Target: strings.Join(a.Argv, " "), Sandbox: a.ID}
			},
			Summarize: func(_ spawnArgs, code int) map[string]any { return map[string]any{"exit_code": code} },
		})
}

// TestCommandStartsOnlyOnceItsRecordIsDurable: a command tool, dispatched
// with a real audit log whose commit is held, gets its command to the
// init, which prepares it and blocks before the fork; the command has not
// run while its call's record is not durable, and runs once it is — for
// exec.run (Sandbox.Exec) and for a tool that spawns (Sandbox.Spawn).
// Without the hold (the record written after the command, or the spawn not
// held for it) the command's file appears while the commit is held and the
// test fails.
func TestCommandStartsOnlyOnceItsRecordIsDurable(t *testing.T) {
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
	hs := &heldStore{Store: st}
	lg := audit.New(hs, dir)
	t.Cleanup(func() { _ = lg.Close() })
	d := dispatch.New(dispatch.Options{Audit: lg})
	for _, tl := range Tools(m, guard.New(guard.Config{})) {
		d.MustRegister(tl)
	}
	d.MustRegister(spawnTool(m))
	c := auth.Caller{KeyID: owner.KeyID, Role: auth.RoleAgent}
	// Started, with an execution group to hand out, before a commit is held.
	if _, err := d.Dispatch(context.Background(), c, ToolExec.Name(), ExecArgs{ID: s.ID(), Command: "true"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, tool string
		args       func(mark string) any
	}{
		{"exec.run", ToolExec.Name(), func(mark string) any { return ExecArgs{ID: s.ID(), Command: "touch /workspace/" + mark} }},
		{"Sandbox.Spawn", toolSpawn, func(mark string) any {
			return spawnArgs{ID: s.ID(), Argv: []string{"/usr/bin/touch", "/workspace/" + mark}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mark := strings.ReplaceAll(tc.name, ".", "-")
			heldCommand(t, d, c, hs, lg, s.inst.Pid, nr, tc.tool, mark, tc.args(mark))
		})
	}
}

// heldCommand dispatches tool with args (a command that creates
// /workspace/mark) while the audit commit is held, and checks the order.
func heldCommand(t *testing.T, d *dispatch.Dispatcher, c auth.Caller, hs *heldStore, lg *audit.Log, pid int, nr, tool, mark string, args any) {
	t.Helper()
	// The command's file, seen from the host through the init's root.
	path := fmt.Sprintf("/proc/%d/root/workspace/%s", pid, mark)
	hs.entered, hs.release = make(chan struct{}), make(chan struct{})
	hs.armed.Store(true)
	type answer struct {
		res any
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := d.Dispatch(context.Background(), c, tool, args)
		done <- answer{res, err}
	}()
	<-hs.entered
	// Bounded wait for the command either to run (the order is broken) or
	// to be held: the init's forking thread (its main thread) blocked in
	// read(2) on the hold.
	held := false
	for range 3000 {
		if _, err := os.Stat(path); err == nil {
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
	// Both looked at while the commit is still held: once it is
	// released, the command runs and the answer may come at once.
	_, statErr := os.Stat(path)
	var early *answer
	select {
	case a := <-done:
		early = &a
	default:
	}
	close(hs.release)
	if !errors.Is(statErr, os.ErrNotExist) {
		t.Fatalf("the command ran while its call's record was not durable (%v)", statErr)
	}
	if !held {
		t.Fatal("the init never held the command")
	}
	if early != nil {
		t.Fatalf("answered while the record was not durable: %v, %v", early.res, early.err)
	}
	if a := <-done; a.err != nil {
		t.Fatal(a.err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the released command left no file on the host (%v): this test cannot see a command run", err)
	}
	recs, err := lg.Query(context.Background(), audit.Filter{Action: tool})
	if err != nil {
		t.Fatal(err)
	}
	var call, outcome *audit.Record
	for i := range recs {
		switch r := &recs[i]; {
		case r.Action == tool && strings.Contains(r.Target, mark):
			call = r
		case r.Action == tool+dispatch.OutcomeSuffix && call != nil && r.Detail["call_seq"] == float64(call.Seq):
			outcome = r
		}
	}
	if call == nil || outcome == nil || outcome.Detail["exit_code"] != float64(0) {
		t.Fatalf("records %+v: want the call's and its outcome (exit 0)", recs)
	}
}
