package sandbox

import (
	"context"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

// TestPidsAllowanceRaisesAndReturns: a companion's allowance raises both
// pids limits while held, so the sandbox's commands keep their own budget
// beside it, and the limits are the spec's again once it is returned (twice
// is once).
func TestPidsAllowanceRaisesAndReturns(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{Limits: Limits{Pids: 4}})

	// bash + 3 sleeps: the whole budget of 4.
	bg, err := s.Exec(context.Background(), ExecRequest{Command: "for i in 1 2 3; do sleep 60 & done; wait", Background: true})
	if err != nil {
		t.Fatalf("background exec: %v", err)
	}
	t.Cleanup(bg.Kill)
	waitUserPids(t, s, 4)
	refused := func(when string) {
		t.Helper()
		_, err := s.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/true"}})
		var fe *fault.Error
		if !asFault(err, &fe) || fe.Kind != fault.RateLimited {
			t.Fatalf("%s: a process past the limit got %v, want rate_limited", when, err)
		}
	}
	refused("before the grant")

	release, err := s.GrantPids(8)
	if err != nil {
		t.Fatalf("GrantPids: %v", err)
	}
	if st, err := s.userGroup().Stats(); err != nil || st.PidsLimit != 4+8 {
		t.Fatalf("user group pids limit with the allowance: %d, %v; want 12", st.PidsLimit, err)
	}
	if st, err := s.cgroupGroup().Stats(); err != nil || st.PidsLimit != 4+8+initPidsReserve {
		t.Fatalf("sandbox group pids limit with the allowance: %d, %v", st.PidsLimit, err)
	}
	if r := run(t, s, ExecRequest{Argv: []string{"/bin/true"}}); r.Status != StatusCompleted || *r.ExitCode != 0 {
		t.Fatalf("a command within the allowance: %+v", r)
	}

	release()
	release()
	if st, err := s.userGroup().Stats(); err != nil || st.PidsLimit != 4 {
		t.Fatalf("user group pids limit after the release: %d, %v; want 4", st.PidsLimit, err)
	}
	if st, err := s.cgroupGroup().Stats(); err != nil || st.PidsLimit != 4+initPidsReserve {
		t.Fatalf("sandbox group pids limit after the release: %d, %v", st.PidsLimit, err)
	}
	refused("after the release")
}
