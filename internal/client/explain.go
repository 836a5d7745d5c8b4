package client

import (
	"fmt"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Reasons the server gives for ending an execution (internal/sandbox).
const (
	ReasonTimeout = "timeout"
	ReasonCPU     = "cpu_time"
	ReasonMemory  = "memory"
	ReasonClient  = "client"
)

// Exit statuses of an execution the server ended.
const (
	ExitTimeout = 124 // timeout(1)'s
	ExitCPU     = 128 + int(syscall.SIGXCPU)
	ExitKilled  = 128 + int(syscall.SIGKILL)
)

// DefaultTimeout is the server's wall limit of a command that names none.
const DefaultTimeout = 60 * time.Second

// Explain says in one line why an execution that did not end on its own
// ended: which limit, its value and the flag that raises it, or who killed
// it. timeout is the wall limit the command ran with (0: unknown); lim are
// the sandbox's limits (nil: unknown). "" when the command ended by itself
// or the caller ended it.
func Explain(r ExecResult, timeout time.Duration, lim *SandboxLimits) string {
	switch {
	case r.Status == "timed_out" || r.Reason == ReasonTimeout:
		of := ""
		if timeout > 0 {
			of = " of " + timeout.String()
		}
		return "timed out: the command ran past its wall limit" + of + " and was killed (raise it with `exec --timeout SECONDS`, at most 600)"
	case r.Reason == ReasonCPU:
		of := ""
		if lim != nil && lim.CPUTime > 0 {
			of = " " + time.Duration(lim.CPUTime).String()
		}
		return "killed: per-command CPU limit" + of + " (raise with `create --cpu-time`)"
	case r.Reason == ReasonMemory:
		of := ""
		if lim != nil && lim.MemoryBytes > 0 {
			of = " of " + IBytes(lim.MemoryBytes)
		}
		return "killed: out of memory, the sandbox's memory limit" + of + " (raise with `create --memory`)"
	case r.Status == "killed" && r.Reason != "" && r.Reason != ReasonClient:
		return "killed: " + Escape(r.Reason)
	case r.Signal == int(syscall.SIGKILL) && r.Reason != ReasonClient:
		return "killed by SIGKILL: by a kill, or the sandbox ran out of memory"
	case r.Signal > 0 && r.Reason != ReasonClient:
		return fmt.Sprintf("killed by signal %d (%s)", r.Signal, signalName(r.Signal))
	}
	return ""
}

func signalName(n int) string {
	if s := unix.SignalName(syscall.Signal(n)); s != "" {
		return s
	}
	return "signal " + strconv.Itoa(n)
}
