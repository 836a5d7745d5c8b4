package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/sandhold/sandhold/internal/client"
)

// commandExit passes a remote command's exit status on as sandhold's own,
// without a message of sandhold's (main exits with code, silently).
type commandExit struct{ code int }

func (c *commandExit) Error() string { return fmt.Sprintf("the command exited with status %d", c.code) }

// maxExecStdin bounds what -i sends: the server takes stdin in the JSON
// request, which its body cap bounds anyway.
const maxExecStdin = 8 << 20

type clientExecCmd struct {
	execFlags `embed:""`
	Args      []string `arg:"" optional:"" passthrough:"all" help:"SB -- CMD ARGS… (or CMD ARGS… with -s or a default sandbox)."`
}

// execFlags are exec's options. They may also come between the sandbox
// and "--" (sandhold exec SB --timeout 90 -- CMD), where kong's
// passthrough leaves them to splitExecArgs.
type execFlags struct {
	Sandbox    string            `name:"sandbox" short:"s" help:"Sandbox to run in (instead of the first argument)."`
	Cwd        string            `help:"Working directory inside the sandbox (default /workspace)."`
	Env        map[string]string `short:"e" help:"Environment variable KEY=VALUE; repeatable."`
	Timeout    float64           `help:"Wall timeout in seconds (server default 60, max 600; a -d command in a sandbox with a --ttl has none unless given)."`
	Stdin      bool              `short:"i" name:"stdin" help:"Send this process's standard input to the command."`
	Background bool              `short:"d" name:"detach" help:"Start the command in the background and print its command id (read it with sandhold logs)."`
	// WaitApproval holds the call until an operator decides, where the
	// policy sends it to one.
	WaitApproval bool `name:"wait-approval" help:"If the call needs an operator's approval, wait for the decision (then run, or exit 77 with the operator's note) instead of exiting 75 with the approval id."`
}

// approvalHold is how long one request asks the server to hold a call for
// an operator's decision (the server caps it; the client asks again).
const approvalHold = 60 * time.Second

// execFieldFlags name exec's flags by the request field the server names.
var execFieldFlags = map[string]string{"timeout": "--timeout", "cwd": "--cwd", "env": "-e", "stdin": "-i", "argv": "the command"}

// parseExecFlags reads exec's flags written between the sandbox and "--"
// into f (flags given there win over ones given before the sandbox).
func parseExecFlags(args []string, f *execFlags) error {
	var late struct {
		execFlags `embed:""`
	}
	p, err := kong.New(&late, kong.Name("sandhold exec"), kong.Exit(func(int) {}))
	if err != nil {
		return err
	}
	if _, err := p.Parse(args); err != nil {
		return &exitError{code: 2, err: fmt.Errorf("exec: %w (flags go before --; the command after it)", err)}
	}
	l := late.execFlags
	if l.Sandbox != "" {
		f.Sandbox = l.Sandbox
	}
	if l.Cwd != "" {
		f.Cwd = l.Cwd
	}
	for k, v := range l.Env {
		if f.Env == nil {
			f.Env = map[string]string{}
		}
		f.Env[k] = v
	}
	if l.Timeout != 0 {
		f.Timeout = l.Timeout
	}
	f.Stdin = f.Stdin || l.Stdin
	f.Background = f.Background || l.Background
	f.WaitApproval = f.WaitApproval || l.WaitApproval
	return nil
}

// splitExecArgs reads "SB -- CMD…", "SB FLAGS -- CMD…", "SB CMD…",
// "-- CMD…" (default sandbox) or "CMD…" with -s. flags are what stood
// between SB and "--" (for parseExecFlags).
func splitExecArgs(args []string, flagSB string) (sb string, flags, argv []string) {
	if flagSB != "" {
		// Every argument is the command's (a leading -- aside).
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		return flagSB, nil, args
	}
	if i := indexOf(args, "--"); i == 0 {
		return "", nil, args[1:]
	}
	if len(args) == 0 {
		return "", nil, nil
	}
	sb, rest := args[0], args[1:]
	if len(rest) > 0 && strings.HasPrefix(rest[0], "-") && rest[0] != "--" {
		// SB -flags… -- CMD: the flags run up to the first "--".
		if i := indexOf(rest, "--"); i > 0 {
			return sb, rest[:i], rest[i+1:]
		}
	}
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	return sb, nil, rest
}

func indexOf(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}

func (x *clientExecCmd) Run(ctx context.Context, e *env) error {
	named, flags, argv := splitExecArgs(x.Args, x.Sandbox)
	if len(flags) > 0 {
		if err := parseExecFlags(flags, &x.execFlags); err != nil {
			return err
		}
		if x.Sandbox != "" {
			named = x.Sandbox
		}
	}
	if len(argv) == 0 {
		return &exitError{code: exitUsage, err: errors.New("no command given: sandhold exec SB -- CMD ARGS…")}
	}
	c, cfg, err := connect()
	if err != nil {
		return err
	}
	sb, err := sandboxOf(ctx, c, named, cfg)
	if err != nil {
		return err
	}
	req := client.ExecRequest{Argv: argv, Cwd: x.Cwd, Env: x.Env}
	if x.Timeout > 0 {
		req.Timeout = &x.Timeout
	}
	if x.Stdin {
		b, err := io.ReadAll(io.LimitReader(os.Stdin, maxExecStdin+1))
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		if len(b) > maxExecStdin {
			return &exitError{code: exitUsage, err: fmt.Errorf("-i: stdin is over %s: copy it in with sandhold cp instead", client.IBytes(maxExecStdin))}
		}
		req.Stdin = string(b)
	}
	if x.WaitApproval {
		c.ApprovalWait = approvalHold
	}
	if x.Background {
		var r client.ExecResult
		err := x.untilDecided(ctx, e, func() (err error) { r, err = c.Start(ctx, sb, req); return err })
		if err != nil {
			return execErr(err, argv, x.Cwd)
		}
		_, err = fmt.Fprintln(e.stdout, client.Escape(r.CommandID))
		return err
	}
	var r client.ExecResult
	err = x.untilDecided(ctx, e, func() (err error) { r, err = c.Exec(ctx, sb, req, e.stdout, e.stderr); return err })
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted here: the closed stream killed the command.
			return &commandExit{code: 130}
		}
		return execErr(err, argv, x.Cwd)
	}
	timeout := client.DefaultTimeout
	if x.Timeout > 0 {
		timeout = time.Duration(x.Timeout * float64(time.Second))
	}
	explainEnd(ctx, e, c, sb, r, timeout)
	if code := r.ExitStatus(); code != 0 {
		return &commandExit{code: code}
	}
	return nil
}

// untilDecided runs call, and with --wait-approval runs it again while the
// server answers that an operator has not decided yet (each try is held
// by the server for the decision; the same pending approval answers).
func (x *clientExecCmd) untilDecided(ctx context.Context, e *env, call func() error) error {
	told := false
	for {
		err := call()
		id, pending := client.IsApprovalPending(err)
		if !pending || !x.WaitApproval || ctx.Err() != nil {
			return err
		}
		if !told {
			told = true
			_, _ = fmt.Fprintf(e.stderr, "sandhold: waiting for an operator's decision on approval %s (Ctrl-C stops waiting)\n", client.Escape(id))
		}
	}
}

// execErr words a refused exec: a command that is not in the sandbox exits
// 127 as in a shell; a refused input names its flag.
func execErr(err error, argv []string, cwd string) error {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Status == http.StatusBadRequest && strings.Contains(ce.Message, "command not found") {
		where := ""
		if cwd != "" {
			where = " (or --cwd " + client.Escape(cwd) + " does not exist)"
		}
		return &exitError{code: exitNotFound, err: fmt.Errorf("%s: command not found in the sandbox%s", client.Escape(argv[0]), where)}
	}
	return flagErr(err, execFieldFlags)
}

// explainEnd says on stderr why a command that did not end by itself
// ended: the limit, its value and how to raise it, or who killed it.
func explainEnd(ctx context.Context, e *env, c *client.Client, sb string, r client.ExecResult, timeout time.Duration) {
	var lim *client.SandboxLimits
	if r.Reason == client.ReasonCPU || r.Reason == client.ReasonMemory {
		if s, err := c.Get(ctx, sb); err == nil {
			lim = &s.Limits
		}
	}
	if why := client.Explain(r, timeout, lim); why != "" {
		_, _ = fmt.Fprintf(e.stderr, "sandhold: %s\n", why)
	}
}

type clientLogsCmd struct {
	Args   []string `arg:"" name:"sandbox-and-command-id" help:"[SB] COMMAND_ID: the id exec -d printed (SB: default the login's)."`
	Follow bool     `short:"f" help:"Keep printing until the command ends; exit with its status, and say why if it did not end by itself."`
}

func (l *clientLogsCmd) Run(ctx context.Context, e *env) error {
	if len(l.Args) > 2 {
		return &exitError{code: exitUsage, err: errors.New("logs takes [SB] COMMAND_ID")}
	}
	c, cfg, err := connect()
	if err != nil {
		return err
	}
	named, cid := "", l.Args[len(l.Args)-1]
	if len(l.Args) == 2 {
		named = l.Args[0]
	}
	sb, err := sandboxOf(ctx, c, named, cfg)
	if err != nil {
		return err
	}
	r, err := c.Logs(ctx, sb, cid, l.Follow, e.stdout, e.stderr)
	if err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C stops following; the command goes on
		}
		return err
	}
	if r.Finished() {
		explainEnd(ctx, e, c, sb, r, 0)
	}
	if l.Follow && r.Finished() {
		if code := r.ExitStatus(); code != 0 {
			return &commandExit{code: code}
		}
	}
	return nil
}

type clientShellCmd struct {
	Sandbox string `arg:"" optional:"" name:"sandbox" help:"Sandbox name or id (default: the login's)."`
	Session string `name:"session" help:"Reattach to this shell session id (printed when you detach)."`
}

func (s *clientShellCmd) Run(ctx context.Context, e *env) error {
	c, cfg, err := connect()
	if err != nil {
		return err
	}
	sb, err := sandboxOf(ctx, c, s.Sandbox, cfg)
	if err != nil {
		return err
	}
	in, out := os.Stdin, os.Stdout
	o := client.ShellOptions{Stdin: in, Stdout: e.stdout, SessionID: s.Session}
	if client.IsTerminal(in.Fd()) {
		o.DetachKeys = client.DefaultDetachKeys
		restore, err := client.MakeRaw(in.Fd())
		if err != nil {
			return err
		}
		defer func() { _ = restore() }()
		// Raw mode: keys make no signals, so Ctrl-C is a byte sent to
		// the sandbox. The process still stops on SIGTERM (main's ctx).
		o.Size = client.TermSize(out.Fd())
		if o.Size.Rows == 0 {
			o.Size = client.TermSize(in.Fd())
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		sizes := make(chan client.Size, 1)
		o.Resize = sizes
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case _, ok := <-winch:
					if !ok {
						return
					}
					sz := client.TermSize(in.Fd())
					select {
					case sizes <- sz:
					default:
					}
				}
			}
		}()
	}
	end, err := c.Shell(ctx, sb, o)
	if end.SessionID != "" && (end.Detached || err != nil) {
		// The session goes on in the sandbox: say how to get back to it.
		how := "detached from"
		if !end.Detached {
			how = "left"
		}
		_, _ = fmt.Fprintf(e.stderr, "\r\nsandhold: %s shell session %s; reattach with: sandhold shell %s --session %s\r\n",
			how, client.Escape(end.SessionID), client.Escape(sb), client.Escape(end.SessionID))
	}
	if err != nil && ctx.Err() != nil {
		return nil
	}
	if err != nil && strings.Contains(err.Error(), "\n") {
		err = errors.New(client.Escape(err.Error()))
	}
	return err
}
