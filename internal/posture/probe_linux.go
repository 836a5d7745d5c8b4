package posture

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Probe runs every check. It needs no privileges; each probe is cheap.
func Probe() Report {
	return Report{Checks: []Check{
		probeKernel(),
		probeUserNS(),
		probeCgroups("/proc/self/cgroup", "/proc/self/mountinfo", "/proc/cgroups"),
		probeLandlock(),
		probeSeccomp(),
		probeNoNewPrivs(),
		probeSocketMemory("/proc/cgroups", "/proc/cmdline", "/proc/self/mountinfo"),
		probePTYPool("/proc/sys/kernel/pty"),
	}}
}

// probeSocketMemory says whether sandboxes' socket buffers are charged to
// their memory cgroups. With the memory controller on cgroup v2 every
// socket's buffers are (unless the kernel was booted with
// cgroup.memory=nosocket); on v1 only TCP's, to memory.kmem.tcp, which
// the v1 back end limits to each sandbox's memory limit: UDP and the
// other protocols' buffers are charged to no sandbox, only to the host's
// udp_mem. Not required: the sandbox boundary holds either way; what v1
// lacks is a bound on one tenant's share of host socket memory.
func probeSocketMemory(procCgroups, cmdline, mountinfo string) Check {
	c := Check{Name: SocketMemory}
	if b, err := os.ReadFile(cmdline); err == nil && slices.Contains(strings.Fields(string(b)), "cgroup.memory=nosocket") { // #nosec G304 -- fixed /proc paths (tests pass fixtures)
		c.Detail = "the kernel was booted with cgroup.memory=nosocket: no socket buffer is charged to a sandbox"
		return c
	}
	if !boundToV1(procCgroups, "memory") {
		c.OK = true
		c.Detail = "cgroup v2: every socket's buffers (TCP, UDP, unix) are charged to the sandbox's memory cgroup and its memory limit"
		return c
	}
	c.Detail = "cgroup v1: TCP buffers are charged to each sandbox's memory.kmem.tcp, limited to its memory limit; " +
		"UDP and other socket buffers are not charged to any sandbox (bounded per socket by net.core.rmem_max/wmem_max, in number by each process's open files)"
	mounts, err := cgroupMounts(mountinfo)
	if err != nil {
		return c
	}
	for _, m := range mounts.v1 {
		if _, err := os.Stat(m + "/memory.kmem.tcp.limit_in_bytes"); err == nil {
			return c
		}
	}
	c.Detail = "cgroup v1 without memory.kmem.tcp: no socket buffer is charged to a sandbox"
	return c
}

// boundToV1 reports whether the controller is enabled and attached to a
// cgroup v1 hierarchy (a non-zero hierarchy id in /proc/cgroups; 0 means
// the v2 one).
func boundToV1(procCgroups, controller string) bool {
	b, err := os.ReadFile(procCgroups) // #nosec G304 -- fixed /proc path (tests pass fixtures)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == controller {
			return f[1] != "0" && f[3] == "1"
		}
	}
	return false
}

// probePTYPool reports the host's terminal pool: kernel.pty.max less the
// reserve kept for the host's own devpts, shared by every sandbox's
// devpts instance (each capped by its max=, SANDBOX_MAX_PTYS).
func probePTYPool(dir string) Check {
	c := Check{Name: PTYPool}
	read := func(name string) (int, error) {
		b, err := os.ReadFile(dir + "/" + name) // #nosec G304 -- fixed /proc paths (tests pass fixtures)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(string(b)))
	}
	limit, err1 := read("max")
	reserve, err2 := read("reserve")
	used, err3 := read("nr")
	if err := errors.Join(err1, err2, err3); err != nil {
		c.Detail = "read kernel.pty: " + err.Error()
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("kernel.pty.max %d less kernel.pty.reserve %d: %d terminals shared by every sandbox's devpts, each capped by SANDBOX_MAX_PTYS; %d in use host-wide",
		limit, reserve, limit-reserve, used)
	return c
}

func probeKernel() Check {
	c := Check{Name: Kernel, Required: true}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		c.Detail = "uname: " + err.Error()
		return c
	}
	rel := unix.ByteSliceToString(u.Release[:])
	major, minor := parseRelease(rel)
	// 5.13 is the first kernel with landlock; cgroup v2 and user
	// namespaces are older.
	c.OK = major > 5 || (major == 5 && minor >= 13)
	c.Detail = "Linux " + rel
	if !c.OK {
		c.Detail += " (want 5.13 or newer)"
	}
	return c
}

func parseRelease(rel string) (major, minor int) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0
	}
	major, _ = strconv.Atoi(parts[0])
	minor, _ = strconv.Atoi(leadingDigits(parts[1]))
	return major, minor
}

func leadingDigits(s string) string {
	for i, r := range s {
		if r < '0' || r > '9' {
			return s[:i]
		}
	}
	return s
}

// probeUserNS really clones a child into a new user namespace (running the
// trivial `true`): sysctls and LSMs (AppArmor's userns restriction) can
// forbid what the kernel supports, and only trying tells.
func probeUserNS() Check {
	c := Check{Name: UserNS, Required: true}
	bin, err := exec.LookPath("true")
	if err != nil {
		bin = "/proc/self/exe" // exec fails after the clone; the clone result is what counts
	}
	cmd := exec.Command(bin) // #nosec G204 -- fixed program, no arguments
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	err = cmd.Run()
	switch {
	case err == nil:
		c.OK = true
		c.Detail = "created one"
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		c.Detail = "clone(CLONE_NEWUSER) refused: " + err.Error()
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENOSPC):
		c.Detail = "clone(CLONE_NEWUSER) failed: " + err.Error()
	default:
		c.Detail = "probe failed: " + err.Error()
	}
	if b, rerr := os.ReadFile("/proc/sys/user/max_user_namespaces"); rerr == nil {
		c.Detail += "; max_user_namespaces=" + strings.TrimSpace(string(b))
	}
	return c
}

// probeCgroups reads which hierarchy this process is in and which
// controllers are available.
func probeCgroups(selfCgroup, mountinfo, procCgroups string) Check {
	c := Check{Name: Cgroups, Required: true}
	b, err := os.ReadFile(selfCgroup) // #nosec G304 -- fixed /proc paths (tests pass fixtures)
	if err != nil {
		c.Detail = "read " + selfCgroup + ": " + err.Error()
		return c
	}
	v1, v2 := false, false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, "0::") {
			v2 = true
		} else if line != "" {
			v1 = true
		}
	}
	mounts, err := cgroupMounts(mountinfo)
	if err != nil {
		c.Detail = "read " + mountinfo + ": " + err.Error()
		return c
	}
	var version string
	var controllers []string
	switch {
	case v1:
		version = "v1"
		if v2 {
			version = "hybrid (v1 controllers)"
		}
		controllers = v1Controllers(procCgroups)
	case v2:
		version = "v2"
		if mounts.v2 != "" {
			if cb, err := os.ReadFile(mounts.v2 + "/cgroup.controllers"); err == nil { // #nosec G304 -- a cgroupfs mount point from mountinfo
				controllers = strings.Fields(string(cb))
			}
		}
	default:
		c.Detail = "no cgroup membership found"
		return c
	}
	slices.Sort(controllers)
	var missing []string
	for _, r := range requiredControllers {
		if !slices.Contains(controllers, r) {
			missing = append(missing, r)
		}
	}
	c.OK = len(missing) == 0
	c.Detail = fmt.Sprintf("%s; controllers: %s", version, strings.Join(controllers, ","))
	if len(missing) > 0 {
		c.Detail += "; missing: " + strings.Join(missing, ",")
	}
	return c
}

type mountSet struct {
	v2 string   // mount point of the cgroup2 filesystem, if any
	v1 []string // mount points of cgroup (v1) filesystems
}

// maxMountLines bounds the mountinfo scan (a host with more mounts than
// this has bigger problems; the probe reports what it saw).
const maxMountLines = 100000

func cgroupMounts(mountinfo string) (mountSet, error) {
	var m mountSet
	f, err := os.Open(mountinfo) // #nosec G304 -- fixed /proc path (tests pass fixtures)
	if err != nil {
		return m, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 0; sc.Scan() && n < maxMountLines; n++ {
		// "id parent maj:min root mountpoint opts ... - fstype source superopts"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 {
			continue
		}
		switch qf[0] {
		case "cgroup2":
			m.v2 = pf[4]
		case "cgroup":
			m.v1 = append(m.v1, pf[4])
		}
	}
	return m, sc.Err()
}

// v1Controllers lists enabled controllers from /proc/cgroups
// ("subsys_name hierarchy num_cgroups enabled").
func v1Controllers(procCgroups string) []string {
	b, err := os.ReadFile(procCgroups) // #nosec G304 -- fixed /proc path (tests pass fixtures)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && !strings.HasPrefix(f[0], "#") && f[3] == "1" {
			out = append(out, f[0])
		}
	}
	return out
}

// probeLandlock asks the kernel for its landlock ABI version. Sandboxes
// need ABI 4 (TCP rules; truncate is governed from 3): the init refuses to
// set a sandbox up with less, so the server does not start with less.
func probeLandlock() Check {
	c := Check{Name: Landlock, Required: true}
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch errno {
	case 0:
		c.OK = abi >= 4
		c.Detail = fmt.Sprintf("ABI %d", abi)
		if !c.OK {
			c.Detail += " (sandboxes need ABI 4 or later)"
		}
	case unix.ENOSYS:
		c.Detail = "not in this kernel (ENOSYS)"
	case unix.EOPNOTSUPP:
		c.Detail = "compiled in but disabled at boot (add landlock to lsm=)"
	default:
		c.Detail = "landlock_create_ruleset: " + errno.Error()
	}
	return c
}

// probeSeccomp checks that seccomp filters can be installed here.
func probeSeccomp() Check {
	c := Check{Name: Seccomp, Required: true}
	mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	if err != nil {
		c.Detail = "prctl(PR_GET_SECCOMP): " + err.Error() + " (kernel without CONFIG_SECCOMP?)"
		return c
	}
	actions, aerr := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	if aerr != nil {
		c.Detail = "no /proc/sys/kernel/seccomp/actions_avail (kernel without seccomp filter support?)"
		return c
	}
	acts := strings.Fields(string(actions))
	c.OK = slices.Contains(acts, "errno") && slices.Contains(acts, "kill_process")
	c.Detail = fmt.Sprintf("filter actions: %s; this process mode %d", strings.Join(acts, ","), mode)
	return c
}

// probeNoNewPrivs reports the flag (informational: sandboxes set it in their
// own init, whatever the server has).
func probeNoNewPrivs() Check {
	c := Check{Name: NoNewPrivs, Required: false}
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		c.Detail = "prctl(PR_GET_NO_NEW_PRIVS): " + err.Error()
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("supported; server process flag=%d", v)
	return c
}
