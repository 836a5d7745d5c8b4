package shell

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// ToolInput admits the lines a write of raw input completes (rawinput.go):
// bash.write, shell.write and the terminal dispatch it before the write
// reaches the shell, so every line passes HALT, the policy and the guard
// as exec.run's command does, counts against the command limit, and is
// recorded (redacted) in the audit, several lines of one write in one
// record.
var ToolInput = dispatch.Ref[InputArgs, InputResult]("shell.input")

// Batches of one shell.input call, with their reasons: one audit record
// holds a batch, and a record's detail is capped (16 KiB), so a long paste
// is admitted in several calls rather than recorded truncated.
const (
	maxBatchLines = 64
	maxBatchBytes = 12 << 10
	// maxShownLine is what a record shows of one line (the assessment
	// sees all of it).
	maxShownLine = 1 << 10
)

// inputGate is the raw input of one session (a PTY shell) or one command
// (a bash pipe's stdin).
type inputGate struct {
	// mu is held from the moment a write is read against the line until
	// it is written or refused, across the dispatched shell.input call:
	// one write at a time, so the lines admitted are the lines written.
	mu sync.Mutex
	d  discipline
}

// idle reports whether no partial line waits in the input (a server-made
// command line may be written: it would otherwise run after that text).
func (g *inputGate) idle() bool {
	if !g.mu.TryLock() {
		return false
	}
	defer g.mu.Unlock()
	return !g.d.pending()
}

// InputArgs are shell.input's arguments: where the lines go and the lines.
type InputArgs struct {
	dispatch.On
	Session string `json:"session" doc:"the shell or bash session"`
	Command string `json:"command_id,omitempty" doc:"for a bash session: the command whose stdin it is"`
	Via     string `json:"via" enum:"shell.write,bash.write,terminal,e2b.process_input" doc:"what wrote the input"`
	Lines   []Line `json:"lines" doc:"the lines the input completes"`
}

// InputResult is shell.input's answer.
type InputResult struct {
	Lines int `json:"lines"`
}

// staged is a write waiting for its shell.input call: the call's run
// writes it (and only a run with it in its context can).
type staged struct {
	g     *inputGate
	in    []byte
	lines []Line
	write func([]byte) error
	after discipline
	done  bool
}

type stagedKey struct{}

// inputTool is shell.input. Its run writes the staged input whose lines
// it was called with; called on its own it has nothing to write.
func (t toolset) inputTool() dispatch.Tool {
	// The lines reach a running shell: their record is durable before
	// they are written.
	return dispatch.Define(ToolInput, dispatch.Spec{Risk: guard.Safe, RiskCeiling: guard.Dangerous, Commands: dispatch.RecordFirst,
		Description: "Admit the lines a write to a shell's input completes (called by shell.write, bash.write and the terminal; each line is assessed like exec.run's command)"},
		func(ctx context.Context, _ auth.Caller, a InputArgs) (InputResult, error) {
			st, _ := ctx.Value(stagedKey{}).(*staged)
			if st == nil || st.done || !slices.Equal(st.lines, a.Lines) {
				return InputResult{}, fault.New(fault.Invalid, "shell.input admits what shell.write, bash.write or a terminal writes; write with one of them")
			}
			if err := st.write(st.in); err != nil {
				return InputResult{}, err
			}
			st.g.d, st.done = st.after, true
			return InputResult{Lines: len(a.Lines)}, nil
		}, dispatch.Hooks[InputArgs, InputResult]{
			Assess: func(a InputArgs) dispatch.Assessment { return t.assessLines(a.Lines) },
			Describe: func(a InputArgs) dispatch.Target {
				shown := make([]string, len(a.Lines))
				opaque := 0
				for i, l := range a.Lines {
					shown[i] = capText(l.Text, maxShownLine)
					if l.Opaque {
						opaque++
					}
				}
				first := ""
				if len(shown) > 0 {
					first = shown[0]
				}
				detail := map[string]any{"session": a.Session, "via": a.Via, "lines": shown}
				if a.Command != "" {
					detail["command_id"] = a.Command
				}
				if opaque > 0 {
					detail["opaque"] = opaque
				}
				return dispatch.Target{Target: first, Sandbox: a.Sandbox, Detail: detail}
			},
		})
}

// assessLines rates lines of input as exec.run rates a command: each
// with the guard; an opaque line is built at run time. The answer is the
// highest tier, with every rule, name and path.
func (t toolset) assessLines(lines []Line) dispatch.Assessment {
	var out dispatch.Assessment
	for _, l := range lines {
		a := t.assess(l.Text)
		if l.Opaque {
			a.Risk, a.Dynamic = guard.Dangerous, true
			a.Reasons = append(a.Reasons, "typed with keys the server cannot replay (history, completion, cursor moves)")
			a.Guard = a.Guard.Merge(&dispatch.GuardVerdict{Risk: guard.Dangerous, Dynamic: true})
		}
		out = out.Merge(a)
	}
	return out
}

// capText is s cut to at most n bytes on a character boundary, marked.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// inputTarget names where a write goes, for shell.input's arguments.
type inputTarget struct {
	sandbox, session, command, via string
}

// typeInto writes in to the input g guards: the lines it completes are
// admitted first by shell.input calls dispatched by d for c (in batches,
// in order); a refused batch stops the write there, and the error says
// how much was written before it. Text after the last submit key is
// written at once (it runs nothing until submitted).
func typeInto(ctx context.Context, d *dispatch.Dispatcher, c auth.Caller, g *inputGate, to inputTarget, in []byte, write func([]byte) error) error {
	if !g.mu.TryLock() {
		return fault.New(fault.Conflict, "an earlier input to this session is still being admitted")
	}
	defer g.mu.Unlock()
	subs, after, err := g.d.feed(in)
	if err != nil {
		return err
	}
	from := 0
	for len(subs) > 0 {
		n, size := 0, 0
		for n < len(subs) && n < maxBatchLines && (n == 0 || size+len(subs[n].line.Text) <= maxBatchBytes) {
			size += len(subs[n].line.Text)
			n++
		}
		batch := subs[:n]
		subs = subs[n:]
		end := batch[n-1].end
		_, state, _ := g.d.feed(in[from:end])
		lines := make([]Line, n)
		for i, s := range batch {
			lines[i] = s.line
		}
		st := &staged{g: g, in: in[from:end], lines: lines, write: write, after: state}
		args := InputArgs{On: dispatch.On{Sandbox: to.sandbox}, Session: to.session, Command: to.command, Via: to.via, Lines: lines}
		_, err := ToolInput.Call(context.WithValue(ctx, stagedKey{}, st), d, c, args)
		if err == nil && !st.done {
			err = fault.New(fault.Internal, "the input was admitted but not written")
		}
		if err != nil {
			if from > 0 {
				return fault.Wrap(fault.KindOf(err), err, fmt.Sprintf("the first %d bytes of the input were written; the rest was not: %s", from, fault.Public(err)))
			}
			return err
		}
		from = end
	}
	if from < len(in) {
		if err := write(in[from:]); err != nil {
			return err
		}
	}
	g.d = after
	return nil
}
