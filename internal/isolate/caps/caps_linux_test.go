package caps

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/testenv"
)

// Helper-process pattern: the changes are irreversible, so they happen in a
// re-exec of the test binary.
const helperEnv = "SANDHOLD_CAPS_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.SkipShort(t, "drops capabilities as root")
	if os.Geteuid() != 0 {
		t.Skip("needs root: dropping from the bounding set requires CAP_SETPCAP")
	}
}

// oldThread starts a goroutine locked to its own OS thread before the
// change and, when asked, reports that thread's status field.
func oldThread(field string) (ask func() string) {
	ready, probe, result := make(chan struct{}), make(chan struct{}), make(chan string)
	go func() {
		runtime.LockOSThread()
		close(ready)
		<-probe
		v, err := statusField("/proc/thread-self/status", field)
		if err != nil {
			result <- err.Error()
			return
		}
		result <- fmt.Sprintf("%016x", v)
	}()
	<-ready
	return func() string { close(probe); return <-result }
}

func shell(script string) (string, error) {
	out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func runHelper(mode string) error {
	switch mode {
	case "drop":
		before, err := Bounding()
		if err != nil {
			return err
		}
		ask := oldThread("CapBnd")
		if err := DropBoundingSet(); err != nil {
			return err
		}
		after, err := Bounding()
		if err != nil {
			return err
		}
		out, err := shell("grep CapBnd /proc/self/status")
		if err != nil {
			return fmt.Errorf("exec after drop: %w: %s", err, out)
		}
		fmt.Printf("before %016x\nafter %016x\nold_thread %s\nexec %s\n", before, after, ask(), strings.Fields(out)[1])
	case "thread":
		// The calling goroutine keeps its thread; the drop is that
		// thread's alone.
		runtime.LockOSThread()
		ask := oldThread("CapBnd")
		before, err := ThreadBounding()
		if err != nil {
			return err
		}
		if err := DropBoundingSetThread(); err != nil {
			return err
		}
		self, err := ThreadBounding()
		if err != nil {
			return err
		}
		union, err := Bounding()
		if err != nil {
			return err
		}
		// os/exec forks from the calling (locked) thread.
		out, err := shell("grep CapBnd /proc/self/status")
		if err != nil {
			return fmt.Errorf("exec after drop: %w: %s", err, out)
		}
		fmt.Printf("before %016x\nself %016x\nunion %016x\nold_thread %s\nexec %s\n", before, self, union, ask(), strings.Fields(out)[1])
	case "ambient":
		// Raise CAP_NET_BIND_SERVICE into this thread's ambient set first,
		// so there is something to clear.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return err
		}
		data[0].Inheritable |= 1 << unix.CAP_NET_BIND_SERVICE
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return err
		}
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, unix.CAP_NET_BIND_SERVICE, 0, 0); err != nil {
			return fmt.Errorf("raise ambient: %w", err)
		}
		before, err := Ambient()
		if err != nil {
			return err
		}
		if err := ClearAmbient(); err != nil {
			return err
		}
		after, err := Ambient()
		if err != nil {
			return err
		}
		out, err := shell("grep CapAmb /proc/self/status")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		fmt.Printf("before %016x\nafter %016x\nexec %s\n", before, after, strings.Fields(out)[1])
	case "nnp":
		ask := oldThread("NoNewPrivs")
		if err := SetNoNewPrivs(); err != nil {
			return err
		}
		out, err := shell("grep NoNewPrivs /proc/self/status")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		fmt.Printf("old_thread %s\nexec %s\n", ask(), strings.Fields(out)[1])
	default:
		return fmt.Errorf("unknown helper %q", mode)
	}
	return nil
}

func runChild(t *testing.T, mode string) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec // G702: re-executes this test binary as the helper
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper %s: %v\n%s%s", mode, err, stdout.String(), stderr.String())
	}
	res := map[string]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			res[k] = v
		}
	}
	return res
}

func TestDropBoundingSet(t *testing.T) {
	requireRoot(t)
	res := runChild(t, "drop")
	if res["before"] == "0000000000000000" {
		t.Fatal("bounding set was already empty: the test proves nothing")
	}
	for _, k := range []string{"after", "old_thread", "exec"} {
		if res[k] != "0000000000000000" {
			t.Errorf("%s: CapBnd %s, want 0000000000000000", k, res[k])
		}
	}
}

// TestDropBoundingSetThread: the per-thread drop empties the calling
// thread's bounding set and that of a command it forks, and leaves the
// process's other threads theirs (the init execs its keeper from one).
func TestDropBoundingSetThread(t *testing.T) {
	requireRoot(t)
	res := runChild(t, "thread")
	if res["before"] == "0000000000000000" || res["before"] == "" {
		t.Fatalf("bounding set empty before the drop: the test proves nothing (%v)", res)
	}
	for _, k := range []string{"self", "exec"} {
		if res[k] != "0000000000000000" {
			t.Errorf("%s: CapBnd %s, want 0000000000000000", k, res[k])
		}
	}
	if res["old_thread"] != res["before"] {
		t.Errorf("another thread's CapBnd %s after the drop, want it untouched (%s)", res["old_thread"], res["before"])
	}
	if res["union"] != res["before"] {
		t.Errorf("union over threads %s, want %s: only one thread dropped", res["union"], res["before"])
	}
}

func TestClearAmbient(t *testing.T) {
	requireRoot(t)
	res := runChild(t, "ambient")
	if res["before"] == "0000000000000000" {
		t.Fatal("ambient set was empty before clearing: the test proves nothing")
	}
	for _, k := range []string{"after", "exec"} {
		if res[k] != "0000000000000000" {
			t.Errorf("%s: CapAmb %s, want 0000000000000000", k, res[k])
		}
	}
}

func TestSetNoNewPrivs(t *testing.T) {
	res := runChild(t, "nnp")
	if res["old_thread"] != "0000000000000001" {
		t.Errorf("thread that predates the call: NoNewPrivs %s, want 1", res["old_thread"])
	}
	if res["exec"] != "1" {
		t.Errorf("exec'd shell: NoNewPrivs %s, want 1", res["exec"])
	}
}

func TestBoundingOfThisProcess(t *testing.T) {
	requireRoot(t)
	b, err := Bounding()
	if err != nil {
		t.Fatal(err)
	}
	last, err := LastCap()
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(1)<<(last+1) - 1; b != want {
		t.Logf("bounding set %#x, full would be %#x (a container runtime may have trimmed it)", b, want)
	}
	if b == 0 {
		t.Error("root test process reports an empty bounding set")
	}
}

func TestStatusField(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		content string
		field   string
		want    uint64
		wantErr bool
	}{
		{name: "bounding", content: "Name:\tx\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n", field: "CapBnd", want: 0x1ffffffffff},
		{name: "ambient-zero", content: "CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n", field: "CapAmb", want: 0},
		{name: "prefix-is-not-a-match", content: "CapBndX:\t1\n", field: "CapBnd", wantErr: true},
		{name: "missing", content: "Name:\tx\n", field: "CapBnd", wantErr: true},
		{name: "not-hex", content: "CapBnd:\tzz\n", field: "CapBnd", wantErr: true},
		{name: "too-wide", content: "CapBnd:\t1ffffffffffffffff\n", field: "CapBnd", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := statusField(p, tc.field)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("got %#x, want %#x", got, tc.want)
			}
		})
	}
}
