package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sync"
)

// A spare is an init cloned ahead of any sandbox: its namespaces made,
// its program executed, its Go runtime started, waiting for its setup.
// What it is cloned with names no sandbox: the host id range it was
// cloned for (its user namespace's owner and id maps are fixed at the
// clone: the kernel charges what it counts per user to the namespace's
// owner, launcher.AsOwner, so a range is set aside for it), and a
// network namespace of its own. Everything of a sandbox — its cgroups,
// workspace, template root, limits, landlock, seccomp, hostname, egress —
// comes at Bind, by the same steps and the same setup a fresh launch
// takes (Instance.finish), so the two cannot differ.
//
// A spare that cannot be bound exactly as a fresh init would be cloned
// (another program, host ids, network mode, runtime settings), or that
// has exited, is killed and Bind returns ErrSpareUnusable: the caller
// launches a fresh init instead.
type Spare struct {
	inst *Instance
	key  cloneKey
	log  *logSwitch
}

// ErrSpareUnusable: the spare was not bound and is gone; launch afresh.
var ErrSpareUnusable = errors.New("spare init unusable")

// cloneKey is everything of a LaunchSpec that the clone uses (args holds
// the init's command line and environment, its runtime settings among
// them).
type cloneKey struct {
	exe              string
	exeFile          *os.File
	args             string
	hostUID, hostGID uint32
	hostNetwork      bool
	cgroupDir        bool
	launcher         *Launcher
}

func keyOf(spec LaunchSpec) cloneKey {
	argv, env := initArgv(spec)
	return cloneKey{
		exe: spec.Exe, exeFile: spec.ExeFile, args: fmt.Sprintf("%q %q", argv, env),
		hostUID: spec.HostUID, hostGID: spec.HostGID, hostNetwork: spec.Setup.HostNetwork,
		cgroupDir: spec.CgroupDir != nil, launcher: spec.Launcher,
	}
}

// CloneSpare clones a spare init from spec, which names only what the
// clone uses: Exe, ExeFile, Args, HostUID and HostGID, Launcher, and Log
// for its stderr until it is bound. A spec that carries anything of a
// sandbox (a workspace, cgroups, a template root, a setup) is refused:
// nothing specific to a sandbox exists before its create.
func CloneSpare(ctx context.Context, spec LaunchSpec) (*Spare, error) {
	if spec.Workspace != nil || spec.AwaitWorkspace != nil || spec.RootFiles != nil || spec.Place != nil ||
		spec.CgroupDir != nil || spec.OnConn != nil || !reflect.DeepEqual(spec.Setup, Setup{}) {
		return nil, errors.New("clone spare: a spare is cloned with nothing of a sandbox")
	}
	ls := &logSwitch{w: spec.Log}
	spec.Log = ls // a pipe either way, so the bind can redirect it
	inst, err := clone(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &Spare{inst: inst, key: keyOf(spec), log: ls}, nil
}

// Pid is the spare's pid on the host.
func (s *Spare) Pid() int { return s.inst.Pid }

// Exited is closed once the spare has been reaped.
func (s *Spare) Exited() <-chan struct{} { return s.inst.Exited() }

// Kill ends an unbound spare and waits for it to be reaped.
func (s *Spare) Kill() { s.inst.Kill() }

// Bind makes the spare the init spec describes, by the steps Launch takes
// after its clone (Instance.finish). If the spare was cloned otherwise
// than spec would clone a fresh init, or has exited, it is killed and the
// error is ErrSpareUnusable. A spare is bound once: whatever the error,
// it is gone after a failed Bind.
func (s *Spare) Bind(ctx context.Context, spec LaunchSpec) (*Instance, error) {
	if (spec.Workspace == nil) == (spec.AwaitWorkspace == nil) {
		s.Kill()
		return nil, errors.New("bind spare: a workspace or a way to await it, not both")
	}
	if keyOf(spec) != s.key {
		s.Kill()
		return nil, fmt.Errorf("%w: it was cloned for other host ids, another program or network mode", ErrSpareUnusable)
	}
	select {
	case <-s.inst.Exited():
		return nil, fmt.Errorf("%w: it ended (%s)", ErrSpareUnusable, s.inst.ExitStatus())
	default:
	}
	s.log.set(spec.Log)
	s.inst.setHooks(spec.OnConn, spec.SleepGate)
	return s.inst.finish(ctx, spec)
}

// logSwitch is a spare's stderr: its cloner's log until the bind, the
// sandbox's after.
type logSwitch struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *logSwitch) set(w io.Writer) {
	l.mu.Lock()
	l.w = w
	l.mu.Unlock()
}

func (l *logSwitch) Write(p []byte) (int, error) {
	l.mu.Lock()
	w := l.w
	l.mu.Unlock()
	if w == nil {
		return len(p), nil
	}
	return w.Write(p)
}
