package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"github.com/sandhold/sandhold/internal/agent/initbin"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/isolate/rootfs"
)

// BenchmarkInitStart starts one init per iteration, both ways in the same
// run: the server binary re-executed as "sandhold init" (what a plain
// build does) and the lean init from a sealed memfd (what `make build`
// ships). ns/op is launch to ready (fork, exec, runtime start, setup of
// every layer); PssAnon-kB is the idle init's anonymous memory from
// /proc/PID/smaps_rollup, read after it settled. (Private_Dirty is not
// reported: it counts the memfd's shared-memory pages, which every lean
// init shares, and a freshly built binary's dirty page cache.)
//
//	go test -run '^$' -bench InitStart -benchtime 20x ./internal/agent/
func BenchmarkInitStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("sandboxes need root")
	}
	server, memfd := buildInits(b, true)
	cg, err := cgroup.New("sandhold-bench-agent")
	if err != nil {
		b.Skip("cgroups unavailable:", err)
	}
	for _, v := range []struct {
		name string
		spec LaunchSpec
	}{
		{"reexec-server", LaunchSpec{Exe: server, Args: []string{"init"}}},
		{"lean-memfd", LaunchSpec{ExeFile: memfd}},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.StopTimer()
			var pss float64
			for i := range b.N {
				name := fmt.Sprintf("b%d-%s-%d", os.Getpid(), v.name, i)
				group, err := cg.Create(name, cgroup.Limits{MemoryBytes: 256 << 20, Pids: 64})
				if err != nil {
					b.Fatal(err)
				}
				ws, err := rootfs.DetachedMount(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				spec := v.spec
				spec.HostUID, spec.HostGID = 1<<30+700*IDRange, 1<<30+700*IDRange
				spec.Workspace, spec.Place = ws, group.AddProc
				spec.Setup = proto.Setup{Hostname: "sandbox", UID: 1000, GID: 1000, TmpBytes: 16 << 20, ShmBytes: 16 << 20, CgroupVersion: cg.Info().Version}
				b.StartTimer()
				inst, err := Launch(context.Background(), spec)
				b.StopTimer()
				_ = ws.Close()
				if err != nil {
					b.Fatal(err)
				}
				// Let the init finish its start-up (FreeOSMemory, the
				// fork thread) before reading its memory.
				time.Sleep(300 * time.Millisecond)
				m, err := smapsRollup(inst.Pid)
				inst.Kill()
				_ = group.Destroy()
				if err != nil {
					b.Fatal(err)
				}
				pss += float64(m["Pss_Anon"])
			}
			b.ReportMetric(pss/float64(b.N), "PssAnon-kB")
		})
	}
}

// buildInits builds the lean init (as `make build` does: static, trimmed)
// and, withServer, the server binary; it returns the server's path ("" if
// not built) and the lean init in a sealed memfd.
func buildInits(tb testing.TB, withServer bool) (string, *os.File) {
	tb.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		tb.Skip("the go tool is not on PATH:", err)
	}
	// The re-executed binary must be reachable by the init's mapped ids
	// (the test's own temp dirs are 0700).
	dir, err := os.MkdirTemp("", "sandhold-bench-init-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // G302: binaries the init must execute
		tb.Fatal(err)
	}
	build := func(pkg, out string) string {
		p := filepath.Join(dir, out)
		cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags", "-s -w", "-o", p, pkg) //nolint:gosec // G204: fixed arguments, a temp path
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if o, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("build %s: %v\n%s", pkg, err, o)
		}
		return p
	}
	server := ""
	if withServer {
		server = build("github.com/sandhold/sandhold/cmd/sandhold", "sandhold")
	}
	lean, err := os.ReadFile(build("github.com/sandhold/sandhold/cmd/sandhold-init", "sandhold-init")) //nolint:gosec // G304: the benchmark's own temp file
	if err != nil {
		tb.Fatal(err)
	}
	memfd, err := initbin.Memfd(lean)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = memfd.Close() })
	return server, memfd
}

// smapsRollup reads /proc/PID/smaps_rollup into kB values by field.
func smapsRollup(pid int) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 2 && fields[1] == "kB" {
			if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
				out[k] = n
			}
		}
	}
	return out, sc.Err()
}
