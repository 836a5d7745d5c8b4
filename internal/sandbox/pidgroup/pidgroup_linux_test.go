package pidgroup

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestPinKeepsOnlyProcessesStillListed: Pin reads each listed process's
// group and pid (here this test's own, in its own pid namespace), drops a
// pid that is gone, and drops one the second listing no longer has.
func TestPinKeepsOnlyProcessesStillListed(t *testing.T) {
	self := os.Getpid()
	ms, err := Pin(func() ([]int, error) { return []int{self, 1 << 30}, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer Close(ms)
	if len(ms) != 1 || ms[0].Pid != self || ms[0].Pgid != syscall.Getpgrp() || ms[0].NSpid != self {
		t.Fatalf("members %+v; want this process (pid %d, group %d)", ms, self, syscall.Getpgrp())
	}
	if n := Send(ms, 0, func(Member) bool { return true }); n != 1 {
		t.Fatalf("signal 0 reached %d members, want 1", n)
	}
	calls := 0
	left, err := Pin(func() ([]int, error) {
		calls++
		if calls == 1 {
			return []int{self}, nil
		}
		return nil, nil
	})
	if err != nil || len(left) != 0 {
		t.Fatalf("a process gone from the second listing was kept: %+v, %v", left, err)
	}
	wantErr := errors.New("listing failed")
	if _, err := Pin(func() ([]int, error) { return nil, wantErr }); !errors.Is(err, wantErr) {
		t.Fatalf("a failed listing: %v", err)
	}
}
