package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
	"github.com/sandhold/sandhold/internal/testenv"
)

func requireQuota(t *testing.T) {
	t.Helper()
	testenv.RequireSandboxes(t)
	if _, err := volume.Tool("mkfs.ext4"); err != nil {
		t.Skip("workspace quota needs e2fsprogs:", err)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("workspace quota needs loop devices:", err)
	}
}

// waitDetached waits for the kernel to detach the loop devices of images
// below root (autoclear runs once the last user is gone).
func waitDetached(t *testing.T, root string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left, err := volume.LoopBackings(root)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("loop devices still bound to workspace images: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWorkspaceQuotaIsEnforcedByTheKernel(t *testing.T) {
	requireQuota(t)
	cfg := testConfig(t)
	rec := &memRecords{}
	m := newManager(t, cfg, rec)
	s := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})

	if m.wst.Copies() != 1 {
		t.Fatal("the workspace image is not a template copy")
	}
	// A fresh workspace is empty (no lost+found), owned by the sandbox user.
	if r := run(t, s, ExecRequest{Command: "ls -A /workspace; stat -c %u /workspace"}); strings.TrimSpace(r.Stdout) != "1000" {
		t.Fatalf("fresh workspace: %q", r.Stdout)
	}
	// Its file system does not prefetch every group's bitmap (memory
	// kept per idle sandbox); seen from the init's mount table.
	s.mu.Lock()
	pid := s.inst.Pid
	s.mu.Unlock()
	mi, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == "/workspace" {
			found = true
			if !strings.Contains(line, "ext4") || !strings.Contains(line, "no_prefetch_block_bitmaps") {
				t.Fatalf("workspace mount: %s", line)
			}
		}
	}
	if !found {
		t.Fatalf("no /workspace in the init's mount table:\n%s", mi)
	}
	// Writing past the quota fails with ENOSPC, whatever writes.
	r := run(t, s, ExecRequest{Command: "dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; echo rc=$?"})
	if !strings.Contains(r.Stdout, "No space left") || !strings.Contains(r.Stdout, "rc=1") {
		t.Fatalf("write past the quota: %q", r.Stdout)
	}
	total, free, err := s.StatFS(context.Background(), "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	if total > 64<<20 || total < 48<<20 || free > 1<<20 {
		t.Fatalf("statfs after filling: total %d free %d", total, free)
	}
	// Freed blocks come back (and are punched out of the image).
	run(t, s, ExecRequest{Command: "rm /workspace/big; echo keep > /workspace/keep"})
	if _, free, _ = s.StatFS(context.Background(), "/workspace"); free < 48<<20 {
		t.Fatalf("free after rm: %d", free)
	}
	// The workspace survives an init restart and a server restart: the
	// mount is made once per run and the image persists.
	s.shutdown()
	if r := run(t, s, ExecRequest{Command: "cat /workspace/keep"}); strings.TrimSpace(r.Stdout) != "keep" {
		t.Fatalf("after init restart: %q %q", r.Stdout, r.Stderr)
	}
	m.Close()
	waitDetached(t, m.workspaceRoot())
	m2 := newManager(t, cfg, rec)
	s2, err := m2.Get(owner, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r := run(t, s2, ExecRequest{Command: "cat /workspace/keep"}); strings.TrimSpace(r.Stdout) != "keep" {
		t.Fatalf("after server restart: %q %q", r.Stdout, r.Stderr)
	}
	// Delete leaves no image, no loop device and no directory behind.
	if err := m2.Delete(context.Background(), owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m2.workspaceRoot(), s.ID())); !os.IsNotExist(err) {
		t.Fatalf("workspace left after delete: %v", err)
	}
	waitDetached(t, m2.workspaceRoot())
	// No mount of it is visible on the host at any time.
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), m2.workspaceRoot()) {
		t.Fatal("a workspace is mounted in the host's namespace")
	}
}

// A pool sandbox's workspace has the default size; a client asking for
// another quota gets a sandbox built for it, never the pool's.
func TestQuotaOfPoolSandboxes(t *testing.T) {
	requireQuota(t)
	cfg := testConfig(t)
	cfg.WarmPool = 1
	m := newManager(t, cfg, nil)
	for _, c := range []struct {
		name string
		disk int64
		want int64
	}{
		{"default from the pool", 0, cfg.Default.DiskBytes},
		{"smaller, built cold", 48 << 20, 48 << 20},
		{"default again", cfg.Default.DiskBytes, cfg.Default.DiskBytes},
	} {
		t.Run(c.name, func(t *testing.T) {
			deadline := time.Now().Add(10 * time.Second)
			for m.PoolStatus().Ready < 1 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			s := create(t, m, Spec{Limits: Limits{DiskBytes: c.disk}})
			total, _, err := s.StatFS(context.Background(), "/workspace")
			if err != nil {
				t.Fatal(err)
			}
			// ext4 keeps a few percent for its metadata.
			if total > c.want || total < c.want*9/10 {
				t.Fatalf("workspace size %d, want about %d", total, c.want)
			}
		})
	}
}

// TestResourcesReportWorkspaceDisk: the live figures carry the workspace
// file system's use as the kernel counts it against the quota.
func TestResourcesReportWorkspaceDisk(t *testing.T) {
	requireQuota(t)
	m := newManager(t, testConfig(t), &memRecords{})
	s := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	disk := func() DiskUsage {
		for _, st := range m.Resources(Caller{Admin: true}) {
			if st.ID == s.ID() {
				return st.Disk
			}
		}
		t.Fatal("sandbox missing from the figures")
		return DiskUsage{}
	}
	run(t, s, ExecRequest{Command: "true"})
	before := disk()
	if before.TotalBytes > 64<<20 || before.TotalBytes < 48<<20 {
		t.Fatalf("total %d for a 64 MiB quota", before.TotalBytes)
	}
	run(t, s, ExecRequest{Command: "dd if=/dev/urandom of=/workspace/f bs=1M count=8 2>/dev/null; sync"})
	after := disk()
	if grown := after.UsedBytes - before.UsedBytes; grown < 8<<20 || grown > 10<<20 {
		t.Fatalf("used %d → %d after writing 8 MiB", before.UsedBytes, after.UsedBytes)
	}
}

// A sandbox whose init cannot start leaves nothing behind: no workspace
// directory, no loop device (the volume was released, not left to the
// garbage collector), no cgroup.
func TestFailedStartReleasesTheWorkspaceVolume(t *testing.T) {
	requireQuota(t)
	cfg := testConfig(t)
	cfg.InitExe, cfg.InitArgs = "/bin/false", []string{}
	m := newManager(t, cfg, nil)
	// No collection may close a forgotten descriptor for the manager.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	_, err := m.Create(context.Background(), owner, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	if err == nil {
		t.Fatal("a sandbox whose init exits at once was created")
	}
	waitDetached(t, m.workspaceRoot())
	entries, err := os.ReadDir(m.workspaceRoot())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("workspace directories left: %v", entries)
	}
	// Nor a cgroup: the sandbox group, its user group and the first
	// execution group made beside the init's start.
	if left, err := cgroup.Reap(m.cg, func(string) bool { return false }); err != nil || len(left) != 0 {
		t.Fatalf("cgroups left after a failed start: %v (%v)", left, err)
	}
}
