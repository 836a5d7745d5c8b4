package shell

import (
	"context"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// bashSession returns a bash session the caller may see.
func (t toolset) bashSession(ctx context.Context, c auth.Caller, sbID, id string) (*BashSession, error) {
	sb, err := t.resolve(ctx, c, sbID)
	if err != nil {
		return nil, err
	}
	return t.Service.Bash(c, sb, id)
}

func (t toolset) bashExec() dispatch.Tool {
	spec := aio("Run a command as its own process (separate stdout/stderr, byte offsets)", guard.Safe, ratelimit.Exec, nil)
	spec.Commands = dispatch.RecordFirst // its record is durable before the run starts
	return dispatch.Define(ToolBashExec, spec,
		func(ctx context.Context, c auth.Caller, a BashExecArgs) (BashExecResult, error) {
			sb, err := t.resolve(ctx, c, a.Sandbox)
			if err != nil {
				return BashExecResult{}, err
			}
			b, err := t.Service.ExecBash(c, sb, str(a.SessionID), str(a.ExecDir))
			if err != nil {
				return BashExecResult{}, err
			}
			cmd, err := b.run(ctx, sb, BashRun{Command: a.Command, Dir: str(a.ExecDir), Env: a.Env, Hard: secondsOf(a.HardTimeout), Privileged: c.IsAdmin()})
			if err != nil {
				return BashExecResult{}, err
			}
			limit := DefaultMaxOutput
			if a.MaxOutputLength != nil {
				limit = *a.MaxOutputLength
			}
			if !a.AsyncMode {
				soft := secondsOf(a.Timeout)
				if soft <= 0 {
					soft = MaxWait
				}
				tm := time.NewTimer(soft)
				select {
				case <-cmd.done:
				case <-tm.C:
				case <-ctx.Done():
				}
				tm.Stop()
			}
			res := BashExecResult{SessionID: b.ID, CommandID: cmd.ID, Command: cmd.Command, Status: cmd.Status(), ExitCode: cmd.ExitCode(),
				Offset: cmd.Stdout.Total(), StderrOffset: cmd.Stderr.Total()}
			if !a.AsyncMode {
				out, _ := cmd.Stdout.Text()
				errOut, _ := cmd.Stderr.Text()
				out = truncateMiddle(strings.ToValidUTF8(out, "\uFFFD"), limit)
				errOut = truncateMiddle(strings.ToValidUTF8(errOut, "\uFFFD"), limit)
				res.Stdout, res.Stderr = &out, &errOut
			}
			return res, nil
		}, dispatch.Hooks[BashExecArgs, BashExecResult]{
			Assess: func(a BashExecArgs) dispatch.Assessment { return t.assessIn(a.Command, str(a.ExecDir)) },
			Describe: func(a BashExecArgs) dispatch.Target {
				return target(a.Sandbox, a.Command, map[string]any{"session": str(a.SessionID), "async": a.AsyncMode})
			},
			Summarize: func(_ BashExecArgs, r BashExecResult) map[string]any {
				out := map[string]any{"status": r.Status, "command_id": r.CommandID, "session": r.SessionID}
				if r.ExitCode != nil {
					out["exit_code"] = *r.ExitCode
				}
				return out
			},
		})
}

// defaultOutputWait is how long /v1/bash/output waits for more output
// when asked to wait without a wait_timeout.
const defaultOutputWait = 30 * time.Second

func (t toolset) bashOutput() dispatch.Tool {
	return dispatch.Define(ToolBashOutput, aio("Read a command's output from byte offsets, optionally waiting for more", guard.Safe, 0, viewers),
		func(ctx context.Context, c auth.Caller, a BashOutputArgs) (BashOutputResult, error) {
			b, err := t.bashSession(ctx, c, a.Sandbox, a.SessionID)
			if err != nil {
				return BashOutputResult{}, err
			}
			cmd, err := b.command(str(a.CommandID))
			if err != nil {
				if fault.Is(err, fault.NotFound) && str(a.CommandID) == "" {
					return BashOutputResult{SessionID: b.ID, Offset: a.Offset, StderrOffset: a.StderrOffset}, nil
				}
				return BashOutputResult{}, err
			}
			if a.Wait {
				wait := defaultOutputWait
				if a.WaitTimeout != nil {
					wait = secondsOf(a.WaitTimeout)
				}
				outCh, _ := cmd.Stdout.Wait()
				errCh, _ := cmd.Stderr.Wait()
				if cmd.Stdout.Total() <= a.Offset && cmd.Stderr.Total() <= a.StderrOffset {
					tm := time.NewTimer(wait)
					select {
					case <-cmd.done:
					case <-outCh:
					case <-errCh:
					case <-ctx.Done():
					case <-tm.C:
					}
					tm.Stop()
				}
			}
			out, next, d1 := cmd.Stdout.ReadAt(a.Offset, maxOutputRead)
			errOut, nextErr, d2 := cmd.Stderr.ReadAt(a.StderrOffset, maxOutputRead)
			return BashOutputResult{SessionID: b.ID, Stdout: string(out), Stderr: string(errOut), Offset: next, StderrOffset: nextErr,
				Dropped: d1 + d2, Command: &BashCommandInfo{CommandID: cmd.ID, Command: cmd.Command, Status: cmd.Status(), ExitCode: cmd.ExitCode()}}, nil
		}, dispatch.Hooks[BashOutputArgs, BashOutputResult]{
			Describe: func(a BashOutputArgs) dispatch.Target { return target(a.Sandbox, str(a.CommandID), nil) },
		})
}

// BashWriteResult is bash.write's answer.
type BashWriteResult struct {
	CommandID    string `json:"command_id"`
	BytesWritten int    `json:"bytes_written"`
}

func (t toolset) bashWrite() dispatch.Tool {
	// Safe by itself: the lines it completes are admitted (assessed,
	// recorded) by shell.input before they are written.
	return dispatch.Define(ToolBashWrite, aio("Write to a running command's stdin", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a BashWriteArgs) (BashWriteResult, error) {
			b, err := t.bashSession(ctx, c, a.Sandbox, a.SessionID)
			if err != nil {
				return BashWriteResult{}, err
			}
			cmd, err := b.command(str(a.CommandID))
			if err != nil {
				return BashWriteResult{}, err
			}
			d, dc, ok := dispatch.Within(ctx)
			if !ok {
				return BashWriteResult{}, errOutsideCall
			}
			to := inputTarget{sandbox: b.Sandbox, session: b.ID, command: cmd.ID, via: ToolBashWrite.Name()}
			if err := typeInto(ctx, d, dc, &cmd.in, to, []byte(a.Input), cmd.WriteStdin); err != nil {
				return BashWriteResult{}, err
			}
			return BashWriteResult{CommandID: cmd.ID, BytesWritten: len(a.Input)}, nil
		}, dispatch.Hooks[BashWriteArgs, BashWriteResult]{
			Describe: func(a BashWriteArgs) dispatch.Target {
				return target(a.Sandbox, str(a.CommandID), map[string]any{"session": a.SessionID, "bytes": len(a.Input)})
			},
		})
}

// killGrace is how long bash.kill waits for the process to act on the
// signal, so the answer usually carries the outcome.
const killGrace = 2 * time.Second

func (t toolset) bashKill() dispatch.Tool {
	return dispatch.Define(ToolBashKill, aio("Signal a session's current (or a given) command", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a BashKillArgs) (BashCommandInfo, error) {
			b, err := t.bashSession(ctx, c, a.Sandbox, a.SessionID)
			if err != nil {
				return BashCommandInfo{}, err
			}
			cmd, err := b.command(str(a.CommandID))
			if err != nil {
				return BashCommandInfo{}, err
			}
			cmd.Signal(signals[strings.ToUpper(a.Signal)])
			tm := time.NewTimer(killGrace)
			select {
			case <-cmd.done:
			case <-tm.C:
			case <-ctx.Done():
			}
			tm.Stop()
			return BashCommandInfo{CommandID: cmd.ID, Command: cmd.Command, Status: cmd.Status(), ExitCode: cmd.ExitCode()}, nil
		}, dispatch.Hooks[BashKillArgs, BashCommandInfo]{
			Describe: func(a BashKillArgs) dispatch.Target {
				return target(a.Sandbox, str(a.CommandID), map[string]any{"session": a.SessionID, "signal": a.Signal})
			},
		})
}

func (t toolset) bashList() dispatch.Tool {
	return dispatch.Define(ToolBashList, aio("List bash sessions", guard.Safe, 0, viewers),
		func(ctx context.Context, c auth.Caller, a ListArgs) ([]BashInfo, error) {
			sb, err := t.resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			return t.Service.ListBash(c, sb), nil
		}, dispatch.Hooks[ListArgs, []BashInfo]{})
}

func (t toolset) bashCreate() dispatch.Tool {
	return dispatch.Define(ToolBashCreate, aio("Create a bash session (a default working directory for its commands)", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a BashCreateArgs) (BashInfo, error) {
			sb, err := t.resolve(ctx, c, a.Sandbox)
			if err != nil {
				return BashInfo{}, err
			}
			b, err := t.Service.CreateBash(c, sb, str(a.SessionID), str(a.ExecDir))
			if err != nil {
				return BashInfo{}, err
			}
			return b.Info(), nil
		}, dispatch.Hooks[BashCreateArgs, BashInfo]{})
}

func (t toolset) bashClose() dispatch.Tool {
	return dispatch.Define(ToolBashClose, aio("Close a bash session and kill its commands", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a BashSessionArgs) (Empty, error) {
			sb, err := t.resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			return nil, t.Service.CloseBash(c, sb, a.SessionID)
		}, dispatch.Hooks[BashSessionArgs, Empty]{})
}
