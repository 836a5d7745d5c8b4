package sandbox

import (
	"context"
	"syscall"

	"github.com/sandhold/sandhold/internal/fault"
)

// Signal delivers sig to the process, or to its whole process group when
// group is set, inside the sandbox (the init sends it). Capabilities that
// run long-lived processes use it for SIGINT/SIGTERM before Kill.
func (p *Proc) Signal(ctx context.Context, sig syscall.Signal, group bool) error {
	return p.s.signal(ctx, p.Pid, sig, group)
}

// SignalGroup delivers sig to process group pgid, numbered as the sandbox
// sees it (see ForegroundGroup).
func (p *Proc) SignalGroup(ctx context.Context, pgid int, sig syscall.Signal) error {
	return p.s.signal(ctx, pgid, sig, true)
}

func (s *Sandbox) signal(ctx context.Context, pid int, sig syscall.Signal, group bool) error {
	s.mu.Lock()
	inst := s.inst
	s.mu.Unlock()
	if inst == nil {
		return fault.New(fault.Unavailable, "the sandbox stopped")
	}
	return inst.Signal(ctx, pid, int(sig), group)
}
