package sandbox

import (
	"github.com/sandhold/sandhold/internal/outbuf"
)

// NewOutput makes a stream of at most limit kept bytes charged to the
// sandbox owner's share of the server's output budget (Config.OutputBudget).
func (s *Sandbox) NewOutput(limit int) *outbuf.Output {
	return s.m.cfg.OutputBudget.NewOutput(s.rec.Owner, limit)
}

// NewOutput is the sandbox's NewOutput, for a capability that keeps the
// process's output itself (shell sessions).
func (p *Proc) NewOutput(limit int) *outbuf.Output { return p.s.NewOutput(limit) }
