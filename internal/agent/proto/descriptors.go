package proto

// Descriptors an init starts with: the server (or the launcher) places them
// before the exec, the init takes them by number.
const (
	// FDConn is the protocol socket.
	FDConn = 3
	// FDWorkspace is not open: the workspace comes with the setup request
	// (so the server can make it while the init starts), and the slot is
	// left closed to keep the program's memfd at FDExe.
	FDWorkspace = 4
	// FDExe is the init program's memfd when the server runs the lean
	// init from one: the exec needs it, the init does not, and closes it
	// with everything else above FDWorkspace.
	FDExe = 5
)

// SandboxGODEBUG is the GODEBUG of the Go programs run in a sandbox (the
// init, the extractor): no tracking of the cgroup's CPU limit (see
// agent.Launch).
const SandboxGODEBUG = "GODEBUG=containermaxprocs=0,updatemaxprocs=0"
