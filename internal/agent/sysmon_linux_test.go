package agent

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/agent/sandboxinit"
)

// TestOnlySysmonGetsTheLongTimerSlack checks that the init gives the
// runtime's sysmon thread (thread 2 of the sandbox's pid namespace) a timer
// slack of sandboxinit.SysmonSlack and leaves every other thread at the slack it was
// started with.
func TestOnlySysmonGetsTheLongTimerSlack(t *testing.T) {
	ts := launch(t, nil)
	def := readSlack(t, "/proc/self/timerslack_ns") // the init inherits ours
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", ts.Pid))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range ents {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", ts.Pid, e.Name()))
		if err != nil {
			continue
		}
		inner, ok := sandboxinit.InnermostNSpid(string(st))
		if !ok {
			t.Fatalf("thread %s: no NSpid", e.Name())
		}
		got := readSlack(t, "/proc/"+e.Name()+"/timerslack_ns")
		want := def
		if inner == sandboxinit.SysmonTID {
			want, found = sandboxinit.SysmonSlack, true
		}
		if got != want {
			t.Errorf("init thread %d (host %s): timer slack %d ns, want %d", inner, e.Name(), got, want)
		}
	}
	if !found {
		t.Fatal("the init has no thread 2")
	}
}

// TestCommandsKeepDefaultTimerSlack: a command inherits its forking thread's
// timer slack, and the long one is only sysmon's: a sleeping command in the
// sandbox wakes as precisely as one outside.
func TestCommandsKeepDefaultTimerSlack(t *testing.T) {
	ts := launch(t, nil)
	def := readSlack(t, "/proc/self/timerslack_ns")
	for range 3 { // the fork thread is whichever thread runs forkLoop; try a few
		r := ts.run(t, "cat", "/proc/self/timerslack_ns")
		got, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
		if err != nil || r.exit.Code != 0 {
			t.Fatalf("read slack inside: %q, exit %d, stderr %q", r.stdout, r.exit.Code, r.stderr)
		}
		if got != def {
			t.Fatalf("command's timer slack %d ns, want the default %d", got, def)
		}
	}
}

func readSlack(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
