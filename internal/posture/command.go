package posture

import (
	"fmt"
	"strings"
)

// What a real command inside a sandbox sees. A layer an init reports is
// what the init believes it did; these checks look from where an attacker
// stands. The cgroup namespace was once reported active while every
// command ran in the host's namespace and saw the host's cgroup paths.

// CgroupNSCommand names the check of a command's cgroup namespace, as a
// report row and as the layer the self-test adds.
const CgroupNSCommand = "cgroup namespace (seen by a command)"

// CgroupNSProbe is the command the self-test runs inside a test sandbox;
// CheckCgroupNS judges its output.
var CgroupNSProbe = []string{"/bin/sh", "-c", "readlink /proc/self/ns/cgroup && cat /proc/self/cgroup"}

// CheckCgroupNS judges CgroupNSProbe's output: the command's cgroup
// namespace must not be hostNS (the server's, as readlink prints it:
// "cgroup:[inode]"), and no line of its /proc/self/cgroup may show a host
// path, recognised by any of hostMarks (names every host path of the
// sandbox contains: its id, the cgroup base) or by reaching above the
// namespace root.
func CheckCgroupNS(hostNS string, hostMarks []string, out string) Check {
	c := Check{Name: CgroupNSCommand, Required: true}
	first, rest, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(first, "cgroup:[") {
		c.Detail = fmt.Sprintf("the probe printed no cgroup namespace (%q)", first)
		return c
	}
	if hostNS == "" || first == hostNS {
		c.Detail = "a command runs in the server's cgroup namespace " + first
		return c
	}
	paths := 0
	for _, line := range strings.Split(rest, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			c.Detail = fmt.Sprintf("malformed /proc/self/cgroup line %q", line)
			return c
		}
		p := parts[2]
		if strings.Contains(p, "..") {
			c.Detail = fmt.Sprintf("a command sees cgroup path %q, above its namespace root", p)
			return c
		}
		for _, m := range hostMarks {
			if m != "" && strings.Contains(p, m) {
				c.Detail = fmt.Sprintf("a command sees the host's cgroup path %q", p)
				return c
			}
		}
		paths++
	}
	if paths == 0 {
		c.Detail = "a command's /proc/self/cgroup lists no hierarchy"
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("a command is in %s, not the server's %s, and sees only paths below its root in %d hierarchies", first, hostNS, paths)
	return c
}
