package agent

import (
	"io"
	"os"

	"github.com/sandhold/sandhold/internal/agent/proto"
)

// The specs are the same on every system; only Linux can launch
// (launch_linux.go, launcher_linux.go; launch_other.go fails).

// LaunchSpec says how to start one init.
type LaunchSpec struct {
	// Exe is the sandhold binary; default /proc/self/exe.
	Exe string
	// ExeFile, if set, is the init program itself (the lean init in a
	// sealed memfd, see package initbin); it is run instead of Exe. It is
	// handed to the child as descriptor 5 and executed as
	// /proc/self/fd/5, so no path on disk is looked up and nothing can be
	// swapped in between; the init closes it first thing (fds.CloseInherited).
	ExeFile *os.File
	// Args are the arguments after the program name; default ["init"].
	Args []string
	// HostUID and HostGID are the first host ids of the sandbox's
	// mapping: uid 0 inside is HostUID outside, uid 1000 HostUID+1000. No
	// other sandbox and no host account may use that range.
	HostUID, HostGID uint32
	// Workspace is the sandbox's persistent directory, opened by the
	// server (it is bound at /workspace). It goes to the init with the
	// setup request, not at the clone, so it may be made while the init
	// starts: then Workspace is nil and AwaitWorkspace gives it.
	Workspace *os.File
	// AwaitWorkspace, if set (and Workspace nil), runs once the init is
	// cloned and before Place: it waits for what the server made beside
	// the init's start (the workspace, the cgroups Place needs) and
	// returns the workspace, which stays the caller's.
	AwaitWorkspace func() (*os.File, error)
	// RootFiles, if set (with Setup.Root), runs once the init is cloned:
	// it returns the template root's writable layer and layer mounts
	// (rootfs.DetachedSubtree, rootfs.DetachedLayer), id-mapped through
	// the new init's user namespace, which pid names. They go with the
	// setup request; Launch closes them.
	RootFiles func(pid int) ([]*os.File, error)
	// Place puts the new init into the sandbox's cgroups. It runs before
	// the setup request is sent, so no sandbox code runs outside them.
	Place func(pid int) error
	// CgroupDir, on cgroup v2, is the sandbox's group: the init is created
	// inside it (clone3 CLONE_INTO_CGROUP) and Place may be nil.
	CgroupDir *os.File
	// Launcher, if set, clones the init (package launcher); else this
	// process does, copying its whole address space to do it.
	Launcher *Launcher
	Setup    proto.Setup
	// Log receives the init's stderr (setup failures); nil discards it.
	Log io.Writer
	// OnConn receives each connection the init accepted on its egress
	// listener (Setup.EgressListen); it owns the file and must not block.
	// Nil closes them.
	OnConn func(*os.File)
	// SleepGate, if set, decides when the init, idle for its quiet
	// period and asking to sleep, may (it calls grant once, when it
	// lets it); nil lets it at once.
	SleepGate func(grant func())

	// maxProcs and goGC, if > 0, replace initMaxProcs and initGOGC (the
	// benchmark that chose them compares settings).
	maxProcs, goGC int
}

// LauncherSpec says how to start the launcher: the same program as the
// inits (LaunchSpec's Exe, ExeFile and Args).
type LauncherSpec struct {
	Exe     string
	ExeFile *os.File
	Args    []string
	// Log receives the launcher's stderr; nil discards it.
	Log io.Writer
}
