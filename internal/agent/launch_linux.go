package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/sandhold/sandhold/internal/agent/launcher"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"
)

// initMaxProcs is the init's GOMAXPROCS. See BENCHMARKS.md, "The init's
// share of an exec", for the measurement that chose it.
const initMaxProcs = 2

// initGOGC is the init's GOGC. See the same section.
const initGOGC = 100

// Instance is a running init.
type Instance struct {
	*Client
	// Pid is the init's pid on the host.
	Pid   int
	Ready *proto.Ready

	signal func(syscall.Signal) error
	exited chan struct{}
	// exit says how the init ended; set before exited is closed.
	exit string
}

// Launch starts an init in fresh namespaces, places it, sends the setup and
// waits for it to be ready. On any failure the init is killed. With
// spec.Launcher the launcher process clones it (see package launcher),
// else this process does.
func Launch(ctx context.Context, spec LaunchSpec) (*Instance, error) {
	if (spec.Workspace == nil) == (spec.AwaitWorkspace == nil) {
		return nil, errors.New("launch: a workspace or a way to await it, not both")
	}
	inst, err := clone(ctx, spec)
	if err != nil {
		return nil, err
	}
	return inst.finish(ctx, spec)
}

// clone starts an init in fresh namespaces: the part of a launch that
// needs nothing of the sandbox but its host ids and network mode (a spare
// is cloned with only that, spare_linux.go). The init waits for its setup.
func clone(ctx context.Context, spec LaunchSpec) (*Instance, error) {
	exe := spec.Exe
	if exe == "" {
		exe = "/proc/self/exe"
	}
	if spec.ExeFile != nil {
		// The child's descriptor table is set up (dup2 onto 3 and 5, 4
		// closed) before execve, so this name always means the memfd, whatever
		// number it has in the server.
		exe = fmt.Sprintf("/proc/self/fd/%d", proto.FDExe)
	}
	srv, child, err := Socketpair()
	if err != nil {
		return nil, err
	}
	defer func() { _ = child.Close() }()
	argv, env := initArgv(spec)
	conn, err := proto.NewConn(srv)
	_ = srv.Close() // NewConn holds its own descriptor
	if err != nil {
		return nil, err
	}
	var inst *Instance
	if spec.Launcher != nil {
		inst, err = launchVia(ctx, spec, exe, argv, env, child, conn)
	} else {
		inst, err = launchHere(spec, exe, argv, env, child, conn)
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return inst, nil
}

// initArgv is an init's command line and environment.
func initArgv(spec LaunchSpec) (argv, env []string) {
	args := spec.Args
	if args == nil {
		args = []string{"init"}
	}
	// The server's environment never passes in. GOMAXPROCS keeps the init's
	// runtime small; GOTRACEBACK=none keeps its crash output short;
	// GODEBUG keeps the runtime from opening its cgroup's CPU files to
	// track a CPU limit it would not follow anyway (GOMAXPROCS is set):
	// those descriptors took the lowest free numbers, which the idle
	// sleep's keeper needs (it refused to sleep while they held them). (A soft
	// memory limit near the init's live heap made the GC run on every
	// spawn and doubled its cost; an idle init returns its memory with
	// FreeOSMemory instead, sandboxinit/release_linux.go.)
	procs := initMaxProcs
	if spec.maxProcs > 0 {
		procs = spec.maxProcs
	}
	gogc := initGOGC
	if spec.goGC > 0 {
		gogc = spec.goGC
	}
	env = []string{"GOMAXPROCS=" + strconv.Itoa(procs), "GOGC=" + strconv.Itoa(gogc), "GOTRACEBACK=none", proto.SandboxGODEBUG}
	return append([]string{"sandhold-init"}, args...), env
}

// finish gives a cloned init its sandbox: the workspace, a template
// root's files, its cgroups (Place) and the setup, and waits for it to be
// ready. On any failure the init is killed.
func (inst *Instance) finish(ctx context.Context, spec LaunchSpec) (*Instance, error) {
	fail := func(err error) (*Instance, error) {
		inst.Kill()
		return nil, err
	}
	ws := spec.Workspace
	if ws == nil {
		var err error
		if ws, err = spec.AwaitWorkspace(); err != nil {
			return fail(err)
		}
	}
	files := []*os.File{ws}
	if spec.RootFiles != nil {
		root, err := spec.RootFiles(inst.Pid)
		if err != nil {
			return fail(fmt.Errorf("template root: %w", err))
		}
		defer proto.CloseAll(root) // sent (duplicated) with the setup, or not at all
		files = append(files, root...)
	}
	if spec.Place != nil {
		if err := spec.Place(inst.Pid); err != nil {
			return fail(fmt.Errorf("place init in its cgroups: %w", err))
		}
	}
	ready, err := inst.Setup(ctx, spec.Setup, files...)
	if err != nil {
		return fail(fmt.Errorf("init setup: %w", err))
	}
	inst.Ready = ready
	return inst, nil
}

// launchHere clones the init from this process.
func launchHere(spec LaunchSpec, exe string, argv, env []string, child *os.File, conn *proto.Conn) (*Instance, error) {
	cmd := exec.Command(exe) //nolint:gosec // G204: the server's own binary (or a test binary), never client input
	cmd.Args = argv
	cmd.Env = env
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{child} // fd 3
	if spec.ExeFile != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, nil, spec.ExeFile) // fd 4 closed, fd 5
	}
	if spec.Log != nil {
		cmd.Stderr = spec.Log
	}
	cmd.SysProcAttr = launcher.SysProcAttr(spec.HostUID, spec.HostGID, spec.Setup.HostNetwork)
	if spec.CgroupDir != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(spec.CgroupDir.Fd())
	}
	if err := launcher.AsOwner(spec.HostUID, spec.HostGID, cmd.Start); err != nil {
		if cmd.Process != nil {
			// Started, but the cloning thread could not be given back.
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return nil, fmt.Errorf("start init: %w", err)
	}
	inst := &Instance{Client: newClient(conn, spec.OnConn, spec.SleepGate), Pid: cmd.Process.Pid, exited: make(chan struct{}),
		signal: func(sig syscall.Signal) error { return cmd.Process.Signal(sig) }}
	go func() {
		err := cmd.Wait()
		inst.exit = "exit status 0"
		if err != nil {
			inst.exit = err.Error()
		}
		_ = conn.Close()
		close(inst.exited)
	}()
	return inst, nil
}

// launchVia has the launcher clone the init as this process's child.
func launchVia(ctx context.Context, spec LaunchSpec, exe string, argv, env []string, child *os.File, conn *proto.Conn) (*Instance, error) {
	req := launcher.Request{Argv: argv, Env: env, HostUID: spec.HostUID, HostGID: spec.HostGID,
		HostNetwork: spec.Setup.HostNetwork}
	files := []*os.File{child}
	var logR, logW *os.File
	if spec.Log != nil {
		var err error
		if logR, logW, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("init stderr: %w", err)
		}
		req.Stderr = true
		files = append(files, logW)
	}
	if spec.ExeFile != nil {
		req.ExeFile = true
		files = append(files, spec.ExeFile)
	} else {
		req.Path = exe
	}
	if spec.CgroupDir != nil {
		req.Cgroup = true
		files = append(files, spec.CgroupDir)
	}
	pid, pidfd, err := spec.Launcher.start(ctx, req, files)
	if logW != nil {
		_ = logW.Close() // the init holds the only writer now
	}
	if err != nil {
		if logR != nil {
			_ = logR.Close()
		}
		return nil, fmt.Errorf("start init: %w", err)
	}
	copied := make(chan struct{})
	if logR != nil {
		go func() {
			_, _ = io.Copy(spec.Log, logR)
			_ = logR.Close()
			close(copied)
		}()
	} else {
		close(copied)
	}
	w, err := newPidfdWaiter(pidfd, pid)
	if err != nil {
		// Without its pidfd the init cannot be supervised: end it.
		_ = unix.Kill(pid, unix.SIGKILL)
		_, _ = unix.Wait4(pid, nil, 0, nil)
		spec.Launcher.forget(pid)
		return nil, err
	}
	inst := &Instance{Client: newClient(conn, spec.OnConn, spec.SleepGate), Pid: pid, exited: make(chan struct{}), signal: w.signal}
	go func() {
		// Forgotten before the reap: once reaped, the pid may be a new
		// init's, which must stay known.
		inst.exit = w.wait(func() { spec.Launcher.forget(pid) })
		<-copied
		_ = conn.Close()
		close(inst.exited)
	}()
	return inst, nil
}

// Kill ends the init (and with it every process of the sandbox) and waits
// for it to be reaped.
func (i *Instance) Kill() {
	_ = i.signal(syscall.SIGKILL)
	<-i.exited
}

// Exited is closed once the init has been reaped.
func (i *Instance) Exited() <-chan struct{} { return i.exited }

// ExitStatus says how the init ended ("exit status 1", "signal: killed");
// it is set once Exited is closed.
func (i *Instance) ExitStatus() string {
	select {
	case <-i.exited:
		return i.exit
	default:
		return ""
	}
}
