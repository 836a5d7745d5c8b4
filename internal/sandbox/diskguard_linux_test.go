package sandbox

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

// TestDiskGuardStopsAndResumesGrowth: once what the images hold on the
// host reaches the budget, a sandbox's next write is ENOSPC from its own
// file system (far below its quota) and a create is refused; deleting
// gives the blocks back to the host (discard), and the next reading lets
// both grow again.
func TestDiskGuardStopsAndResumesGrowth(t *testing.T) {
	cfg := testConfig(t)
	cfg.DiskBudget, cfg.DiskOvercommit = 32<<20, 8 // quotas may promise 256 MiB
	m := newManager(t, cfg, nil)
	s := create(t, m, Spec{Limits: Limits{DiskBytes: 128 << 20}})
	write := func(name string, mib int) Result {
		t.Helper()
		return run(t, s, ExecRequest{Command: "head -c " + strconv.Itoa(mib<<20) + " /dev/urandom > /workspace/" + name + " && sync"})
	}
	m.checkDisk()
	if _, _, why := m.DiskGuard(); why != "" {
		t.Fatalf("a fresh sandbox stopped the guard: %s", why)
	}

	if r := write("big", 40); r.Status != StatusCompleted || *r.ExitCode != 0 {
		t.Fatalf("a write within the quota and the budget: %+v", r)
	}
	m.checkDisk()
	images, _, why := m.DiskGuard()
	if why == "" {
		t.Fatalf("the images hold %d bytes on the host, over the 32 MiB budget, and the guard did not stop growth", images)
	}
	if r := write("more", 1); *r.ExitCode == 0 || !strings.Contains(r.Stderr, "No space left") {
		t.Fatalf("a write while growth is stopped: %+v, want ENOSPC", r)
	}
	_, err := m.Create(context.Background(), owner, Spec{Limits: Limits{DiskBytes: 32 << 20}})
	var fe *fault.Error
	if !asFault(err, &fe) || fe.Kind != fault.Conflict || !strings.Contains(fe.Msg, "delete sandboxes or files") {
		t.Fatalf("a create while growth is stopped: got %v, want a conflict saying what to free", err)
	}

	if r := run(t, s, ExecRequest{Command: "rm /workspace/big /workspace/more; sync"}); r.Status != StatusCompleted {
		t.Fatalf("delete while stopped: %+v", r)
	}
	m.checkDisk()
	if images, _, why := m.DiskGuard(); why != "" {
		t.Fatalf("after deleting, the images hold %d bytes and growth is still stopped: %s", images, why)
	}
	if r := write("again", 8); r.Status != StatusCompleted || *r.ExitCode != 0 {
		t.Fatalf("a write after growth resumed: %+v", r)
	}
	if _, err := m.Create(context.Background(), owner, Spec{Limits: Limits{DiskBytes: 32 << 20}}); err != nil {
		t.Fatalf("a create after growth resumed: %v", err)
	}
}
