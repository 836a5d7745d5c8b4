package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/seccomp/compiled"
)

// Available reports whether this kernel can enforce the filter: the seccomp
// syscall exists and supports filter mode with the errno action. It changes
// nothing, so `sandhold doctor` can call it.
func Available() error { return compiled.Available() }

// Install sets no_new_privs and loads the policy on every thread of the
// calling process (SECCOMP_FILTER_FLAG_TSYNC). Threads and processes created
// afterwards inherit the filter. It refuses, changing nothing but possibly
// no_new_privs, when seccomp is unavailable or any thread cannot be
// synchronised. It cannot be undone.
//
// It compiles the policy first; package compiled installs the same program
// from a generated literal, for the sandbox init (see there why).
func Install() error {
	if err := Available(); err != nil {
		return err
	}
	prog, err := Assemble()
	if err != nil {
		return err
	}
	return load(prog)
}

func load(prog []bpf.Instruction) error {
	filter, err := encode(prog)
	if err != nil {
		return err
	}
	return compiled.Load(filter)
}

// encode turns the program into the kernel's instruction format.
func encode(prog []bpf.Instruction) ([]unix.SockFilter, error) {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: encode program: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	return filter, nil
}
