package cgroup

// Both back ends implement the interfaces (the one New returns is chosen
// at run time from the host's mounts).
var (
	_ Manager = (*v1Manager)(nil)
	_ Group   = (*v1Group)(nil)
	_ Manager = (*v2Manager)(nil)
	_ Group   = (*v2Group)(nil)
)
