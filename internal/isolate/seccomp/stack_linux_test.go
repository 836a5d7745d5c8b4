package seccomp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/isolate/caps"
	"github.com/sandhold/sandhold/internal/isolate/landlock"
	"golang.org/x/sys/unix"
)

// helperStack applies the three layers in the order the init should use
// them — capabilities, landlock, seccomp last, so the other layers' setup
// calls never depend on the syscall table — and checks that ordinary work
// still runs while writes outside the ReadWrite directory, TCP and mount
// fail.
func helperStack() error {
	dir := os.Getenv(helperDirEnv)
	if os.Geteuid() == 0 {
		if err := caps.DropBoundingSet(); err != nil {
			return err
		}
	}
	if err := caps.ClearAmbient(); err != nil {
		return err
	}
	if err := caps.SetNoNewPrivs(); err != nil {
		return err
	}
	rw := filepath.Join(dir, "rw")
	if err := os.Mkdir(rw, 0o700); err != nil { //nolint:gosec // G703: dir is the test's t.TempDir(), passed to the helper child
		return err
	}
	if _, err := landlock.ApplyWithStatus(landlock.Rules{
		ReadOnly:       []string{"/"},
		ReadWrite:      []string{rw, "/dev/pts"},
		ReadWriteFiles: []string{"/dev/null", "/dev/ptmx"},
	}); err != nil {
		return err
	}
	if err := Install(); err != nil {
		return err
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"shell_pipeline", func() error {
			out, err := exec.Command("/bin/sh", "-c", "ls / | wc -l; echo ok > "+filepath.Join(rw, "f")+"; cat "+filepath.Join(rw, "f")).CombinedOutput() //nolint:gosec // G702: rw is under the test's t.TempDir()
			if err != nil || !strings.Contains(string(out), "ok") {
				return fmt.Errorf("%v: %s", err, out) //nolint:errorlint // err may be nil (that is the failure); %v prints it readably
			}
			return nil
		}},
		{"python3", func() error {
			return runTool("/usr/bin/python3", "-c", "import json,subprocess,threading; print(1)")
		}},
		{"pty", ptySession},
		{"caps_in_child", func() error {
			out, err := exec.Command("/bin/sh", "-c", "grep -E 'CapBnd|NoNewPrivs|Seccomp:' /proc/self/status").CombinedOutput()
			if err != nil {
				return err
			}
			s := string(out)
			if !strings.Contains(s, "NoNewPrivs:\t1") || !strings.Contains(s, "Seccomp:\t2") {
				return fmt.Errorf("status %q", s)
			}
			if os.Geteuid() == 0 && !strings.Contains(s, "CapBnd:\t0000000000000000") {
				return fmt.Errorf("status %q", s)
			}
			return nil
		}},
		{"write_outside_denied", func() error {
			err := os.WriteFile(filepath.Join(dir, "outside"), []byte("x"), 0o600) //nolint:gosec // G703: dir is the test's t.TempDir()
			if !errors.Is(err, syscall.EACCES) {
				return fmt.Errorf("write outside the ReadWrite dir: %v, want EACCES", err) //nolint:errorlint // err may be nil (that is the failure); %v prints it readably
			}
			return nil
		}},
		{"tcp_denied", func() error {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer func() { _ = unix.Close(fd) }()
			err = unix.Bind(fd, &unix.SockaddrInet4{Port: 0, Addr: [4]byte{127, 0, 0, 1}})
			if !errors.Is(err, syscall.EACCES) {
				return fmt.Errorf("bind with no TCP allowed: %v, want EACCES", err) //nolint:errorlint // err may be nil (that is the failure); %v prints it readably
			}
			return nil
		}},
		{"mount_denied", func() error {
			if err := unix.Mount("none", rw, "tmpfs", 0, ""); !errors.Is(err, syscall.EPERM) {
				return fmt.Errorf("mount: %v, want EPERM", err) //nolint:errorlint // err may be nil (that is the failure); %v prints it readably
			}
			return nil
		}},
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

func TestLayersTogether(t *testing.T) {
	requireSeccomp(t)
	if v, err := landlock.ABIVersion(); err != nil || v < 6 {
		t.Skipf("landlock ABI %d (%v): need 6", v, err)
	}
	res := parseResults(t, runChild(t, "stack"))
	for _, s := range []string{"shell_pipeline", "python3", "pty", "caps_in_child", "write_outside_denied", "tcp_denied", "mount_denied"} {
		t.Run(s, func(t *testing.T) {
			switch got := res[s]; got {
			case "ok":
			case "skip":
				t.Skipf("%s not installed", s)
			case "":
				t.Fatalf("helper did not report %s", s)
			default:
				t.Error(got)
			}
		})
	}
}

// helperBench times cheap syscalls before and after Install. It prints
// nanoseconds per call; BenchmarkFilterOverhead reports them.
func helperBench() error {
	const n = 300000
	calls := []struct {
		name string
		nr   uintptr
	}{
		{"getpid", unix.SYS_GETPID},        // early in the chain
		{"getppid", unix.SYS_GETPPID},      // middle
		{"getrandom0", unix.SYS_GETRANDOM}, // near the end (called with a 0-byte buffer)
	}
	measure := func() []float64 {
		out := make([]float64, len(calls))
		for i, c := range calls {
			start := time.Now()
			for range n {
				_, _, _ = unix.RawSyscall(c.nr, 0, 0, 0) // timing only; the result does not matter
			}
			out[i] = float64(time.Since(start).Nanoseconds()) / n
		}
		return out
	}
	before := measure()
	start := time.Now()
	if err := Install(); err != nil {
		return err
	}
	installNs := time.Since(start).Nanoseconds()
	after := measure()
	fmt.Printf("install %d %d\n", installNs, installNs) // one figure, in the two-column format
	for i, c := range calls {
		fmt.Printf("%s %.1f %.1f\n", c.name, before[i], after[i])
	}
	return nil
}

// BenchmarkFilterOverhead reports the cost the filter adds per syscall,
// measured in a child (the filter cannot be removed once installed).
func BenchmarkFilterOverhead(b *testing.B) {
	if err := Available(); err != nil {
		b.Skip(err)
	}
	// One child measures with its own fixed loop; b.N is not used.
	cmd := exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec // G702: re-executes this test binary as the helper
	cmd.Env = append(os.Environ(), helperEnv+"=bench")
	out, err := cmd.Output()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		before, _ := strconv.ParseFloat(f[1], 64)
		after, _ := strconv.ParseFloat(f[2], 64)
		if f[0] == "install" {
			b.ReportMetric(before, "install-ns")
			continue
		}
		b.ReportMetric(before, f[0]+"-ns/unfiltered")
		b.ReportMetric(after, f[0]+"-ns/filtered")
	}
}
