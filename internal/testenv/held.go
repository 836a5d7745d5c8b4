package testenv

import (
	"os/exec"
	"runtime"
)

// StartHeld starts cmd from an OS thread that stays alive until cmd exits,
// and returns a channel closed once cmd has been waited for.
//
// A child's Pdeathsig (the test helpers' way of not outliving a killed
// test binary) fires when the *thread* that forked it ends, not the
// process. Go ends a thread when a goroutine locked to it returns without
// unlocking — the sandbox launcher's thread does, when its server closes —
// and that thread may be one that earlier ran some other goroutine's fork:
// a shared PostgreSQL then got SIGQUIT in the middle of another test ("the
// database system is shutting down"). The goroutine here locks its thread
// before the fork and keeps it until the child is gone, so no other
// goroutine can end it under the child.
func StartHeld(cmd *exec.Cmd) (<-chan struct{}, error) {
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}
