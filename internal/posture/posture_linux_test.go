package posture

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProbeOnThisHost(t *testing.T) {
	r := Probe()
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	for _, name := range []string{Kernel, UserNS, Cgroups, Landlock, Seccomp, NoNewPrivs} {
		c, ok := r.Get(name)
		if !ok || c.Detail == "" {
			t.Errorf("row %q missing or without detail: %+v", name, c)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("the rest asserts features of the project's CI machines (root, kernel 6.x): not root here")
	}
	// The project's machines (root, kernel 6.18, cgroup v1, landlock ABI 7)
	// have every layer; a probe that says otherwise is broken.
	for _, c := range r.Checks {
		if !c.OK {
			t.Errorf("%s reported missing on a root CI host: %s", c.Name, c.Detail)
		}
	}
	if !r.Ready() || len(r.Missing()) != 0 {
		t.Errorf("not ready: %v", r.Missing())
	}
}

func TestProbeCgroupsFixtures(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v2root := filepath.Join(dir, "cg2")
	if err := os.Mkdir(v2root, 0o700); err != nil {
		t.Fatal(err)
	}
	write("cg2/cgroup.controllers", "cpuset cpu io memory pids\n")
	procCgroups := write("proc_cgroups", "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t2\t1\t1\nmemory\t3\t1\t1\npids\t4\t1\t1\nrdma\t5\t1\t0\n")
	procNoPids := write("proc_cgroups_nopids", "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t2\t1\t1\nmemory\t3\t1\t1\npids\t4\t1\t0\n")
	tests := []struct {
		name, self, mounts, procCgroups string
		ok                              bool
		want                            string
	}{
		{"v2", "0::/user.slice\n", "30 1 0:26 / " + v2root + " rw - cgroup2 cgroup2 rw\n", procCgroups, true, "v2; controllers: cpu,cpuset,io,memory,pids"},
		{"v1", "9:pids:/\n8:memory:/\n1:cpu:/\n", "31 1 0:28 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n", procCgroups, true, "v1; controllers: cpu,memory,pids"},
		{"hybrid", "1:memory:/\n0::/\n", "", procCgroups, true, "hybrid"},
		{"v1 without pids", "9:pids:/\n", "", procNoPids, false, "missing: pids"},
		{"empty", "", "", procCgroups, false, "no cgroup membership"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := probeCgroups(write("self", tc.self), write("mountinfo", tc.mounts), tc.procCgroups)
			if c.OK != tc.ok || !strings.Contains(c.Detail, tc.want) {
				t.Fatalf("%+v, want ok=%v detail containing %q", c, tc.ok, tc.want)
			}
		})
	}
}

func TestParseRelease(t *testing.T) {
	for in, want := range map[string][2]int{"6.18.0-1-amd64": {6, 18}, "5.13": {5, 13}, "4.19.0+": {4, 19}, "x": {0, 0}, "5.4rc1.x": {5, 4}} {
		if a, b := parseRelease(in); a != want[0] || b != want[1] {
			t.Errorf("parseRelease(%q) = %d.%d", in, a, b)
		}
	}
}
