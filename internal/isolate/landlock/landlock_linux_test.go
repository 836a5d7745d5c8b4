package landlock

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/testenv"
)

// Helper-process pattern: Apply is irreversible, so it runs in a re-exec of
// the test binary (TestMain dispatches on helperEnv).
const (
	helperEnv = "SANDHOLD_LANDLOCK_HELPER"
	envRW     = "SANDHOLD_LL_RW"
	envOther  = "SANDHOLD_LL_OTHER"
	envRead   = "SANDHOLD_LL_READ"
	envConnOK = "SANDHOLD_LL_CONNECT_OK"
	envConnNo = "SANDHOLD_LL_CONNECT_NO"
	envBindOK = "SANDHOLD_LL_BIND_OK"
	envBindNo = "SANDHOLD_LL_BIND_NO"
	envAbstr  = "SANDHOLD_LL_ABSTRACT"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		if err := helperApply(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func requireLandlock(t *testing.T, abi int) {
	t.Helper()
	testenv.SkipShort(t, "applies landlock rules in a child")
	v, err := ABIVersion()
	if err != nil {
		t.Skipf("landlock unavailable: %v", err)
	}
	if v < abi {
		t.Skipf("kernel landlock ABI %d < %d", v, abi)
	}
}

func errnoOf(err error) int {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return int(en)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return 1000 + ee.ExitCode() // exit codes, kept apart from errnos
	}
	return -1
}

func envPort(name string) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	return n
}

// envPort16 is envPort for Rules, which take uint16 ports.
func envPort16(name string) uint16 {
	n, err := strconv.ParseUint(os.Getenv(name), 10, 16)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	return uint16(n)
}

// tcp makes a plain IPPROTO_TCP socket. Not net.Dial/net.Listen: since Go
// 1.24 net.Listen uses Multipath TCP, which Landlock does not govern.
func tcp(op func(fd int, sa unix.Sockaddr) error, port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	return op(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

func helperApply() error {
	rw, other := os.Getenv(envRW), os.Getenv(envOther)

	// A thread that exists (locked) before Apply: it must be restricted too.
	ready, probe, result := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		runtime.LockOSThread()
		close(ready)
		<-probe
		result <- os.WriteFile(filepath.Join(other, "from-old-thread"), []byte("x"), 0o600) //nolint:gosec // G703: a t.TempDir() of the parent test, passed in the environment
	}()
	<-ready

	start := time.Now()
	st, err := ApplyWithStatus(Rules{
		ReadOnly:       []string{"/"},
		ReadWrite:      []string{rw},
		ReadWriteFiles: []string{"/dev/null"},
		TCPConnect:     []uint16{envPort16(envConnOK)},
		TCPBind:        []uint16{envPort16(envBindOK)},
	})
	if err != nil {
		return err
	}
	fmt.Printf("apply_us %d\n", time.Since(start).Microseconds())
	fmt.Printf("status_abi %d\nstatus_tcp %v\nstatus_scoped_signals %v\nstatus_scoped_unix %v\nstatus_ioctl %v\n",
		st.ABI, st.TCPRestricted, st.ScopedSignals, st.ScopedAbstractUnix, st.DeviceIoctl)

	close(probe)
	oldThread := <-result

	probes := []struct {
		name string
		run  func() error
	}{
		{"write_rw", func() error { return os.WriteFile(filepath.Join(rw, "f"), []byte("x"), 0o600) }},       //nolint:gosec // G703: a t.TempDir() of the parent test, passed in the environment
		{"write_other", func() error { return os.WriteFile(filepath.Join(other, "f"), []byte("x"), 0o600) }}, //nolint:gosec // G703: a t.TempDir() of the parent test, passed in the environment
		{"mkdir_other", func() error { return os.Mkdir(filepath.Join(other, "d"), 0o700) }},                  //nolint:gosec // G703: a t.TempDir() of the parent test, passed in the environment
		{"truncate_other", func() error { return unix.Truncate(filepath.Join(other, "existing"), 0) }},
		{"remove_other", func() error { return os.Remove(filepath.Join(other, "existing")) }}, //nolint:gosec // G703: a t.TempDir() of the parent test, passed in the environment
		{"old_thread_write_other", func() error { return oldThread }},
		{"read_file", func() error { _, err := os.ReadFile(os.Getenv(envRead)); return err }}, //nolint:gosec // G703: a file the parent test created
		{"list_etc", func() error { _, err := os.ReadDir("/etc"); return err }},
		{"exec_true", func() error { return exec.Command("/bin/true").Run() }},
		{"write_devnull", func() error {
			f, err := os.OpenFile("/dev/null", os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			_, err = f.Write([]byte("x"))
			_ = f.Close()
			return err
		}},
		{"rename_within_rw", func() error {
			a, b := filepath.Join(rw, "a"), filepath.Join(rw, "b")
			if err := os.Mkdir(a, 0o700); err != nil { //nolint:gosec // G703: a t.TempDir() of the parent test, passed in the environment
				return err
			}
			if err := os.Mkdir(b, 0o700); err != nil { //nolint:gosec // G703: a t.TempDir() of the parent test, passed in the environment
				return err
			}
			if err := os.WriteFile(filepath.Join(a, "f"), []byte("x"), 0o600); err != nil { //nolint:gosec // G703: a t.TempDir() of the parent test, passed in the environment
				return err
			}
			return os.Rename(filepath.Join(a, "f"), filepath.Join(b, "f")) //nolint:gosec // G703: a t.TempDir() of the parent test, passed in the environment
		}},
		{"rename_rw_to_other", func() error { return os.Rename(filepath.Join(rw, "f"), filepath.Join(other, "moved")) }}, //nolint:gosec // G703: a t.TempDir() of the parent test, passed in the environment
		{"link_rw_to_other", func() error { return os.Link(filepath.Join(rw, "b", "f"), filepath.Join(other, "linked")) }},
		{"child_shell_write_rw", func() error {
			return exec.Command("/bin/sh", "-c", "echo x > "+filepath.Join(rw, "sh")).Run() //nolint:gosec // G702: rw is a t.TempDir() of the parent test
		}},
		{"child_shell_write_other", func() error {
			return exec.Command("/bin/sh", "-c", "echo x > "+filepath.Join(other, "sh")+" 2>/dev/null").Run() //nolint:gosec // G702: other is a t.TempDir() of the parent test
		}},
		{"tcp_connect_listed", func() error { return tcp(unix.Connect, envPort(envConnOK)) }},
		{"tcp_connect_unlisted", func() error { return tcp(unix.Connect, envPort(envConnNo)) }},
		{"tcp_bind_listed", func() error { return tcp(unix.Bind, envPort(envBindOK)) }},
		{"tcp_bind_unlisted", func() error { return tcp(unix.Bind, envPort(envBindNo)) }},
		{"signal_parent", func() error { return unix.Kill(os.Getppid(), 0) }},
		{"abstract_unix_connect", func() error {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer func() { _ = unix.Close(fd) }()
			return unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + os.Getenv(envAbstr)})
		}},
		// Informational: Landlock does not govern Multipath TCP (the
		// seccomp layer refuses such sockets).
		{"mptcp_bind_unlisted", func() error {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP)
			if err != nil {
				return err
			}
			defer func() { _ = unix.Close(fd) }()
			return unix.Bind(fd, &unix.SockaddrInet4{Port: envPort(envBindNo), Addr: [4]byte{127, 0, 0, 1}})
		}},
	}
	for _, p := range probes {
		fmt.Printf("%s %d\n", p.name, errnoOf(p.run()))
	}
	return nil
}

// freePort asks the kernel for an unused loopback port.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

func listen(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l
}

func TestApplyInChild(t *testing.T) {
	requireLandlock(t, 6)
	rw, other := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "existing"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	readPath := "/etc/hostname"
	if _, err := os.Stat(readPath); err != nil {
		readPath = "/etc/passwd"
	}
	connOK := listen(t, "tcp4", "127.0.0.1:0").Addr().(*net.TCPAddr).Port
	connNo := listen(t, "tcp4", "127.0.0.1:0").Addr().(*net.TCPAddr).Port
	abstract := fmt.Sprintf("sandhold-landlock-test-%d", os.Getpid())
	listen(t, "unix", "@"+abstract)

	cmd := exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec // G702: re-executes this test binary as the helper
	cmd.Env = append(os.Environ(), helperEnv+"=1", envRW+"="+rw, envOther+"="+other, envRead+"="+readPath,
		envConnOK+"="+strconv.Itoa(connOK), envConnNo+"="+strconv.Itoa(connNo),
		envBindOK+"="+strconv.Itoa(freePort(t)), envBindNo+"="+strconv.Itoa(freePort(t)),
		envAbstr+"="+abstract)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	res := map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			res[k] = v
		}
	}

	eacces, eperm := strconv.Itoa(int(unix.EACCES)), strconv.Itoa(int(unix.EPERM))
	cases := []struct {
		probe string
		want  []string // any of these
	}{
		{"status_tcp", []string{"true"}},
		{"status_scoped_signals", []string{"true"}},
		{"status_scoped_unix", []string{"true"}},
		{"write_rw", []string{"0"}},
		{"write_other", []string{eacces}},
		{"mkdir_other", []string{eacces}},
		{"truncate_other", []string{eacces}},
		{"remove_other", []string{eacces}},
		{"old_thread_write_other", []string{eacces}},
		{"read_file", []string{"0"}},
		{"list_etc", []string{"0"}},
		{"exec_true", []string{"0"}},
		{"write_devnull", []string{"0"}},
		{"rename_within_rw", []string{"0"}},
		// The kernel says EXDEV when only the "refer" right is missing,
		// EACCES when the destination forbids creating files at all.
		{"rename_rw_to_other", []string{eacces, strconv.Itoa(int(unix.EXDEV))}},
		{"link_rw_to_other", []string{eacces, strconv.Itoa(int(unix.EXDEV))}},
		{"child_shell_write_rw", []string{"0"}},
		{"child_shell_write_other", []string{"1001", "1002"}}, // sh: cannot create
		{"tcp_connect_listed", []string{"0"}},
		{"tcp_connect_unlisted", []string{eacces}},
		{"tcp_bind_listed", []string{"0"}},
		{"tcp_bind_unlisted", []string{eacces}},
		{"signal_parent", []string{eperm}},
		{"abstract_unix_connect", []string{eperm}},
	}
	for _, c := range cases {
		t.Run(c.probe, func(t *testing.T) {
			got, ok := res[c.probe]
			if !ok {
				t.Fatalf("helper did not report %s\n%s", c.probe, stdout.String())
			}
			for _, w := range c.want {
				if got == w {
					return
				}
			}
			t.Errorf("%s = %s, want one of %v", c.probe, got, c.want)
		})
	}
	t.Logf("ApplyWithStatus took %s µs", res["apply_us"])
	t.Logf("ABI %s; Multipath TCP bind on an unlisted port under landlock alone: errno %s (0 = not governed; seccomp refuses MPTCP sockets)",
		res["status_abi"], res["mptcp_bind_unlisted"])

	// The other directory is untouched.
	if b, err := os.ReadFile(filepath.Join(other, "existing")); err != nil || string(b) != "keep" {
		t.Errorf("other/existing = %q, %v", b, err)
	}
	for _, name := range []string{"f", "d", "moved", "linked", "sh", "from-old-thread"} {
		if _, err := os.Lstat(filepath.Join(other, name)); err == nil {
			t.Errorf("the sandboxed child created %s outside its ReadWrite directory", name)
		}
	}
}

func TestABIVersionAndPlan(t *testing.T) {
	requireLandlock(t, MinABI)
	v, err := ABIVersion()
	if err != nil || v < 1 {
		t.Fatalf("ABIVersion = %d, %v", v, err)
	}
	st, err := Plan(Rules{ReadOnly: []string{"/"}, ReadWrite: []string{t.TempDir()}, AllowAllTCP: v < minABITCP})
	if err != nil {
		t.Fatal(err)
	}
	if st.ABI != v || st.FSRights == "" {
		t.Errorf("status %+v", st)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := Plan(Rules{ReadOnly: []string{missing}, AllowAllTCP: true}); err == nil {
		t.Error("a missing required path was accepted")
	}
	st, err = Plan(Rules{ReadOnly: []string{"/", missing}, Optional: []string{missing}, AllowAllTCP: true})
	if err != nil || len(st.Skipped) != 1 || st.Skipped[0] != missing {
		t.Errorf("optional missing path: %+v, %v", st, err)
	}
}
