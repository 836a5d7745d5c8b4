package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/archive"
	"github.com/sandhold/sandhold/internal/archive/spec"
)

// TestExtractorRunsInAnExecutionGroup: an extract's or a pack's extractor
// runs in an execution group below the sandbox's user group, as a command
// (counted against the sandbox's pids limit, not the init's reserve), not
// in the init's own group; the group is given back once it ends.
func TestExtractorRunsInAnExecutionGroup(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	// More than a pipe holds: the extractor blocks writing until read.
	if r := run(t, s, ExecRequest{Argv: []string{"sh", "-c", "head -c 1000000 /dev/urandom > /workspace/big"}}); !exitedOK(r) {
		t.Fatalf("write the file: %+v", r)
	}
	s.mu.Lock()
	initPid := s.inst.Pid
	s.mu.Unlock()
	initGroup := pidsCgroup(t, initPid)

	ctx := context.Background()
	rc, err := s.Pack(ctx, "/workspace", archive.FormatTar, archive.DefaultLimits(), agent.Deny{})
	if err != nil {
		t.Fatal(err)
	}
	ex := waitExtractor(t, initGroup)
	group := pidsCgroup(t, ex)
	if rest, ok := strings.CutPrefix(group, initGroup+"/"+userGroupName+"/x"); !ok || strings.Contains(rest, "/") {
		t.Errorf("the extractor is in %q, want an execution group below %s/%s", group, initGroup, userGroupName)
	}
	var tarball bytes.Buffer
	if _, err := io.Copy(&tarball, rc); err != nil {
		t.Fatal("pack:", err)
	}
	_ = rc.Close()
	if tarball.Len() < 1000000 {
		t.Fatalf("pack wrote %d bytes, want the file and more", tarball.Len())
	}

	// The archive goes back in elsewhere: the extract runs (and ends) the
	// same way.
	src, err := os.CreateTemp(t.TempDir(), "tar")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	if _, err := src.Write(tarball.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if r := run(t, s, ExecRequest{Argv: []string{"mkdir", "/workspace/back"}}); !exitedOK(r) {
		t.Fatalf("mkdir: %+v", r)
	}
	if _, err := s.Extract(ctx, "/workspace/back", archive.FormatTar, archive.DefaultLimits(), agent.Deny{}, src); err != nil {
		t.Fatal("extract:", err)
	}
	if r := run(t, s, ExecRequest{Argv: []string{"cmp", "/workspace/big", "/workspace/back/big"}}); !exitedOK(r) {
		t.Fatalf("the file did not come back whole: %+v", r)
	}
	// Both groups were given back, empty: nothing of an extractor is left.
	free := len(s.execs.Idle())
	if free == 0 {
		t.Error("no execution group was given back after the transfers")
	}
	if pids := extractors(t, initGroup); len(pids) > 0 {
		t.Errorf("extractors left running: %v", pids)
	}
}

func exitedOK(r Result) bool { return r.ExitCode != nil && *r.ExitCode == 0 }

// pidsCgroup is the host path of pid's group in the pids hierarchy (v1)
// or the unified one (v2).
func pidsCgroup(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	var unified string
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "pids" {
				return f[2]
			}
		}
		if f[0] == "0" && f[1] == "" {
			unified = f[2]
		}
	}
	if unified == "" {
		t.Fatalf("no pids group for %d in %q", pid, b)
	}
	return unified
}

// extractors lists the processes running as the extractor (argv[0]) in
// the groups at or below group (other test binaries run theirs).
func extractors(t *testing.T, group string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(b), "\x00")
		if argv0 != spec.ChildName {
			continue
		}
		if g, err := os.ReadFile("/proc/" + e.Name() + "/cgroup"); err == nil && strings.Contains(string(g), ":"+group) {
			out = append(out, pid)
		}
	}
	return out
}

// waitExtractor waits for the one extractor in group to have exec'd.
func waitExtractor(t *testing.T, group string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if pids := extractors(t, group); len(pids) == 1 {
			return pids[0]
		} else if len(pids) > 1 {
			t.Fatalf("more than one extractor: %v", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no extractor appeared")
	return 0
}
