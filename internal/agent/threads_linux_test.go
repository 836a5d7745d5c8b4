package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"
	"github.com/sandhold/sandhold/internal/agent/sandboxinit"

	"golang.org/x/sys/unix"
)

// idleThreads is the most threads an idle init may keep: the forking
// thread, sysmon, the runtime's template thread, one for the scheduler and
// the poller, and two the walks may leave on a loaded host (usually 5 in
// all). It had 8 with os/signal and without the trim, and more after a
// burst (BENCHMARKS.md).
const idleThreads = 6

// TestIdleInitEndsSpareThreads: once calls stop, an init that a burst of
// concurrent calls gave threads ends the spare ones; the threads the
// runtime makes afterwards hold every layer the init's threads held, and
// commands are as isolated as before.
func TestIdleInitEndsSpareThreads(t *testing.T) {
	ts := launch(t, nil)
	burst := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					if _, _, err := ts.File(ctx, proto.OpReadDir, proto.FileReq{Path: "/usr/bin", Limit: 50}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		peak := 0
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for {
			peak = max(peak, taskCount(t, ts.Pid))
			select {
			case <-done:
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				return max(peak, taskCount(t, ts.Pid))
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	// Within two quiet periods: on a loaded host a thread may still be
	// on its way to park when a trim passes; the next one ends it.
	settle := func(peak int) int {
		n := taskCount(t, ts.Pid)
		for round := range 2 {
			if round > 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := ts.Ping(ctx)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(4*sandboxinit.ReleaseAfter + 10*time.Second)
			for n > idleThreads && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
				n = taskCount(t, ts.Pid)
			}
			if n <= idleThreads {
				return n
			}
		}
		t.Fatalf("the init keeps %d threads after two quiet periods (%d in the burst), want at most %d", n, peak, idleThreads)
		return n
	}
	peak := burst()
	n := settle(peak)
	t.Logf("threads: %d in the burst, %d once quiet", peak, n)

	// Threads made after the trim: every one of the init's is filtered
	// and without new privileges.
	peak = burst()
	for _, st := range taskStatuses(t, ts.Pid) {
		if st["Seccomp"] != "2" || st["NoNewPrivs"] != "1" {
			t.Errorf("init thread %s: Seccomp %s NoNewPrivs %s, want 2 and 1", st["Pid"], st["Seccomp"], st["NoNewPrivs"])
		}
	}
	for _, c := range []struct{ name, cmd, want string }{
		{"bounding set empty", "grep CapBnd /proc/self/status", "CapBnd:\t0000000000000000\n"},
		{"no_new_privs", "grep NoNewPrivs /proc/self/status", "NoNewPrivs:\t1\n"},
		{"seccomp on", "grep '^Seccomp:' /proc/self/status", "Seccomp:\t2\n"},
		{"no signal starts ignored", "grep '^SigIgn:' /proc/self/status", "SigIgn:\t0000000000000000\n"},
	} {
		if r := ts.run(t, "sh", "-c", c.cmd); r.stdout != c.want {
			t.Errorf("%s: %q, want %q", c.name, r.stdout, c.want)
		}
	}
	settle(peak)
}

// TestInitIgnoresSignals: the signals PID 1 takes no action on, sent from
// the host (an ancestor pid namespace, where a handler would be run), end
// or stop nothing: the init serves, and a command started after them
// starts with none of them ignored or blocked.
func TestInitIgnoresSignals(t *testing.T) {
	ts := launch(t, nil)
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1,
		unix.SIGUSR2, unix.SIGPIPE, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGCHLD} {
		if err := unix.Kill(ts.Pid, sig); err != nil {
			t.Fatalf("kill %v: %v", sig, err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if st := procStatus(t, ts.Pid); !strings.HasPrefix(st["State"], "S") {
		t.Fatalf("init state %q after the signals, want S (sleeping)", st["State"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Ping(ctx); err != nil {
		t.Fatalf("ping after the signals: %v (init said: %s)", err, ts.log.String())
	}
	r := ts.run(t, "sh", "-c", "grep -E '^Sig(Ign|Blk):' /proc/self/status; echo ran")
	if r.stdout != "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nran\n" {
		t.Fatalf("command after the signals: %q", r.stdout)
	}
}

// taskCount is the number of threads of the host's process pid.
func taskCount(t *testing.T, pid int) int {
	t.Helper()
	return procEntries(t, pid, "task")
}

// taskStatuses reads every thread's status fields of the host's process pid.
func taskStatuses(t *testing.T, pid int) []map[string]string {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, e.Name()))
		if err != nil {
			continue // ended meanwhile
		}
		st := map[string]string{}
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				st[k] = strings.TrimSpace(v)
			}
		}
		out = append(out, st)
	}
	return out
}
