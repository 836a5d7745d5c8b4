package posture

import (
	"strings"
	"testing"
)

func TestCheckCgroupNS(t *testing.T) {
	const host = "cgroup:[4026531835]"
	marks := []string{"sb7f3a"}
	tests := []struct {
		name, out string
		ok        bool
		want      string
	}{
		{"own namespace, root and execution group", "cgroup:[4026532999]\n9:name=systemd:/\n8:pids:/x815\n4:memory:/x815\n0::/\n", true, "4 hierarchies"},
		// What every command printed before the init forked from the
		// thread that made the namespace (issue 10.2).
		{"the host's namespace", host + "\n8:pids:/sandhold-test/sb7f3a/x815\n0::/\n", false, "server's cgroup namespace"},
		{"own namespace but a host path", "cgroup:[4026532999]\n4:memory:/process_api/19fb/sandhold-1/sb7f3a/x1\n", false, "host's cgroup path"},
		{"a path above the root", "cgroup:[4026532999]\n4:memory:/../../x\n", false, "above its namespace root"},
		{"no namespace printed", "sh: readlink: not found\n", false, "no cgroup namespace"},
		{"no hierarchy", "cgroup:[4026532999]\n", false, "malformed"},
		{"malformed line", "cgroup:[4026532999]\nmemory\n", false, "malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := CheckCgroupNS(host, marks, tc.out)
			if c.OK != tc.ok || !strings.Contains(c.Detail, tc.want) || !c.Required || c.Name != CgroupNSCommand {
				t.Fatalf("%+v, want ok=%v detail containing %q", c, tc.ok, tc.want)
			}
		})
	}
	if c := CheckCgroupNS("", marks, "cgroup:[1]\n0::/\n"); c.OK {
		t.Fatalf("unknown host namespace passed: %+v", c)
	}
}
