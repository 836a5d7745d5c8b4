package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a stand-in for the in-sandbox
// init instead of running tests (see TestMain).
const helperEnv = "SANDHOLD_CGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "attach" {
		os.Exit(attachHelper())
	}
	os.Exit(m.Run())
}

// attachHelper runs as uid 0 of a fresh user namespace and pid 1 of a
// fresh pid namespace. It tries to open the group's tasks file by path
// (argv[1]), then writes its own TID through the inherited descriptors
// (fd 3...), and prints its thread's cgroups.
func attachHelper() int {
	runtime.LockOSThread()
	if os.Getuid() != 0 {
		fmt.Println("NOT-NAMESPACE-ROOT uid", os.Getuid())
		return 1
	}
	if f, err := os.OpenFile(os.Args[1], os.O_WRONLY, 0); err == nil { //nolint:gosec // G703: the cgroup path the parent test passes
		_ = f.Close() // only the open is probed
		fmt.Println("OPEN-BY-PATH-ALLOWED")
	} else {
		fmt.Println("open by path:", err)
	}
	tid := strconv.Itoa(unix.Gettid())
	n, _ := strconv.Atoi(os.Getenv(helperEnv + "_FDS"))
	for i := range n {
		f := os.NewFile(uintptr(3+i), "tasks")
		if _, err := f.WriteString(tid); err != nil {
			fmt.Println("WRITE-FAILED", err)
			return 1
		}
	}
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		fmt.Println("READ-FAILED", err)
		return 1
	}
	fmt.Print(string(b))
	return 0
}

// TestV1ThreadAttachFromUserNamespace checks the kernel rule the init
// relies on: a user-namespace root, which cannot open the group's tasks
// file itself, can move its own thread through a descriptor host root
// opened, naming itself by its TID in its own pid namespace.
func TestV1ThreadAttachFromUserNamespace(t *testing.T) {
	m := requireV1(t)
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("no user namespaces")
	}
	g := mustCreate(t, m, "sbx", Limits{})
	sub, err := g.Sub("exec1", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			_ = f.Close() // a tasks file; each write already reported its error
		}
	}()
	self := copyTestBinary(t)
	dirs := groupDirs(sub)
	cmd := exec.Command(self, filepath.Join(dirs[0], "tasks"))
	cmd.Env = []string{helperEnv + "=attach", helperEnv + "_FDS=" + strconv.Itoa(len(files))}
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: 65536}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: 65536}},
		// Without this the child keeps host uid 0 (unmapped, shown as
		// 65534 inside) and host root's DAC rights: it must setuid to the
		// namespace's root, exactly as the init must.
		Credential: &syscall.Credential{Uid: 0, Gid: 0},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(err.Error(), "operation not permitted") {
			t.Skipf("cannot create a user namespace here: %v", err)
		}
		t.Fatalf("helper: %v\n%s", err, out)
	}
	text := string(out)
	t.Logf("helper (uid 0 in a user namespace, pid 1 in a pid namespace, own cgroup namespace) said:\n%s", text)
	if strings.Contains(text, "OPEN-BY-PATH-ALLOWED") {
		t.Fatalf("the user-namespace root could open the tasks file itself; the test proves nothing:\n%s", text)
	}
	subRel := g.(*v1Group).rel + "/exec1"
	for _, h := range m.hiers {
		found := false
		for line := range strings.Lines(text) {
			parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(parts) == 3 && parts[1] == strings.Join(h.controllers, ",") && strings.HasSuffix(parts[2], "/"+subRel) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: helper thread not in the sub-group:\n%s", h.controllers, text)
		}
	}
	// The helper wrote "1" (its TID in its pid namespace): host pid 1 must
	// not have been the one moved.
	for _, h := range m.hiers {
		if got := cgroupOf(t, "1", h.controllers[0]); strings.HasSuffix(got, "/"+subRel) {
			t.Fatalf("host pid 1 was moved into the sub-group (%s)", got)
		}
	}
}

// copyTestBinary copies the test binary where the namespace's root (an
// unprivileged host uid) may execute it: go test builds into a 0700 dir.
func copyTestBinary(t *testing.T) string {
	t.Helper()
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "cgroup-helper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "helper")
	if err := os.WriteFile(dst, b, 0o755); err != nil { //nolint:gosec // G703: dst is in the os.MkdirTemp directory made just above
		t.Fatal(err)
	}
	return dst
}
