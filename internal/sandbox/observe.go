package sandbox

import (
	"context"
	"sync"
)

// observers are the hooks the server's metrics hang on the manager.
type observers struct {
	// mu guards the hooks.
	mu     sync.Mutex
	exec   func(status string)
	stop   []func(ctx context.Context, s *Sandbox, reason string) // stophook.go
	create CreateHook                                             // createhook.go
}

// OnExecutionEnd calls fn with the status (completed, timed_out, killed)
// of every execution that ends; fn must not block.
func (m *Manager) OnExecutionEnd(fn func(status string)) {
	m.obs.mu.Lock()
	m.obs.exec = fn
	m.obs.mu.Unlock()
}

func (m *Manager) observeExec(status string) {
	m.obs.mu.Lock()
	fn := m.obs.exec
	m.obs.mu.Unlock()
	if fn != nil {
		fn(status)
	}
}

// RunningExecutions is the number of executions running in the sandbox.
func (s *Sandbox) RunningExecutions() int { return s.execs.Running() }
