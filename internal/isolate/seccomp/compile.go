package seccomp

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	libseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// errUnsupportedArch is returned on anything but amd64: the table names
// x86-64 syscalls and the architecture check compiled in is x86-64's.
var errUnsupportedArch = errors.New("seccomp policy is written for linux/amd64 only")

// Offsets in struct seccomp_data, and the little-endian halves of an
// argument (amd64 only, see errUnsupportedArch).
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// Program shape limits.
const (
	// maxJump is the longest conditional jump classic BPF can encode.
	maxJump = 255
	// maxConds caps the conditions in one alternative at one per syscall
	// argument; more would be a table mistake.
	maxConds = 6
)

// Assemble compiles the policy into the BPF program Install loads:
//
//  1. the audit architecture must be AUDIT_ARCH_X86_64, anything else (the
//     i386 entry through int $0x80, with its own syscall numbers) gets the
//     default action;
//  2. x32 syscall numbers (bit 0x40000000) get ENOSYS;
//  3. the table rows in order: an unconditioned row is a run of
//     jeq-number comparisons ending in its action; a conditioned row is a
//     block entered only for its syscall that returns the action when an
//     alternative holds and otherwise reloads the syscall number before the
//     next row;
//  4. the default action.
//
// The syscall numbers, audit architecture and action values come from
// github.com/elastic/go-seccomp-bpf. Its own Policy.Assemble is not used:
// in v1.6.0, when a syscall's argument conditions fail, the accumulator
// still holds the last argument word and the following groups compare that
// word as if it were the syscall number (so, for example, a denied ioctl
// whose request number happened to equal an allowed syscall's number would
// be judged as that syscall).
func Assemble() ([]bpf.Instruction, error) {
	return assemble(Policy())
}

func assemble(t Table) ([]bpf.Instruction, error) {
	if runtime.GOARCH != "amd64" {
		return nil, errUnsupportedArch
	}
	info := arch.X86_64
	def, err := t.Default.ret()
	if err != nil {
		return nil, fmt.Errorf("default action: %w", err)
	}
	enosys, _ := DenyENOSYS.ret()
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		def,
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(arch.X32.SeccompMask), SkipFalse: 1}, //nolint:gosec // G115: a table constant, 0x40000000
		enosys,
	}
	for i, r := range t.Rules {
		if r.Action == t.Default && len(r.When) == 0 {
			continue // documentation only: same outcome as the default
		}
		act, err := r.Action.ret()
		if err != nil {
			return nil, fmt.Errorf("rule %d (%s): %w", i, r.Why, err)
		}
		nums, err := syscallNumbers(info, r.Names)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		var block []bpf.Instruction
		if len(r.When) == 0 {
			block, err = matchAny(nums, act)
		} else {
			for _, nr := range nums {
				b, err := conditioned(nr, r.When, act)
				if err != nil {
					return nil, fmt.Errorf("rule %d (%v): %w", i, r.Names, err)
				}
				block = append(block, b...)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		prog = append(prog, block...)
	}
	prog = append(prog, def)
	if len(prog) > bpfMaxInsns {
		return nil, fmt.Errorf("program has %d instructions, the kernel takes %d", len(prog), bpfMaxInsns)
	}
	return prog, nil
}

// bpfMaxInsns is BPF_MAXINSNS, the kernel's limit for a classic program.
const bpfMaxInsns = 4096

func syscallNumbers(info *arch.Info, names []string) ([]uint32, error) {
	if len(names) == 0 {
		return nil, errors.New("row names no syscall")
	}
	seen := map[string]bool{}
	out := make([]uint32, 0, len(names))
	for _, name := range names {
		if seen[name] {
			return nil, fmt.Errorf("syscall %s listed twice", name)
		}
		seen[name] = true
		nr, ok := info.SyscallNames[name]
		if !ok {
			return nil, fmt.Errorf("no syscall %q on %s", name, info.Name)
		}
		if nr < 0 || nr > math.MaxUint32 {
			return nil, fmt.Errorf("syscall %s has number %d on %s", name, nr, info.Name)
		}
		out = append(out, uint32(nr))
	}
	return out, nil
}

// matchAny: "if nr is one of nums, return act", falling through otherwise.
func matchAny(nums []uint32, act bpf.Instruction) ([]bpf.Instruction, error) {
	if len(nums)-1 > maxJump {
		return nil, fmt.Errorf("%d syscalls in one row; split it (at most %d)", len(nums), maxJump+1)
	}
	out := make([]bpf.Instruction, 0, len(nums)+1)
	for i, nr := range nums {
		j := bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(len(nums) - 1 - i)} //nolint:gosec // G115: len(nums)-1 <= maxJump (255), checked above
		if i == len(nums)-1 {
			j.SkipFalse = 1 // over the return
		}
		out = append(out, j)
	}
	return append(out, act), nil
}

// conditioned: "if nr matches and any alternative holds, return act";
// otherwise reload the syscall number and fall through.
func conditioned(nr uint32, alts [][]Cond, act bpf.Instruction) ([]bpf.Instruction, error) {
	var body []bpf.Instruction
	for _, alt := range alts {
		a, err := alternative(alt, act)
		if err != nil {
			return nil, err
		}
		body = append(body, a...)
	}
	// Every path that leaves body without returning ends here.
	body = append(body, bpf.LoadAbsolute{Off: offNr, Size: 4})
	if len(body) > maxJump {
		return nil, fmt.Errorf("conditions compile to %d instructions, more than a jump can skip", len(body))
	}
	return append([]bpf.Instruction{
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: uint8(len(body))}, //nolint:gosec // G115: len(body) <= maxJump (255), checked above
	}, body...), nil
}

// fail marks a jump whose true (or false) branch must land just past the
// alternative's return, where the next alternative (or the reload) starts.
type fail int

const (
	failNone fail = iota
	failTrue
	failFalse
)

// alternative: all conditions must hold to reach act; any failing one
// jumps past act.
func alternative(alt []Cond, act bpf.Instruction) ([]bpf.Instruction, error) {
	if len(alt) == 0 || len(alt) > maxConds {
		return nil, fmt.Errorf("alternative with %d conditions (want 1..%d)", len(alt), maxConds)
	}
	var ins []bpf.Instruction
	var marks []fail
	emit := func(i bpf.Instruction, f fail) { ins = append(ins, i); marks = append(marks, f) }
	for _, c := range alt {
		if c.Arg > 5 {
			return nil, fmt.Errorf("argument index %d out of range", c.Arg)
		}
		lo := bpf.LoadAbsolute{Off: offArgs + 8*c.Arg, Size: 4}
		hi := bpf.LoadAbsolute{Off: offArgs + 8*c.Arg + 4, Size: 4}
		vlo, vhi := uint32(c.Value), uint32(c.Value>>32) //nolint:gosec // G115: splitting the 64-bit word into halves; truncation intended
		switch c.Op {
		case Equal:
			emit(hi, failNone)
			emit(bpf.JumpIf{Cond: bpf.JumpEqual, Val: vhi}, failFalse)
			emit(lo, failNone)
			emit(bpf.JumpIf{Cond: bpf.JumpEqual, Val: vlo}, failFalse)
		case EqualLow32:
			if vhi != 0 {
				return nil, errors.New("EqualLow32 with a value above 32 bits never holds")
			}
			emit(lo, failNone)
			emit(bpf.JumpIf{Cond: bpf.JumpEqual, Val: vlo}, failFalse)
		case MaskedEqualLow32:
			if c.Mask == 0 || vhi != 0 || vlo&^c.Mask != 0 {
				return nil, errors.New("MaskedEqualLow32 with an empty mask or a value outside it never holds")
			}
			emit(lo, failNone)
			emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: c.Mask}, failNone)
			emit(bpf.JumpIf{Cond: bpf.JumpEqual, Val: vlo}, failFalse)
		case BitsClear:
			if c.Value == 0 {
				return nil, errors.New("BitsClear with an empty mask always holds")
			}
			if vhi != 0 {
				emit(hi, failNone)
				emit(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: vhi}, failTrue)
			}
			if vlo != 0 {
				emit(lo, failNone)
				emit(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: vlo}, failTrue)
			}
		case BitsAny:
			switch {
			case vhi != 0 && vlo != 0:
				emit(hi, failNone)
				emit(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: vhi, SkipTrue: 2}, failNone) // hold: skip the low test
				emit(lo, failNone)
				emit(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: vlo}, failFalse)
			case vhi != 0:
				emit(hi, failNone)
				emit(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: vhi}, failFalse)
			case vlo != 0:
				emit(lo, failNone)
				emit(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: vlo}, failFalse)
			default:
				return nil, errors.New("BitsAny with an empty mask never holds")
			}
		default:
			return nil, fmt.Errorf("unknown operation %d", int(c.Op))
		}
	}
	emit(act, failNone)
	end := len(ins) // the first instruction after this alternative
	for i, f := range marks {
		if f == failNone {
			continue
		}
		skip := end - i - 1
		if skip > maxJump {
			return nil, fmt.Errorf("alternative too long to jump over (%d)", skip)
		}
		j := ins[i].(bpf.JumpIf)
		if f == failTrue {
			j.SkipTrue = uint8(skip)
		} else {
			j.SkipFalse = uint8(skip)
		}
		ins[i] = j
	}
	return ins, nil
}

// ret is the return instruction for an action.
func (a Action) ret() (bpf.Instruction, error) {
	const errnoEPERM = 1
	switch a {
	case Allow:
		return bpf.RetConstant{Val: uint32(libseccomp.ActionAllow)}, nil
	case DenyEPERM:
		return bpf.RetConstant{Val: uint32(libseccomp.ActionErrno) | errnoEPERM}, nil
	case DenyENOSYS:
		return bpf.RetConstant{Val: uint32(libseccomp.ActionErrno) | errnoENOSYS}, nil
	}
	return nil, fmt.Errorf("unknown action %d", int(a))
}
