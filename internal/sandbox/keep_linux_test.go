package sandbox

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/execrun"
	"github.com/sandhold/sandhold/internal/testenv"
)

// serverUp asks the sandbox's own loopback for port 8000 until it answers
// (a started server takes a moment), or the deadline passes.
func serverUp(t *testing.T, s *Sandbox) bool {
	t.Helper()
	probe := `python3 -c 'import urllib.request;print(urllib.request.urlopen("http://127.0.0.1:8000/", timeout=5).status)'`
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if r := run(t, s, ExecRequest{Command: probe}); r.Status == StatusCompleted && *r.ExitCode == 0 && strings.TrimSpace(r.Stdout) == "200" {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// TestOneShotExecEndsWhatItStarted: without keep, a server started in the
// background dies with its exec; with keep it runs on, the call still
// answers with the command's own output, the server's later writes never
// block it, and killing it from inside frees its group.
func TestOneShotExecEndsWhatItStarted(t *testing.T) {
	cfg := testConfig(t)
	cfg.LoopbackPorts = LoopbackPorts([]uint16{8000})
	m := newManager(t, cfg, nil)
	s := create(t, m, Spec{})
	const start = "nohup python3 -m http.server 8000 & echo started"

	r := run(t, s, ExecRequest{Command: start})
	if r.Status != StatusCompleted || r.Kept {
		t.Fatalf("without keep: %+v", r)
	}
	if left := run(t, s, ExecRequest{Command: "pgrep -f 'http[.]server' || echo none"}); strings.TrimSpace(left.Stdout) != "none" {
		t.Fatalf("without keep the server outlived its exec: %q", left.Stdout)
	}

	r = run(t, s, ExecRequest{Command: start, Keep: true})
	if r.Status != StatusCompleted || !r.Kept || !strings.Contains(r.Stdout, "started") {
		t.Fatalf("with keep: %+v, want completed, kept and the command's output", r)
	}
	t.Logf("keep exec answered in %d ms", r.DurationMS)
	if !serverUp(t, s) {
		t.Fatal("the kept server never answered")
	}
	// The server logs every request to the pipe nobody reads for the
	// call any more: many requests must not block or kill it.
	many := `python3 -c 'import urllib.request
for i in range(300): urllib.request.urlopen("http://127.0.0.1:8000/", timeout=5).read()
print("ok")'`
	if r := run(t, s, ExecRequest{Command: many, Timeout: 120 * time.Second}); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("requests to the kept server: %+v", r)
	}
	if run(t, s, ExecRequest{Command: "pkill -f 'http[.]server'"}).Status != StatusCompleted {
		t.Fatal("kill the kept server")
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.execs.PruneKept(); len(s.execs.Kept()) > 0; s.execs.PruneKept() {
		if time.Now().After(deadline) {
			t.Fatal("the kept group was never freed after its processes exited")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKeptGroupsAreBounded: at most execrun.MaxKeptGroups executions keep
// processes per sandbox; the next is refused until one ends. A killed
// (timed out) execution keeps nothing.
func TestKeptGroupsAreBounded(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	for i := range execrun.MaxKeptGroups {
		if r := run(t, s, ExecRequest{Command: "sleep 600 >/dev/null 2>&1 &", Keep: true}); !r.Kept {
			t.Fatalf("keep %d: %+v", i, r)
		}
	}
	_, err := s.Exec(context.Background(), ExecRequest{Command: "sleep 600 &", Keep: true})
	var fe *fault.Error
	if !asFault(err, &fe) || fe.Kind != fault.RateLimited || !strings.Contains(fe.Msg, "kept") {
		t.Fatalf("keep past the cap: %v, want a rate-limit refusal naming kept processes", err)
	}
	if r := run(t, s, ExecRequest{Command: "echo plain"}); r.Status != StatusCompleted {
		t.Fatalf("a plain exec at the cap: %+v", r)
	}
	// A keep exec answers once its main shell exits, which may be before
	// the child it put in the background has become sleep (under load it
	// can still be a forked bash): wait until all of them are sleeps, or
	// pkill misses one and it is still there at the end.
	want := strconv.Itoa(execrun.MaxKeptGroups)
	testenv.Eventually(t, "every kept sleep has started", func() bool {
		return strings.TrimSpace(run(t, s, ExecRequest{Command: "pgrep -c -x sleep"}).Stdout) == want
	})
	run(t, s, ExecRequest{Command: "pkill -x sleep"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.Exec(context.Background(), ExecRequest{Command: "true", Keep: true})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keep after the kept processes ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := run(t, s, ExecRequest{Command: "sleep 300 & sleep 300", Keep: true, Timeout: time.Second})
	if r.Status != StatusTimedOut || r.Kept {
		t.Fatalf("a timed-out keep exec: %+v, want timed out and nothing kept", r)
	}
	// Its processes are killed with its group; the one it put in the
	// background is the init's child by then, reaped as it dies (pgrep
	// lists it until then), so this waits for that, not for a time.
	testenv.Eventually(t, "a timed-out keep exec leaves nothing running", func() bool {
		left := run(t, s, ExecRequest{Command: "pgrep -x sleep || echo none"})
		return strings.TrimSpace(left.Stdout) == "none"
	})
}
