//go:build !linux

package posture

import (
	"errors"
	"runtime"
)

// Probe reports every layer missing: sandhold's isolation is Linux-only.
func Probe() Report {
	var r Report
	for _, n := range []string{Kernel, UserNS, Cgroups, Landlock, Seccomp, NoNewPrivs, SocketMemory, PTYPool} {
		required := n != Landlock && n != NoNewPrivs && n != SocketMemory && n != PTYPool
		r.Checks = append(r.Checks, Check{Name: n, Required: required, Detail: "not available on " + runtime.GOOS})
	}
	return r
}

// HostCgroupNS fails: cgroup namespaces are Linux-only.
func HostCgroupNS() (string, error) { return "", errors.New("cgroup namespaces need Linux") }
