package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func requireQuota(t *testing.T) {
	t.Helper()
	requireSandboxes(t)
	if _, err := e2tool("mkfs.ext4"); err != nil {
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
		left, err := loopBackings(root)
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

	// A fresh workspace is empty (no lost+found), owned by the sandbox user.
	if r := run(t, s, ExecRequest{Command: "ls -A /workspace; stat -c %u /workspace"}); strings.TrimSpace(r.Stdout) != "1000" {
		t.Fatalf("fresh workspace: %q", r.Stdout)
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
