package sandbox

import (
	"context"
	"testing"
	"time"
)

// TestCancelledCallerKillsItsExecution: a foreground execution is
// supervised on its caller's goroutine; a caller that goes away (its ctx
// cancelled) still kills the whole tree and gets the execution back as
// killed by the client, and a kill from elsewhere (HALT, revocation) still
// reaches it.
func TestCancelledCallerKillsItsExecution(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	e, err := s.Exec(ctx, ExecRequest{Command: "sleep 60 & sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	r := e.Result()
	if r.Status != StatusKilled || r.Reason != ReasonClient {
		t.Fatalf("result %+v, want killed by the client", r)
	}
	select {
	case <-e.Done():
	default:
		t.Fatal("Exec returned before the execution was done")
	}
	if r := run(t, s, ExecRequest{Command: "pgrep -c sleep || true"}); r.Stdout != "0\n" {
		t.Fatalf("sleeps left behind: %q", r.Stdout)
	}

	done := make(chan *Execution, 1)
	go func() {
		e, err := s.Exec(context.Background(), ExecRequest{Command: "sleep 60"})
		if err != nil {
			t.Error(err)
		}
		done <- e
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.runningCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the execution never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.execs.KillAll(ReasonTimeout)
	e = <-done
	if e == nil {
		t.FailNow()
	}
	if r := e.Result(); r.Status != StatusKilled || r.Reason != ReasonTimeout {
		t.Fatalf("result %+v, want killed with the given reason", r)
	}
}

// runningCount is how many executions are running.
func (s *Sandbox) runningCount() int {
	return s.execs.Running()
}
