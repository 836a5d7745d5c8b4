package daemon_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// TestOneSyncPerExec counts the durable writes behind audited execs: the
// fsync-family system calls this process makes (the server runs in it)
// while a client runs n execs one after the other. Each call's record must
// be durable before its command starts (SECURITY.md, "A command's record
// goes first"), and calls made one after the other cannot share a commit,
// so there is at least one sync per call; the call's outcome rides the next
// call's commit, and the rows an exec writes ride its record's, so there is
// at most one. A few more are allowed for what the server does meanwhile
// on its own (the last outcome's timer, a WAL checkpoint). It counts, it
// does not time: a second sync per call (an outcome with a commit of its
// own, a write outside the record's sync) doubles the count.
func TestOneSyncPerExec(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := daemontest.NewClient(t, d)
	id := c.NewSandbox(map[string]any{})
	run := func() {
		var res struct {
			Status   string `json:"status"`
			ExitCode *int   `json:"exit_code"`
		}
		c.JSON("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"argv": []string{"/bin/true"}}, 200, &res)
		if res.Status != "completed" || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("exec: %+v", res)
		}
	}
	for range 5 { // the execution group, the connection, the statements
		run()
	}
	syncs, err := openSyncCounter()
	if err != nil {
		t.Skipf("cannot count system calls here: %v", err)
	}
	defer syncs.close()
	const n, slack = 30, 3
	before, err := syncs.read()
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		run()
	}
	after, err := syncs.read()
	if err != nil {
		t.Fatal(err)
	}
	got := after - before
	t.Logf("%d execs, %d fsync/fdatasync/sync_file_range/syncfs calls", n, got)
	if got < n {
		t.Errorf("%d syncs for %d execs made one after the other: a call was answered (or its command started) before its record was durable", got, n)
	}
	if got > n+slack {
		t.Errorf("%d syncs for %d execs: more than one durable write per call (at most %d allowed)", got, n, n+slack)
	}
}

// syncCalls are the system calls that make written data durable.
var syncCalls = []string{"fsync", "fdatasync", "sync_file_range", "syncfs"}

// syncCounter counts syncCalls made by this process's threads, and by the
// threads and processes they start, from its opening on: one perf counter
// per thread and call, inherited by what the thread starts (a read sums a
// counter's inherited children).
type syncCounter struct{ fds []int }

func openSyncCounter() (*syncCounter, error) {
	var ids []uint64
	for _, name := range syncCalls {
		id, err := tracepointID("syscalls/sys_enter_" + name)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	s := &syncCounter{}
	for _, e := range tids {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		for _, id := range ids {
			attr := unix.PerfEventAttr{
				Type:   unix.PERF_TYPE_TRACEPOINT,
				Config: id,
				Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
				Bits:   unix.PerfBitInherit,
			}
			fd, err := unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
			if errors.Is(err, unix.ESRCH) {
				continue // the thread ended meanwhile
			}
			if err != nil {
				s.close()
				return nil, fmt.Errorf("perf_event_open of %s: %w", e.Name(), err)
			}
			s.fds = append(s.fds, fd)
		}
	}
	return s, nil
}

// tracepointID reads the id of a kernel tracepoint from tracefs.
func tracepointID(name string) (uint64, error) {
	var errs []error
	for _, dir := range []string{"/sys/kernel/tracing/events/", "/sys/kernel/debug/tracing/events/"} {
		b, err := os.ReadFile(dir + name + "/id")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	return 0, errors.Join(errs...)
}

func (s *syncCounter) read() (uint64, error) {
	var total uint64
	var buf [8]byte
	for _, fd := range s.fds {
		if _, err := unix.Read(fd, buf[:]); err != nil {
			return 0, fmt.Errorf("read perf counter: %w", err)
		}
		total += binary.NativeEndian.Uint64(buf[:])
	}
	return total, nil
}

func (s *syncCounter) close() {
	for _, fd := range s.fds {
		_ = unix.Close(fd)
	}
}
