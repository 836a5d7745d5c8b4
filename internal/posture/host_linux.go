package posture

import "os"

// HostCgroupNS is this process's cgroup namespace as readlink prints it
// ("cgroup:[inode]"), for CheckCgroupNS.
func HostCgroupNS() (string, error) { return os.Readlink("/proc/self/ns/cgroup") }
