package launcher

// Name is argv[0] of the launcher process; the init program's entry tells
// the launcher from an init by it.
const Name = "sandhold-launcher"

// FDConn is the launcher's socket to the server; FDExe its own program
// when it runs from a memfd (closed at once).
const (
	FDConn = 3
	FDExe  = 4
)

// Caps of the launcher protocol.
const (
	// MaxRequest bounds one request: argv and env of an init are a few
	// short strings.
	MaxRequest = 16 << 10
	// MaxFiles is the most descriptors one request carries: the init's
	// socket, stderr, the program, the cgroup. (The workspace goes to the
	// init with its setup request.)
	MaxFiles = 4
)

// IDRange is the size of each sandbox's user and group id mapping: ids
// 0..IDRange-1 inside map to the sandbox's first host ids on.
const IDRange = 65536

// Request asks the launcher for one init. The descriptors come with
// it, in this order: the init's socket end, then stderr, the program and
// the cgroup directory when the flags say so.
type Request struct {
	// Path is the program to execute when it is not a descriptor.
	Path        string   `json:"path,omitempty"`
	Argv        []string `json:"argv"`
	Env         []string `json:"env"`
	HostUID     uint32   `json:"host_uid"`
	HostGID     uint32   `json:"host_gid"`
	HostNetwork bool     `json:"host_network,omitempty"`
	Stderr      bool     `json:"stderr,omitempty"`
	ExeFile     bool     `json:"exe_file,omitempty"`
	Cgroup      bool     `json:"cgroup,omitempty"`
}

// Files is how many descriptors come with the request.
func (r Request) Files() int {
	n := 1
	for _, b := range []bool{r.Stderr, r.ExeFile, r.Cgroup} {
		if b {
			n++
		}
	}
	return n
}

// Reply answers a request: the init's pid (its pidfd rides along),
// or why not.
type Reply struct {
	Pid int    `json:"pid,omitempty"`
	Err string `json:"err,omitempty"`
}
