package seccomp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sandhold/sandhold/internal/isolate/seccomp/internal/int80"
	"github.com/sandhold/sandhold/internal/testenv"
	"golang.org/x/sys/unix"
)

// The helper-process pattern: the test binary re-executes itself with
// helperEnv set; TestMain then runs the named helper instead of the tests.
// Installing a filter is irreversible, so it only ever happens in a child.
const (
	helperEnv    = "SANDHOLD_SECCOMP_HELPER"
	helperDirEnv = "SANDHOLD_SECCOMP_HELPER_DIR"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

func runHelper(mode string) int {
	helpers := map[string]func() error{
		"deny":    helperDeny,
		"work":    helperWork,
		"threads": helperThreads,
		"stack":   helperStack,
		"bench":   helperBench,
		"int80":   helperInt80,
	}
	h, ok := helpers[mode]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", mode)
		return 2
	}
	if err := h(); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func requireSeccomp(t *testing.T) {
	t.Helper()
	testenv.SkipShort(t, "loads a seccomp filter in a child")
	if runtime.GOARCH != "amd64" {
		t.Skipf("the policy is written for amd64 (Install refuses elsewhere), this is %s", runtime.GOARCH)
	}
	if err := Available(); err != nil {
		t.Skipf("seccomp unavailable on this kernel: %v", err)
	}
}

// runChild runs the helper and returns its stdout; a helper failure fails
// the test with its stderr.
func runChild(t *testing.T, mode string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec // G702: re-executes this test binary as the helper
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDirEnv+"="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper %s: %v\nstdout:\n%s\nstderr:\n%s", mode, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// parseResults reads "name value" lines.
func parseResults(t *testing.T, out string) map[string]string {
	t.Helper()
	res := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if ok {
			res[name] = val
		}
	}
	return res
}

// errnoOf turns a syscall outcome into the number the helper prints.
func errnoOf(err error) int {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return int(en)
	}
	return -1
}

func rawErr(_, _ uintptr, e syscall.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

// ptyIoctl opens a fresh PTY pair and issues req on the slave with a
// one-byte argument ("x"), the shape of a TIOCSTI injection.
func ptyIoctl(req uint) error {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer func() { _ = master.Close() }()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		return err
	}
	n, err := unix.IoctlGetUint32(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		return err
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer func() { _ = slave.Close() }()
	b := []byte{'x'}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, slave.Fd(), uintptr(req), uintptr(unsafe.Pointer(&b[0]))) //nolint:gosec // G103: raw ioctl the filter must refuse
	if e != 0 {
		return e
	}
	return nil
}

// The 32-bit entry is probed only in a child process: a kernel booted with
// ia32_emulation=0 (or built without IA32 emulation) answers int $0x80 with
// a general protection fault, SIGSEGV, and a host difference must never
// crash the test binary. There the 32-bit syscall table is unreachable
// whatever the filter says, which is the property the filter's
// architecture check exists for.

// int80FilterEnv makes the int80 helper install the filter first.
const int80FilterEnv = "SANDHOLD_SECCOMP_INT80_FILTER"

// int80Unavailable is what the int80 helper prints when the call faulted.
const int80Unavailable = "int80 unavailable"

// helperInt80 makes i386 getpid (20) through int $0x80 and prints
// "int80 <result> <pid>", or int80Unavailable if the entry faulted.
func helperInt80() error {
	if os.Getenv(int80FilterEnv) == "1" {
		if err := Install(); err != nil {
			return err
		}
	}
	r, faulted := callInt80()
	if faulted {
		fmt.Println(int80Unavailable)
		return nil
	}
	fmt.Printf("int80 %d %d\n", r, os.Getpid())
	return nil
}

// callInt80 turns the fault of a missing 32-bit entry into a result: with
// SetPanicOnFault the runtime panics (recoverably) instead of throwing.
func callInt80() (r int32, faulted bool) {
	debug.SetPanicOnFault(true)
	defer func() {
		if recover() != nil {
			faulted = true
		}
	}()
	return int80.Call(20, 0, 0, 0), false
}

// int80Outcome is what one int80 child reported.
type int80Outcome struct {
	unavailable bool // the 32-bit entry faulted: SIGSEGV in the child
	result      int32
	pid         int
}

// classifyInt80 reads an int80 child's end: its marker line, or a death
// by SIGSEGV (caught or not), means the entry is unavailable; anything
// else unexpected is an error.
func classifyInt80(stdout, stderr string, runErr error) (int80Outcome, error) {
	if strings.Contains(stdout, int80Unavailable) {
		return int80Outcome{unavailable: true}, nil
	}
	var ee *exec.ExitError
	if errors.As(runErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGSEGV {
			return int80Outcome{unavailable: true}, nil
		}
		if strings.Contains(stderr, "signal SIGSEGV") {
			return int80Outcome{unavailable: true}, nil
		}
	}
	if runErr != nil {
		return int80Outcome{}, fmt.Errorf("int80 child: %w; stderr: %s", runErr, stderr)
	}
	var o int80Outcome
	if _, err := fmt.Sscanf(strings.TrimSpace(stdout), "int80 %d %d", &o.result, &o.pid); err != nil {
		return int80Outcome{}, fmt.Errorf("int80 child printed %q: %w", stdout, err)
	}
	return o, nil
}

// probeInt80 runs the int80 helper, under the filter if filtered.
func probeInt80(t *testing.T, filtered bool) int80Outcome {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("int $0x80 exists on amd64 only")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec // G702: re-executes this test binary as the helper
	cmd.Env = append(os.Environ(), helperEnv+"=int80")
	if filtered {
		cmd.Env = append(cmd.Env, int80FilterEnv+"=1")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	o, err := classifyInt80(stdout.String(), stderr.String(), runErr)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestInt80WorksUnfiltered shows the i386 probe is real: without the filter
// the 32-bit entry answers getpid with the child's pid — where the kernel
// offers that entry at all.
func TestInt80WorksUnfiltered(t *testing.T) {
	o := probeInt80(t, false)
	if o.unavailable {
		t.Skip("32-bit entry unavailable on this kernel (int $0x80 faults with SIGSEGV, e.g. ia32_emulation=0): nothing to probe")
	}
	if o.result == -int32(unix.ENOSYS) || o.result == -int32(unix.EFAULT) {
		t.Skipf("kernel without IA32 emulation (int $0x80 -> %d)", o.result)
	}
	if int(o.result) != o.pid {
		t.Fatalf("i386 getpid via int $0x80 = %d, want the child's pid %d", o.result, o.pid)
	}
}

// TestInstallDeniesInt80: under the filter the 32-bit entry is refused
// (EPERM, by the architecture check) — or unavailable altogether, which
// holds the same property without the filter's help.
func TestInstallDeniesInt80(t *testing.T) {
	requireSeccomp(t)
	o := probeInt80(t, true)
	if o.unavailable {
		t.Log("32-bit entry unavailable on this kernel (SIGSEGV): unreachable with or without the filter")
		return
	}
	if o.result != -int32(unix.EPERM) {
		t.Fatalf("i386 getpid via int $0x80 under the filter = %d, want -EPERM", o.result)
	}
}

func TestClassifyInt80(t *testing.T) {
	segv := exec.Command("/bin/sh", "-c", "kill -SEGV $$")
	segvErr := segv.Run()
	exit2 := exec.Command("/bin/sh", "-c", "exit 2").Run()
	tests := []struct {
		name           string
		stdout, stderr string
		err            error
		want           int80Outcome
		wantErr        bool
	}{
		{"answered", "int80 4242 4242\n", "", nil, int80Outcome{result: 4242, pid: 4242}, false},
		{"refused", "int80 -1 77\n", "", nil, int80Outcome{result: -1, pid: 77}, false},
		{"fault caught in the child", int80Unavailable + "\n", "", nil, int80Outcome{unavailable: true}, false},
		{"child killed by SIGSEGV", "", "", segvErr, int80Outcome{unavailable: true}, false},
		{"Go runtime's fault crash", "", "unexpected fault address 0x0\nfatal error: fault\n[signal SIGSEGV: segmentation violation code=0x80 addr=0x0 pc=0x5ef834]\n", exit2, int80Outcome{unavailable: true}, false},
		{"other failure", "", "helper: boom\n", exit2, int80Outcome{}, true},
		{"garbage", "hello\n", "", nil, int80Outcome{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := classifyInt80(tc.stdout, tc.stderr, tc.err)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("classifyInt80 = %+v, %v; want %+v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// closeIfFD closes the descriptor a probe unexpectedly obtained.
func closeIfFD(r1, _ uintptr, e syscall.Errno) error {
	if e != 0 {
		return e
	}
	_ = unix.Close(int(r1))
	return nil
}

// helperDeny installs the filter and runs each forbidden operation with
// arguments that are harmless if the filter were missing (bad paths, bad
// magic numbers, invalid flags), printing the errno of each.
func helperDeny() error {
	dir := os.Getenv(helperDirEnv)
	if err := Install(); err != nil {
		return err
	}
	str := func(s string) uintptr {
		p, err := unix.BytePtrFromString(s)
		if err != nil {
			panic(err)
		}
		return uintptr(unsafe.Pointer(p)) //nolint:gosec // G103: raw execveat argument
	}
	execWithFlags := func(flags uintptr) error {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
		return cmd.Run()
	}
	var uringParams [120]byte
	probes := []struct {
		name string
		run  func() error
	}{
		{"mount", func() error {
			err := unix.Mount("none", dir, "tmpfs", 0, "")
			if err == nil {
				_ = unix.Unmount(dir, unix.MNT_DETACH)
			}
			return err
		}},
		{"umount2", func() error { return unix.Unmount("/nonexistent-sandhold", 0) }},
		{"pivot_root", func() error { return unix.PivotRoot("/nonexistent-sandhold", "/nonexistent-sandhold") }},
		{"chroot", func() error { return unix.Chroot("/nonexistent-sandhold") }},
		{"fsopen", func() error { return closeIfFD(unix.RawSyscall(unix.SYS_FSOPEN, str("tmpfs"), 0, 0)) }},
		{"open_tree", func() error {
			atFDCWD := unix.AT_FDCWD
			return closeIfFD(unix.RawSyscall(unix.SYS_OPEN_TREE, uintptr(atFDCWD), str("/"), unix.OPEN_TREE_CLOEXEC))
		}},
		{"process_vm_readv", func() error {
			return rawErr(unix.RawSyscall6(unix.SYS_PROCESS_VM_READV, uintptr(os.Getpid()), 0, 0, 0, 0, 0))
		}},
		{"unshare_newuser", func() error { return unix.Unshare(unix.CLONE_NEWUSER) }},
		{"unshare_newuts", func() error {
			runtime.LockOSThread() // if it ever succeeded, only this thread changes
			return unix.Unshare(unix.CLONE_NEWUTS)
		}},
		{"setns", func() error { return unix.Setns(-1, 0) }},
		{"clone_newns", func() error { return execWithFlags(unix.CLONE_NEWNS) }},
		{"clone_newuser", func() error { return execWithFlags(unix.CLONE_NEWUSER) }},
		{"clone_newnet", func() error { return execWithFlags(unix.CLONE_NEWNET) }},
		// size 0 is invalid, so even without the filter nothing is created.
		{"clone3", func() error { return rawErr(unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)) }},
		{"bpf", func() error { return rawErr(unix.RawSyscall(unix.SYS_BPF, 0, 0, 0)) }},
		{"perf_event_open", func() error {
			return rawErr(unix.RawSyscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0))
		}},
		{"userfaultfd", func() error { return closeIfFD(unix.RawSyscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)) }},
		{"io_uring_setup", func() error {
			return closeIfFD(unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&uringParams[0])), 0)) //nolint:gosec // G103: raw io_uring_setup the filter must refuse
		}},
		{"keyctl", func() error {
			_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
			return err
		}},
		{"add_key", func() error {
			_, err := unix.AddKey("user", "sandhold-seccomp-test", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
			return err
		}},
		{"request_key", func() error {
			_, err := unix.RequestKey("user", "sandhold-seccomp-test-missing", "", 0)
			return err
		}},
		{"name_to_handle_at", func() error {
			_, _, err := unix.NameToHandleAt(unix.AT_FDCWD, "/", 0)
			return err
		}},
		{"open_by_handle_at", func() error { return rawErr(unix.RawSyscall(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), 0, 0)) }},
		{"init_module", func() error { return rawErr(unix.RawSyscall(unix.SYS_INIT_MODULE, 0, 0, str(""))) }},
		{"delete_module", func() error { return unix.DeleteModule("sandhold_no_such_module", 0) }},
		// 0x00ff0000 is no valid KEXEC_ARCH: refused before anything loads.
		{"kexec_load", func() error { return rawErr(unix.RawSyscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0x00ff0000, 0, 0)) }},
		// Wrong magic numbers: the kernel refuses before doing anything.
		{"reboot", func() error { return rawErr(unix.RawSyscall6(unix.SYS_REBOOT, 1, 2, 0, 0, 0, 0)) }},
		{"swapoff", func() error { return rawErr(unix.RawSyscall(unix.SYS_SWAPOFF, str("/nonexistent-sandhold"), 0, 0)) }},
		{"acct", func() error { return unix.Acct("/nonexistent-sandhold/acct") }},
		// NULL, NULL changes nothing.
		{"settimeofday", func() error { return rawErr(unix.RawSyscall(unix.SYS_SETTIMEOFDAY, 0, 0, 0)) }},
		{"clock_settime", func() error {
			var ts unix.Timespec
			return rawErr(unix.RawSyscall(unix.SYS_CLOCK_SETTIME, 1000, uintptr(unsafe.Pointer(&ts)), 0)) //nolint:gosec // G103: raw clock_settime the filter must refuse
		}},
		{"adjtimex_read", func() error { // modes 0 only reads
			var tx unix.Timex
			_, err := unix.Adjtimex(&tx)
			return err
		}},
		{"syslog_size", func() error { return rawErr(unix.RawSyscall(unix.SYS_SYSLOG, 10, 0, 0)) }},
		{"personality_addr_no_randomize", func() error { return rawErr(unix.RawSyscall(unix.SYS_PERSONALITY, 0x0040000, 0, 0)) }},
		{"personality_read_implies_exec", func() error { return rawErr(unix.RawSyscall(unix.SYS_PERSONALITY, 0x0400000, 0, 0)) }},
		{"socket_packet", func() error {
			return closeIfFD(unix.RawSyscall(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0))
		}},
		{"socket_inet_raw", func() error {
			return closeIfFD(unix.RawSyscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP))
		}},
		{"socket_inet_mptcp", func() error {
			return closeIfFD(unix.RawSyscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 262))
		}},
		// SOCK_PACKET (10): bit 0 clear, which a test of single type bits
		// took for DGRAM. Root of this helper holds CAP_NET_RAW, so only
		// the filter refuses it. (Protocol 0: a packet socket that receives
		// nothing, should it be made.)
		{"socket_inet_sock_packet", func() error {
			return closeIfFD(unix.RawSyscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_PACKET|unix.SOCK_CLOEXEC, 0))
		}},
		{"ioctl_tiocsti", func() error { return ptyIoctl(unix.TIOCSTI) }},
		{"ioctl_tioclinux", func() error { return ptyIoctl(unix.TIOCLINUX) }},
		// i386_getpid runs in a child of its own: TestInstallDeniesInt80.
		{"x32_getpid", func() error { return rawErr(unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)) }},
		{"iopl", func() error { return rawErr(unix.RawSyscall(sysIOPL, 0, 0, 0)) }},
		// Last among the denials: were it allowed, every later exec would
		// stop with SIGTRAP for a tracer that never comes.
		{"ptrace_traceme", func() error { return rawErr(unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)) }},
		// Still allowed, for contrast: the filter is not a blanket refusal.
		{"personality_query", func() error { return rawErr(unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)) }},
		{"socket_inet_stream", func() error {
			return closeIfFD(unix.RawSyscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0))
		}},
		{"socket_netlink_raw", func() error {
			return closeIfFD(unix.RawSyscall(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE))
		}},
	}
	for _, p := range probes {
		fmt.Printf("%s %d\n", p.name, errnoOf(p.run()))
	}
	return nil
}

func TestInstallDenies(t *testing.T) {
	requireSeccomp(t)
	res := parseResults(t, runChild(t, "deny"))
	eperm, enosys := int(unix.EPERM), int(unix.ENOSYS)
	want := []struct {
		probe string
		errno int
	}{
		{"mount", eperm}, {"umount2", eperm}, {"pivot_root", eperm}, {"chroot", eperm},
		{"fsopen", eperm}, {"open_tree", eperm}, {"ptrace_traceme", eperm},
		{"process_vm_readv", eperm}, {"unshare_newuser", eperm}, {"unshare_newuts", eperm},
		{"setns", eperm}, {"clone_newns", eperm}, {"clone_newuser", eperm}, {"clone_newnet", eperm},
		{"clone3", enosys}, {"bpf", eperm}, {"perf_event_open", eperm}, {"userfaultfd", eperm},
		{"io_uring_setup", eperm}, {"keyctl", eperm}, {"add_key", eperm}, {"request_key", eperm},
		{"name_to_handle_at", eperm}, {"open_by_handle_at", eperm}, {"init_module", eperm},
		{"delete_module", eperm}, {"kexec_load", eperm}, {"reboot", eperm}, {"swapoff", eperm},
		{"acct", eperm}, {"settimeofday", eperm}, {"clock_settime", eperm}, {"adjtimex_read", eperm},
		{"syslog_size", eperm}, {"personality_addr_no_randomize", eperm},
		{"personality_read_implies_exec", eperm}, {"socket_packet", eperm}, {"socket_inet_raw", eperm}, {"socket_inet_mptcp", eperm},
		{"socket_inet_sock_packet", eperm},
		{"ioctl_tiocsti", eperm}, {"ioctl_tioclinux", eperm}, {"x32_getpid", enosys}, {"iopl", eperm},
		{"personality_query", 0}, {"socket_inet_stream", 0}, {"socket_netlink_raw", 0},
	}
	for _, w := range want {
		t.Run(w.probe, func(t *testing.T) {
			got, ok := res[w.probe]
			if !ok {
				t.Fatalf("helper did not report %s", w.probe)
			}
			if n, _ := strconv.Atoi(got); n != w.errno {
				t.Errorf("%s: errno %s (%v), want %d (%v)", w.probe, got, syscall.Errno(n), w.errno, syscall.Errno(w.errno))
			}
		})
	}
}

// TestUnfilteredBaseline shows the deny probes are meaningful: as root,
// without the filter, several of them succeed or fail differently.
func TestUnfilteredBaseline(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("baseline needs root: as a user the probes fail with EPERM anyway")
	}
	if err := unix.Setns(-1, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("setns(-1) unfiltered = %v, want EBADF", err)
	}
	if err := unix.Chroot("/nonexistent-sandhold"); !errors.Is(err, unix.ENOENT) {
		t.Errorf("chroot unfiltered = %v, want ENOENT", err)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0); e != unix.EINVAL {
		t.Errorf("clone3(NULL, 0) unfiltered = %v, want EINVAL", e)
	}
}

// helperWork installs the filter and then does the ordinary work a sandbox
// and its init must still be able to do. Each step prints "name ok" or
// "name <error>".
func helperWork() error {
	dir := os.Getenv(helperDirEnv)
	if err := Install(); err != nil {
		return err
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"shell_pipeline", func() error {
			out, err := exec.Command("/bin/sh", "-c", "ls / | wc -l; echo ok").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			if !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
				return fmt.Errorf("output %q", out)
			}
			return nil
		}},
		{"goroutines", goroutineWorkload},
		{"tcp_loopback", tcpLoopback},
		{"python3", func() error {
			return runTool("/usr/bin/python3", "-c", "import json,subprocess,threading; print(1)")
		}},
		{"python3_subprocess_threads", func() error {
			return runTool("/usr/bin/python3", "-c",
				"import subprocess,threading,multiprocessing\n"+
					"t=threading.Thread(target=lambda: subprocess.run(['true'],check=True)); t.start(); t.join()\n"+
					"print(subprocess.run(['sh','-c','echo 1'],capture_output=True,check=True).stdout.decode().strip())")
		}},
		{"node", func() error {
			return runTool("/usr/bin/node", "-e", "require('child_process').execSync('true'); console.log(1)")
		}},
		{"git", func() error {
			g := filepath.Join(dir, "repo")
			return runTool("/bin/sh", "-c", "git init -q "+g+" && cd "+g+" && git -c user.email=a@b -c user.name=n commit -q --allow-empty -m x && git log --oneline | wc -l")
		}},
		{"credentials_setsid", func() error {
			// What the init does for every command: new session, other
			// uid/gid, supplementary groups cleared.
			cmd := exec.Command("/bin/sh", "-c", "id -u; id -g")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
			out, err := cmd.CombinedOutput()
			if os.Geteuid() != 0 {
				return nil // changing uid needs root; the point is the filter
			}
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			if strings.Fields(string(out))[0] != "65534" {
				return fmt.Errorf("ran as %q", out)
			}
			return nil
		}},
		{"setpgid_prlimit_pidfd_waitid", processControl},
		{"scm_rights", scmRights},
		{"pty", ptySession},
		{"files", func() error { return fileOps(dir) }},
		{"epoll", func() error {
			fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
			if err != nil {
				return err
			}
			return unix.Close(fd)
		}},
		{"setfsuid", func() error { return unix.Setfsuid(os.Geteuid()) }},
	}
	for _, s := range steps {
		err := s.run()
		switch {
		case errors.Is(err, errMissingTool):
			fmt.Printf("%s skip\n", s.name)
		case err != nil:
			fmt.Printf("%s %s\n", s.name, strings.ReplaceAll(err.Error(), "\n", " | "))
		default:
			fmt.Printf("%s ok\n", s.name)
		}
	}
	return nil
}

var errMissingTool = errors.New("tool not installed")

func runTool(path string, args ...string) error {
	if _, err := os.Stat(path); err != nil {
		return errMissingTool
	}
	out, err := exec.Command(path, args...).CombinedOutput() //nolint:gosec // G702: fixed tool paths from the test table
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// goroutineWorkload makes the Go runtime create threads, preempt, collect
// garbage and park goroutines, all under the filter.
func goroutineWorkload() error {
	const workers, rounds = 2000, 50
	var wg sync.WaitGroup
	results := make(chan int, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sum := 0
			buf := make([]byte, 0, 1)
			for r := range rounds {
				buf = append(buf, make([]byte, 512)...)
				sum += w * r
				if r%10 == 0 {
					runtime.Gosched()
				}
			}
			results <- sum + len(buf)
		}()
	}
	done := make(chan struct{})
	go func() { runtime.GC(); time.Sleep(10 * time.Millisecond); close(done) }()
	wg.Wait()
	<-done
	close(results)
	n := 0
	for range results {
		n++
	}
	if n != workers {
		return fmt.Errorf("%d of %d workers reported", n, workers)
	}
	return nil
}

func tcpLoopback() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer func() { _ = ln.Close() }()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(c, c)
		_ = c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return fmt.Errorf("echo %q", buf)
	}
	return nil
}

func processControl() error {
	cmd := exec.Command("/bin/sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	lim := unix.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		return fmt.Errorf("prlimit: %w", err)
	}
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer func() { _ = unix.Close(pfd) }()
	if err := unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0); err != nil {
		return fmt.Errorf("pidfd_send_signal: %w", err)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PIDFD, pfd, &info, unix.WEXITED, nil); err != nil {
		return fmt.Errorf("waitid: %w", err)
	}
	return nil
}

func scmRights() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fds[0]); _ = unix.Close(fds[1]) }()
	f, err := os.Open("/etc/hostname")
	if err != nil {
		f, err = os.Open("/proc/self/stat")
		if err != nil {
			return err
		}
	}
	defer func() { _ = f.Close() }()
	if err := unix.Sendmsg(fds[0], []byte("x"), unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		return fmt.Errorf("sendmsg: %w", err)
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(fds[1], buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return fmt.Errorf("recvmsg: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("control messages: %d, %v", len(msgs), err) //nolint:errorlint // err may be nil (that is the failure); %v prints it readably
	}
	got, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(got) != 1 {
		return fmt.Errorf("rights: %v", err) //nolint:errorlint // err may be nil (that is the failure); %v prints it readably
	}
	return unix.Close(got[0])
}

func ptySession() error {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer func() { _ = master.Close() }()
	mfd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		return fmt.Errorf("ptsname: %w", err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer func() { _ = slave.Close() }()
	if err := unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 100}); err != nil {
		return fmt.Errorf("TIOCSWINSZ: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", "stty size; test -t 0 && echo tty")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// Setctty makes the child issue TIOCSCTTY on its stdin.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		return err
	}
	_ = slave.Close()
	out, _ := io.ReadAll(master) // EIO once the child side is gone
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	if !strings.Contains(string(out), "40 100") || !strings.Contains(string(out), "tty") {
		return fmt.Errorf("pty output %q", out)
	}
	return nil
}

func fileOps(dir string) error {
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(d) }()
	fd, err := unix.Openat2(d, "a", &unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC, Mode: 0o600, Resolve: unix.RESOLVE_BENEATH})
	if err != nil {
		return fmt.Errorf("openat2: %w", err)
	}
	_ = unix.Close(fd)
	if err := unix.Fchownat(d, "a", os.Geteuid(), os.Getegid(), 0); err != nil {
		return fmt.Errorf("fchownat: %w", err)
	}
	if err := unix.Renameat2(d, "a", d, "b", unix.RENAME_NOREPLACE); err != nil {
		return fmt.Errorf("renameat2: %w", err)
	}
	if err := unix.Linkat(d, "b", d, "c", 0); err != nil {
		return fmt.Errorf("linkat: %w", err)
	}
	if err := unix.Symlinkat("b", d, "s"); err != nil {
		return fmt.Errorf("symlinkat: %w", err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		return fmt.Errorf("mkfifo: %w", err)
	}
	return nil
}

func TestInstallKeepsOrdinaryWorkRunning(t *testing.T) {
	requireSeccomp(t)
	res := parseResults(t, runChild(t, "work"))
	steps := []string{
		"shell_pipeline", "goroutines", "tcp_loopback", "python3", "python3_subprocess_threads",
		"node", "git", "credentials_setsid", "setpgid_prlimit_pidfd_waitid", "scm_rights", "pty",
		"files", "epoll", "setfsuid",
	}
	for _, s := range steps {
		t.Run(s, func(t *testing.T) {
			switch got := res[s]; got {
			case "ok":
			case "skip":
				t.Skipf("%s is not installed on this machine", s)
			case "":
				t.Fatalf("helper did not report %s", s)
			default:
				t.Errorf("%s failed under the filter: %s", s, got)
			}
		})
	}
}

// helperThreads checks TSYNC: a thread that existed, locked, before Install
// is filtered too, and every task has seccomp mode 2 and no_new_privs.
func helperThreads() error {
	ready, probe, result := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		runtime.LockOSThread() // keep this thread; it predates the filter
		close(ready)
		<-probe
		result <- unix.Unshare(unix.CLONE_NEWUTS)
	}()
	<-ready
	if err := Install(); err != nil {
		return err
	}
	close(probe)
	fmt.Printf("old_thread_unshare %d\n", errnoOf(<-result))

	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	bad := 0
	for _, task := range tasks {
		st, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
		if err != nil {
			continue // the thread exited
		}
		if !bytes.Contains(st, []byte("\nSeccomp:\t2\n")) || !bytes.Contains(st, []byte("\nNoNewPrivs:\t1\n")) {
			bad++
		}
	}
	fmt.Printf("tasks %d\nunfiltered_tasks %d\n", len(tasks), bad)
	return nil
}

func TestInstallCoversAllThreads(t *testing.T) {
	requireSeccomp(t)
	res := parseResults(t, runChild(t, "threads"))
	if got := res["old_thread_unshare"]; got != strconv.Itoa(int(unix.EPERM)) {
		t.Errorf("unshare on a thread that predates Install: errno %s, want EPERM", got)
	}
	if n, _ := strconv.Atoi(res["tasks"]); n < 2 {
		t.Errorf("helper had %s threads; the check needs several", res["tasks"])
	}
	if got := res["unfiltered_tasks"]; got != "0" {
		t.Errorf("%s threads without seccomp mode 2 / no_new_privs", got)
	}
}

// TestABIConstants checks the numbers policy.go spells out by hand.
func TestABIConstants(t *testing.T) {
	pairs := []struct {
		name      string
		got, want int
	}{
		{"CLONE_NEWNS", cloneNewNS, unix.CLONE_NEWNS},
		{"CLONE_NEWCGROUP", cloneNewCgroup, unix.CLONE_NEWCGROUP},
		{"CLONE_NEWUTS", cloneNewUTS, unix.CLONE_NEWUTS},
		{"CLONE_NEWIPC", cloneNewIPC, unix.CLONE_NEWIPC},
		{"CLONE_NEWUSER", cloneNewUser, unix.CLONE_NEWUSER},
		{"CLONE_NEWPID", cloneNewPID, unix.CLONE_NEWPID},
		{"CLONE_NEWNET", cloneNewNet, unix.CLONE_NEWNET},
		{"AF_UNIX", afUNIX, unix.AF_UNIX},
		{"AF_INET", afINET, unix.AF_INET},
		{"AF_INET6", afINET6, unix.AF_INET6},
		{"AF_NETLINK", afNETLINK, unix.AF_NETLINK},
		{"ENOSYS", errnoENOSYS, int(unix.ENOSYS)},
		{"IPPROTO_MPTCP&bit", unix.IPPROTO_MPTCP & ipprotoMPTCPBit, ipprotoMPTCPBit},
		{"IPPROTO_RAW&bit", unix.IPPROTO_RAW & ipprotoMPTCPBit, 0},
	}
	for _, p := range pairs {
		if p.got != p.want {
			t.Errorf("%s = %#x, want %#x", p.name, p.got, p.want)
		}
	}
}
