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
	for _, name := range []string{Kernel, UserNS, Cgroups, Landlock, Seccomp, NoNewPrivs, SocketMemory, PTYPool} {
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
		if c.Name == SocketMemory && boundToV1("/proc/cgroups", "memory") {
			// What cgroup v1 cannot do, said as missing: UDP buffers.
			if c.OK || !strings.Contains(c.Detail, "UDP") {
				t.Errorf("socket memory on a cgroup v1 host: %+v, want missing, naming UDP", c)
			}
			continue
		}
		if !c.OK {
			t.Errorf("%s reported missing on a root CI host: %s", c.Name, c.Detail)
		}
	}
	if !r.Ready() || len(r.Missing()) != 0 {
		t.Errorf("not ready: %v", r.Missing())
	}
}

// fixtureWriter writes fixture files below dir and returns their paths.
func fixtureWriter(t *testing.T, dir string) func(name, s string) string {
	return func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func TestProbeCgroupsFixtures(t *testing.T) {
	dir := t.TempDir()
	write := fixtureWriter(t, dir)
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

func TestProbeSocketMemoryFixtures(t *testing.T) {
	dir := t.TempDir()
	write := fixtureWriter(t, dir)
	mem := filepath.Join(dir, "memory")
	if err := os.Mkdir(mem, 0o700); err != nil {
		t.Fatal(err)
	}
	write("memory/memory.kmem.tcp.limit_in_bytes", "9223372036854771712\n")
	const head = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
	v1 := write("v1", head+"cpu\t2\t1\t1\nmemory\t3\t1\t1\n")
	v2 := write("v2", head+"cpu\t0\t1\t1\nmemory\t0\t1\t1\n")
	plain := write("cmdline", "console=ttyS0 quiet\n")
	nosocket := write("cmdline_nosocket", "quiet cgroup.memory=nosocket\n")
	withTCP := write("mountinfo_tcp", "35 31 0:32 / "+mem+" rw,relatime - cgroup cgroup rw,memory\n")
	withoutTCP := write("mountinfo", "35 31 0:32 / "+dir+"/none rw,relatime - cgroup cgroup rw,memory\n")
	tests := []struct {
		name, cgroups, cmdline, mounts string
		ok                             bool
		want                           string
	}{
		{"v2 charges every socket", v2, plain, withTCP, true, "cgroup v2: every socket's buffers"},
		{"v2 booted nosocket", v2, nosocket, withTCP, false, "cgroup.memory=nosocket"},
		{"v1 charges TCP only", v1, plain, withTCP, false, "UDP and other socket buffers are not charged"},
		{"v1 without kmem.tcp", v1, plain, withoutTCP, false, "without memory.kmem.tcp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := probeSocketMemory(tc.cgroups, tc.cmdline, tc.mounts)
			if c.OK != tc.ok || !strings.Contains(c.Detail, tc.want) || c.Required {
				t.Fatalf("%+v, want ok=%v, not required, detail containing %q", c, tc.ok, tc.want)
			}
		})
	}
}

func TestProbePTYPool(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]string{"max": "4096\n", "reserve": "1024\n", "nr": "7\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if c := probePTYPool(dir); !c.OK || !strings.Contains(c.Detail, "3072 terminals shared") || !strings.Contains(c.Detail, "7 in use") {
		t.Fatalf("%+v", c)
	}
	if c := probePTYPool(filepath.Join(dir, "missing")); c.OK {
		t.Fatalf("a missing kernel.pty reads as ok: %+v", c)
	}
}

func TestParseRelease(t *testing.T) {
	for in, want := range map[string][2]int{"6.18.0-1-amd64": {6, 18}, "5.13": {5, 13}, "4.19.0+": {4, 19}, "x": {0, 0}, "5.4rc1.x": {5, 4}} {
		if a, b := parseRelease(in); a != want[0] || b != want[1] {
			t.Errorf("parseRelease(%q) = %d.%d", in, a, b)
		}
	}
}
