package shell

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
)

// RawInput applies the raw-input rule (rawinput.go, SECURITY.md) to the
// input a capability outside this package writes to a program it started:
// E2B's envd processes (internal/e2b), whose stdin and terminals take raw
// bytes from clients. Each write's completed lines are admitted by a
// dispatched shell.input call before a byte of it reaches the program,
// exactly as for bash.write and the terminal.
type RawInput struct{ g inputGate }

// NewRawInput returns the input rule of a terminal (a PTY, read by a line
// editor) or, with terminal false, of a pipe.
func NewRawInput(terminal bool) *RawInput {
	r := &RawInput{}
	if !terminal {
		r.g.d.mode = pipeInput
	}
	return r
}

// Write has in admitted line by line (shell.input, dispatched by d for c,
// naming the sandbox, the session — the process — and via, the tool that
// wrote) and written with write; see typeInto for what a refusal leaves
// written.
func (r *RawInput) Write(ctx context.Context, d *dispatch.Dispatcher, c auth.Caller, sandboxID, session, via string, in []byte, write func([]byte) error) error {
	return typeInto(ctx, d, c, &r.g, inputTarget{sandbox: sandboxID, session: session, via: via}, in, write)
}
