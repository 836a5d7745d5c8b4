package e2b

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/filesystempb"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/processpb"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// The e2b.* tools: what E2B's API does that no existing tool does. Every
// other E2B call dispatches an existing tool (SECURITY.md lists them all).
var (
	ToolConnect           = dispatch.Ref[ConnectArgs, sandbox.Info]("e2b.connect")
	ToolSetTimeout        = dispatch.Ref[TimeoutArgs, sandbox.Info]("e2b.set_timeout")
	ToolProcessStart      = dispatch.Ref[ProcessStartArgs, ProcessStarted]("e2b.process_start")
	ToolProcessList       = dispatch.Ref[SandboxRef, []*processpb.ProcessInfo]("e2b.process_list")
	ToolProcessConnect    = dispatch.Ref[ProcessRef, ProcessConnected]("e2b.process_connect")
	ToolProcessInput      = dispatch.Ref[ProcessInputArgs, int]("e2b.process_input")
	ToolProcessCloseStdin = dispatch.Ref[ProcessRef, sandbox.Empty]("e2b.process_close_stdin")
	ToolProcessSignal     = dispatch.Ref[ProcessSignalArgs, sandbox.Empty]("e2b.process_signal")
	ToolProcessResize     = dispatch.Ref[ProcessResizeArgs, sandbox.Empty]("e2b.process_resize")
	ToolFSStat            = dispatch.Ref[FSPathArgs, *filesystempb.EntryInfo]("e2b.fs_stat")
	ToolFSList            = dispatch.Ref[FSListArgs, []*filesystempb.EntryInfo]("e2b.fs_list")
	ToolFSMkdir           = dispatch.Ref[FSPathArgs, FSMkdirResult]("e2b.fs_mkdir")
	ToolFSMove            = dispatch.Ref[FSMoveArgs, *filesystempb.EntryInfo]("e2b.fs_move")
	ToolFSRemove          = dispatch.Ref[FSPathArgs, bool]("e2b.fs_remove")
)

// Tools are the e2b.* tools, for the dispatcher.
func (s *Service) Tools() []dispatch.Tool {
	return append(append(s.controlTools(), s.processTools()...), s.fsTools()...)
}

// owner is the sandbox manager's view of c for changes: an admin acts on
// every sandbox, anyone else on its own.
func owner(c auth.Caller) sandbox.Caller { return sandbox.Caller{KeyID: c.KeyID, Admin: c.IsAdmin()} }

// ConnectArgs are e2b.connect's: the sandbox, and the timeout from now it
// is to live at least (whole seconds).
type ConnectArgs struct {
	ID      string `json:"id" required:"true"`
	Seconds int64  `json:"timeout,omitempty" doc:"seconds from now the sandbox lives at least (default 300, at most 86400); a longer timeout is kept"`
}

// TimeoutArgs are e2b.set_timeout's: the sandbox ends Seconds from now.
type TimeoutArgs struct {
	ID      string `json:"id" required:"true"`
	Seconds int64  `json:"timeout" required:"true" doc:"seconds from now after which the sandbox is deleted (at most 86400)"`
}

func checkSeconds(n int64) error {
	if n < 0 || n > int64(maxTimeout/time.Second) {
		return fault.InvalidField("timeout", fmt.Sprintf("timeout must be 0 to %d seconds", int64(maxTimeout/time.Second)))
	}
	return nil
}

// Validate implements dispatch.Validator.
func (a ConnectArgs) Validate() error { return checkSeconds(a.Seconds) }

// Validate implements dispatch.Validator.
func (a TimeoutArgs) Validate() error { return checkSeconds(a.Seconds) }

func (s *Service) controlTools() []dispatch.Tool {
	m := s.d.Sandboxes
	target := func(id string) dispatch.Target { return dispatch.Target{Sandbox: id} }
	return []dispatch.Tool{
		// Connecting resumes a paused sandbox and extends its life: what
		// sandbox.resume and a timeout change are (medium).
		dispatch.Define(ToolConnect, dispatch.Spec{Description: "E2B connect: resume a paused sandbox and make it live at least the given timeout from now", Risk: guard.Medium, Category: ratelimit.Manage},
			func(ctx context.Context, c auth.Caller, a ConnectArgs) (sandbox.Info, error) {
				sb, err := m.Get(owner(c), a.ID)
				if err != nil {
					return sandbox.Info{}, err
				}
				secs := a.Seconds
				if secs == 0 {
					secs = int64(defaultTimeout / time.Second)
				}
				// The timeout moves first: a sandbox its timeout paused
				// (on_expire hibernate) is not paused again by the
				// janitor between its resume and the new timeout.
				if in := sb.Info(); in.Expires != nil && time.Until(*in.Expires) < time.Duration(secs)*time.Second {
					want := time.Since(in.Created) + time.Duration(secs)*time.Second
					if _, err := m.SetTTL(ctx, owner(c), a.ID, want.Round(time.Second)); err != nil {
						return sandbox.Info{}, err
					}
				} // no TTL: it lives until deleted; a longer one is never shortened
				if paused(sb.State()) {
					if err := m.Resume(ctx, owner(c), a.ID); err != nil {
						return sandbox.Info{}, err
					}
				}
				return sb.Info(), nil
			}, dispatch.Hooks[ConnectArgs, sandbox.Info]{Describe: func(a ConnectArgs) dispatch.Target { return target(a.ID) }}),
		dispatch.Define(ToolSetTimeout, dispatch.Spec{Description: "E2B setTimeout: delete the sandbox the given number of seconds from now", Risk: guard.Medium, Category: ratelimit.Manage},
			func(ctx context.Context, c auth.Caller, a TimeoutArgs) (sandbox.Info, error) {
				sb, err := m.Get(owner(c), a.ID)
				if err != nil {
					return sandbox.Info{}, err
				}
				ttl := time.Since(sb.Info().Created) + time.Duration(a.Seconds)*time.Second
				return m.SetTTL(ctx, owner(c), a.ID, max(ttl.Round(time.Second), time.Second))
			}, dispatch.Hooks[TimeoutArgs, sandbox.Info]{
				Describe: func(a TimeoutArgs) dispatch.Target {
					return dispatch.Target{Sandbox: a.ID, Detail: map[string]any{"timeout_s": a.Seconds}}
				},
			}),
	}
}

// ProcessStartArgs are e2b.process_start's: envd's StartRequest, and the
// user (E2B's "user" is the sandbox user; "root" is sudo) and timeout.
type ProcessStartArgs struct {
	dispatch.On `required:"true" doc:"sandbox id"`
	Cmd         string            `json:"cmd" required:"true"`
	Args        []string          `json:"args,omitempty"`
	Envs        map[string]string `json:"envs,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	Tag         string            `json:"tag,omitempty"`
	// PTY starts it on a terminal of that size.
	PTY   *PTYSize `json:"pty,omitempty"`
	Stdin bool     `json:"stdin,omitempty" doc:"keep a stdin the client writes to"`
	User  string   `json:"user,omitempty" enum:",user,root" doc:"root runs as uid 0 inside the sandbox (SANDBOX_ENABLE_SUDO)"`
	// TimeoutMS kills it that long after its start (0: none; in a sandbox
	// without a TTL, at most 600 s).
	TimeoutMS int64 `json:"timeout_ms,omitempty" doc:"kill the process this many milliseconds after it starts (0: when the sandbox ends)"`
}

// PTYSize is a terminal's size.
type PTYSize struct {
	Cols uint32 `json:"cols"`
	Rows uint32 `json:"rows"`
}

// Validate implements dispatch.Validator.
func (a ProcessStartArgs) Validate() error {
	switch {
	case a.Cmd == "":
		return fault.InvalidField("cmd", "cmd is required")
	case a.TimeoutMS < 0:
		return fault.InvalidField("timeout_ms", "timeout must not be negative")
	case a.User != "" && a.User != "user" && a.User != "root":
		return fault.InvalidField("user", "the users of a sandbox are user (the sandbox user) and root")
	}
	return nil
}

func (a ProcessStartArgs) request() sandbox.ExecRequest {
	return sandbox.ExecRequest{Argv: append([]string{a.Cmd}, a.Args...), Cwd: a.Cwd, Env: a.Envs, Sudo: a.User == "root"}
}

// ProcessStarted is e2b.process_start's answer: the pid (and, for a
// streaming caller, the process and its subscription).
type ProcessStarted struct {
	Pid  uint32 `json:"pid"`
	proc *proc
	sub  *subscriber
}

// ProcessRef names a process of a sandbox by pid or tag.
type ProcessRef struct {
	dispatch.On `required:"true" doc:"sandbox id"`
	Pid         uint32 `json:"pid,omitempty"`
	Tag         string `json:"tag,omitempty"`
}

func (r ProcessRef) selector() *processpb.ProcessSelector {
	if r.Tag != "" {
		return &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Tag{Tag: r.Tag}}
	}
	return &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: r.Pid}}
}

func (r ProcessRef) name() string {
	if r.Tag != "" {
		return "tag:" + r.Tag
	}
	return "pid:" + strconv.FormatUint(uint64(r.Pid), 10)
}

// ProcessInputArgs are e2b.process_input's: bytes for the process's stdin
// (or its terminal).
type ProcessInputArgs struct {
	ProcessRef
	Data []byte `json:"data" doc:"the bytes (base64 in JSON)"`
}

// ProcessSignalArgs are e2b.process_signal's.
type ProcessSignalArgs struct {
	ProcessRef
	Signal string `json:"signal" enum:"SIGTERM,SIGKILL"`
}

// ProcessResizeArgs are e2b.process_resize's.
type ProcessResizeArgs struct {
	ProcessRef
	Cols uint32 `json:"cols"`
	Rows uint32 `json:"rows"`
}

// SandboxRef names a sandbox.
type SandboxRef struct {
	dispatch.On `required:"true" doc:"sandbox id"`
}

// ProcessConnected is e2b.process_connect's answer.
type ProcessConnected struct {
	Pid  uint32 `json:"pid"`
	proc *proc
	sub  *subscriber
}

// sandboxOf is the sandbox a call names, as its caller sees it (another
// key's is not found).
func (s *Service) sandboxOf(ctx context.Context, c auth.Caller, id string) (*sandbox.Sandbox, error) {
	if id == "" {
		return nil, fault.InvalidField("sandbox", "name the sandbox (E2b-Sandbox-Id)")
	}
	return s.d.Sandboxes.Resolve(ctx, c, id)
}

// procOf is the running process a call names.
func (s *Service) procOf(ctx context.Context, c auth.Caller, r ProcessRef) (*proc, error) {
	sb, err := s.sandboxOf(ctx, c, r.Sandbox)
	if err != nil {
		return nil, err
	}
	return s.procs.find(sb.ID(), r.selector())
}

func (s *Service) processTools() []dispatch.Tool {
	cmd := func(desc string, cat ratelimit.Category) dispatch.Spec {
		return dispatch.Spec{Description: desc, Risk: guard.Safe, Category: cat}
	}
	ref := func(r ProcessRef) dispatch.Target { return dispatch.Target{Target: r.name(), Sandbox: r.Sandbox} }
	start := cmd("E2B commands.run / pty.create: start a process (risk: the command guard's verdict on its command line, as exec.run)", ratelimit.Command)
	start.Streams = true
	// The process is held in the init until the call's record is durable
	// (dispatch, "Record first"; sandbox.Spawn holds it).
	start.Commands = dispatch.HeldCommand
	connectSpec := cmd("E2B commands.connect: follow a running process's output from now on", ratelimit.Read)
	connectSpec.Streams = true
	return []dispatch.Tool{
		dispatch.Define(ToolProcessStart, start, func(ctx context.Context, c auth.Caller, a ProcessStartArgs) (ProcessStarted, error) {
			sb, err := s.sandboxOf(ctx, c, a.Sandbox)
			if err != nil {
				return ProcessStarted{}, err
			}
			cfg := &processpb.ProcessConfig{Cmd: a.Cmd, Args: a.Args, Envs: a.Envs}
			if a.Cwd != "" {
				cwd := a.Cwd
				cfg.Cwd = &cwd
			}
			sp := startSpec{sandbox: sb, owner: c.KeyID, cfg: cfg, tag: a.Tag, stdin: a.Stdin, sudo: a.User == "root",
				admin: c.IsAdmin(), timeout: time.Duration(a.TimeoutMS) * time.Millisecond, subscribe: dispatch.Streaming(ctx)}
			if a.PTY != nil {
				sp.pty = &processpb.PTY{Size: &processpb.PTY_Size{Cols: a.PTY.Cols, Rows: a.PTY.Rows}}
			}
			pr, sub, err := s.procs.start(ctx, sp)
			if err != nil {
				return ProcessStarted{}, err
			}
			return ProcessStarted{Pid: pr.key.pid, proc: pr, sub: sub}, nil
		}, dispatch.Hooks[ProcessStartArgs, ProcessStarted]{
			Assess: func(a ProcessStartArgs) dispatch.Assessment { return sandbox.AssessCommand(s.d.Guard, a.request()) },
			Describe: func(a ProcessStartArgs) dispatch.Target {
				line := a.Cmd
				if len(a.Args) > 0 {
					line += " " + strings.Join(a.Args, " ")
				}
				return dispatch.Target{Target: line, Sandbox: a.Sandbox,
					Detail: map[string]any{"pty": a.PTY != nil, "stdin": a.Stdin, "user": a.User, "tag": a.Tag, "timeout_ms": a.TimeoutMS}}
			},
			Summarize: func(_ ProcessStartArgs, r ProcessStarted) map[string]any { return map[string]any{"pid": r.Pid} },
		}),
		dispatch.Define(ToolProcessList, cmd("E2B commands.list: the processes started through E2B that still run", ratelimit.Read),
			func(ctx context.Context, c auth.Caller, a SandboxRef) ([]*processpb.ProcessInfo, error) {
				sb, err := s.sandboxOf(ctx, c, a.Sandbox)
				if err != nil {
					return nil, err
				}
				return s.procs.list(sb.ID()), nil
			}, dispatch.Hooks[SandboxRef, []*processpb.ProcessInfo]{Describe: func(a SandboxRef) dispatch.Target { return dispatch.Target{Sandbox: a.Sandbox} }}),
		dispatch.Define(ToolProcessConnect, connectSpec, func(ctx context.Context, c auth.Caller, a ProcessRef) (ProcessConnected, error) {
			if !dispatch.Streaming(ctx) {
				return ProcessConnected{}, fault.New(fault.Invalid, ToolProcessConnect.Name()+" streams a process's output: call it through E2B's API")
			}
			pr, err := s.procOf(ctx, c, a)
			if err != nil {
				return ProcessConnected{}, err
			}
			return ProcessConnected{Pid: pr.key.pid, proc: pr, sub: pr.subscribe()}, nil
		}, dispatch.Hooks[ProcessRef, ProcessConnected]{Describe: ref}),
		// Writing input is gated line by line by shell.input (the
		// raw-input rule), dispatched from this tool's run.
		dispatch.Define(ToolProcessInput, cmd("E2B commands.sendStdin / pty.sendInput: write to a process's stdin or terminal (each line it completes is admitted by shell.input, as exec.run's command would be)", ratelimit.Command),
			func(ctx context.Context, c auth.Caller, a ProcessInputArgs) (int, error) {
				pr, err := s.procOf(ctx, c, a.ProcessRef)
				if err != nil {
					return 0, err
				}
				session := "e2b:" + strconv.FormatUint(uint64(pr.key.pid), 10)
				if err := pr.input.Write(ctx, s.d.Dispatch, c, pr.key.sandbox, session, ToolProcessInput.Name(), a.Data, pr.write); err != nil {
					return 0, err
				}
				return len(a.Data), nil
			}, dispatch.Hooks[ProcessInputArgs, int]{
				Describe: func(a ProcessInputArgs) dispatch.Target {
					t := ref(a.ProcessRef)
					t.Detail = map[string]any{"bytes": len(a.Data)}
					return t
				},
			}),
		dispatch.Define(ToolProcessCloseStdin, cmd("E2B commands.closeStdin: close a process's stdin (EOF)", ratelimit.Command),
			func(ctx context.Context, c auth.Caller, a ProcessRef) (sandbox.Empty, error) {
				pr, err := s.procOf(ctx, c, a)
				if err != nil {
					return nil, err
				}
				return nil, pr.closeStdin()
			}, dispatch.Hooks[ProcessRef, sandbox.Empty]{Describe: ref}),
		// Signalling one's own process only stops work: safe.
		dispatch.Define(ToolProcessSignal, cmd("E2B commands.kill / pty.kill: SIGTERM a process's group or SIGKILL its whole tree", ratelimit.Command),
			func(ctx context.Context, c auth.Caller, a ProcessSignalArgs) (sandbox.Empty, error) {
				pr, err := s.procOf(ctx, c, a.ProcessRef)
				if err != nil {
					return nil, err
				}
				sig := processpb.Signal_SIGNAL_SIGKILL
				if a.Signal == "SIGTERM" {
					sig = processpb.Signal_SIGNAL_SIGTERM
				}
				return nil, pr.signal(sig)
			}, dispatch.Hooks[ProcessSignalArgs, sandbox.Empty]{Describe: func(a ProcessSignalArgs) dispatch.Target {
				t := ref(a.ProcessRef)
				t.Detail = map[string]any{"signal": a.Signal}
				return t
			}}),
		dispatch.Define(ToolProcessResize, cmd("E2B pty.resize: change a terminal's size", ratelimit.Command),
			func(ctx context.Context, c auth.Caller, a ProcessResizeArgs) (sandbox.Empty, error) {
				pr, err := s.procOf(ctx, c, a.ProcessRef)
				if err != nil {
					return nil, err
				}
				if !pr.tty {
					return nil, fault.New(fault.Invalid, "the process has no terminal")
				}
				if err := pr.sp.Resize(dim(a.Rows, 24), dim(a.Cols, 80)); err != nil {
					return nil, fault.Wrap(fault.NotFound, err, "process not found")
				}
				return nil, nil
			}, dispatch.Hooks[ProcessResizeArgs, sandbox.Empty]{Describe: func(a ProcessResizeArgs) dispatch.Target { return ref(a.ProcessRef) }}),
	}
}
