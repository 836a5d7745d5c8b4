package cgroup

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Fixtures of /proc/self/mountinfo and /proc/self/cgroup for layouts this
// package must understand.
const (
	// This CI host: v1 controllers each on their own mount, a unified
	// mount without controllers, our memory group nested.
	hybridMountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	hybridCgroup = `9:name=systemd:/
8:pids:/
6:freezer:/
4:memory:/process_api/abc
2:cpuacct:/
1:cpu:/
0::/
`
	// A systemd host with co-mounted controllers, one optional field in
	// mountinfo, and a mount point needing escapes.
	comountMountinfo = `25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct
26 24 0:23 / /sys/fs/cgroup/memory rw,nosuid shared:10 - cgroup cgroup rw,memory
27 24 0:24 / /sys/fs/cgroup/pids rw,nosuid shared:11 - cgroup cgroup rw,pids
28 24 0:25 / /sys/fs/cgroup/my\040freezer rw,nosuid shared:12 - cgroup cgroup rw,freezer
`
	comountCgroup = `4:pids:/system.slice/sandhold.service
3:freezer:/
2:memory:/system.slice/sandhold.service
1:cpu,cpuacct:/system.slice/sandhold.service
`
	// A Kubernetes node: pure v2, seen from a pod's cgroup namespace.
	v2Mountinfo = `600 590 0:30 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw,nsdelegate
`
	v2Cgroup = "0::/\n"
	// v1 without a freezer hierarchy: New must fail naming it.
	noFreezerMountinfo = `26 24 0:23 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
27 24 0:24 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
25 24 0:22 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
`
	noFreezerCgroup = "4:pids:/\n2:memory:/\n1:cpu:/\n"
	// A bind mount of a subtree (mount root /kubepods/x), our group below it.
	subtreeMountinfo = `26 24 0:23 /kubepods/x /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
`
	subtreeCgroup = "2:memory:/kubepods/x/c1\n"
	// Our cgroup lies outside the mounted subtree: unusable.
	outsideCgroup = "2:memory:/kubepods/y\n"
)

func TestBuildLayout(t *testing.T) {
	controllersFile := func(m map[string]string) func(string) (string, error) {
		return func(p string) (string, error) {
			if s, ok := m[p]; ok {
				return s, nil
			}
			return "", os.ErrNotExist
		}
	}
	tests := []struct {
		name      string
		mountinfo string
		cgroup    string
		files     map[string]string
		wantVer   int
		wantMount map[string]string
		wantOwn   map[string]string // first controller of a v1 hierarchy (or "unified") -> own dir
		wantErr   string
		newErr    string // what New's controller check says, if anything
	}{
		{
			name: "hybrid host (this CI)", mountinfo: hybridMountinfo, cgroup: hybridCgroup,
			files:   map[string]string{"/sys/fs/cgroup/unified/cgroup.controllers": "\n"},
			wantVer: 1,
			wantMount: map[string]string{"cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct",
				"memory": "/sys/fs/cgroup/memory", "freezer": "/sys/fs/cgroup/freezer", "pids": "/sys/fs/cgroup/pids"},
			wantOwn: map[string]string{"memory": "/sys/fs/cgroup/memory/process_api/abc", "pids": "/sys/fs/cgroup/pids"},
		},
		{
			name: "co-mounted cpu,cpuacct with escaped mount point", mountinfo: comountMountinfo, cgroup: comountCgroup,
			wantVer: 1,
			wantMount: map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
				"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids", "freezer": "/sys/fs/cgroup/my freezer"},
			wantOwn: map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct/system.slice/sandhold.service",
				"freezer": "/sys/fs/cgroup/my freezer"},
		},
		{
			name: "pure v2 in a pod", mountinfo: v2Mountinfo, cgroup: v2Cgroup,
			files:     map[string]string{"/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n"},
			wantVer:   2,
			wantMount: map[string]string{"unified": "/sys/fs/cgroup"},
			wantOwn:   map[string]string{"unified": "/sys/fs/cgroup"},
		},
		{
			name: "v1 without freezer", mountinfo: noFreezerMountinfo, cgroup: noFreezerCgroup,
			wantVer:   1,
			wantMount: map[string]string{"cpu": "/sys/fs/cgroup/cpu", "memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids"},
			newErr:    `"freezer"`,
		},
		{
			name: "subtree mount", mountinfo: subtreeMountinfo, cgroup: subtreeCgroup,
			wantVer:   1,
			wantMount: map[string]string{"memory": "/sys/fs/cgroup/memory"},
			wantOwn:   map[string]string{"memory": "/sys/fs/cgroup/memory/c1"},
			newErr:    `"pids"`,
		},
		{
			name: "tricky: own cgroup outside the mounted subtree", mountinfo: subtreeMountinfo, cgroup: outsideCgroup,
			wantErr: "outside the mounted subtree",
		},
		{
			name: "nothing mounted", mountinfo: "22 1 0:21 / /proc rw - proc proc rw\n", cgroup: "0::/\n",
			wantErr: "no cgroup filesystem",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mounts, err := parseMountinfo(strings.NewReader(tt.mountinfo))
			if err != nil {
				t.Fatal(err)
			}
			cgs, err := parseProcCgroup(strings.NewReader(tt.cgroup))
			if err != nil {
				t.Fatal(err)
			}
			lay, err := buildLayout(mounts, cgs, controllersFile(tt.files))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if lay.info.Version != tt.wantVer {
				t.Fatalf("version %d, want %d", lay.info.Version, tt.wantVer)
			}
			if !reflect.DeepEqual(lay.info.Mounts, tt.wantMount) {
				t.Fatalf("mounts %v, want %v", lay.info.Mounts, tt.wantMount)
			}
			for key, want := range tt.wantOwn {
				got := ""
				if key == "unified" && lay.v2 != nil {
					got = lay.v2.own
				}
				for _, h := range lay.v1 {
					if h.controllers[0] == key {
						got = h.own
					}
				}
				if got != want {
					t.Errorf("own dir of %s = %q, want %q", key, got, want)
				}
			}
			if tt.wantVer == 1 {
				_, nerr := newV1(lay, "x")
				if tt.newErr != "" && (nerr == nil || !strings.Contains(nerr.Error(), tt.newErr)) {
					t.Fatalf("newV1 err = %v, want it to name %s", nerr, tt.newErr)
				}
			}
		})
	}
}

func TestParseProcCgroupRejects(t *testing.T) {
	for name, in := range map[string]string{
		"no colons":     "garbage\n",
		"relative path": "1:cpu:relative\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseProcCgroup(strings.NewReader(in)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestOwnDirRejectsParent(t *testing.T) {
	if _, err := ownDir("/sys/fs/cgroup/memory", "/", "/a/../../etc"); err == nil {
		t.Fatal("accepted a path with ..")
	}
}

func TestParsePidsCap(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= maxPidsPerGroup+1; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	if err := parsePids(b.String(), map[int]bool{}); err == nil {
		t.Fatal("no error past the pid cap")
	}
	if err := parsePids("12\n-3\n", map[int]bool{}); err == nil {
		t.Fatal("accepted a negative pid")
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add(hybridCgroup)
	f.Add(comountCgroup)
	f.Add("0::/a (deleted)\n")
	f.Fuzz(func(t *testing.T, s string) {
		cgs, err := parseProcCgroup(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, c := range cgs {
			if !strings.HasPrefix(c.path, "/") {
				t.Fatalf("accepted relative path %q", c.path)
			}
			d, err := ownDir("/m", "/", c.path)
			if err == nil && d != "/m" && !strings.HasPrefix(d, "/m/") {
				t.Fatalf("ownDir escaped the mount: %q", d)
			}
		}
	})
}
