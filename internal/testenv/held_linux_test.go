package testenv

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestStartHeldChildOutlivesEndedThreads: goroutines that lock their
// thread and return end those threads; a child with a Pdeathsig started by
// StartHeld is not among their victims, and is waited for.
func TestStartHeldChildOutlivesEndedThreads(t *testing.T) {
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	exited, err := StartHeld(cmd)
	if err != nil {
		t.Skipf("cannot start /bin/sleep: %v", err)
	}
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: the runtime ends this thread
		}()
	}
	wg.Wait()
	select {
	case <-exited:
		t.Fatal("the child died when other goroutines' threads ended")
	case <-time.After(200 * time.Millisecond):
	}
	_ = cmd.Process.Kill()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the child's exit was not seen")
	}
}
