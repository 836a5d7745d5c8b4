package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// TestClientSnapshots: sandhold snapshot create, ls, export, import, rm;
// create --snapshot; fork; hibernate and the resume of the next exec.
func TestClientSnapshots(t *testing.T) {
	d := daemontest.Start(t, nil)
	c := newCLIEnv(t, d, d.AdminKey())
	id := strings.TrimSpace(c.mustRun("create", "--disk", "64MB"))
	c.mustRun("exec", id, "--", "sh", "-c", "echo state > s")
	snap := strings.TrimSpace(c.mustRun("snapshot", "create", id, "--name", "cli"))
	if ls := c.mustRun("snapshot", "ls"); !strings.Contains(ls, snap) || !strings.Contains(ls, "cli") {
		t.Errorf("ls: %s", ls)
	}
	exp := filepath.Join(t.TempDir(), "snap.tar")
	c.mustRun("snapshot", "export", snap, exp)
	if st, err := os.Stat(exp); err != nil || st.Size() == 0 {
		t.Fatalf("export: %v", err)
	}
	imported := strings.TrimSpace(c.mustRun("snapshot", "import", exp, "--name", "again"))
	restored := strings.TrimSpace(c.mustRun("create", "--snapshot", imported))
	if got := c.mustRun("exec", restored, "--", "cat", "s"); got != "state\n" {
		t.Errorf("create --snapshot: %q", got)
	}
	forks := strings.Fields(c.mustRun("fork", snap, "-n", "2"))
	if len(forks) != 2 {
		t.Fatalf("fork: %v", forks)
	}
	for _, f := range forks {
		if got := c.mustRun("exec", f, "--", "cat", "s"); got != "state\n" {
			t.Errorf("fork %s: %q", f, got)
		}
	}
	c.mustRun("hibernate", id)
	if got := c.mustRun("exec", id, "--", "cat", "s"); got != "state\n" {
		t.Errorf("after hibernate: %q", got)
	}
	c.mustRun("snapshot", "rm", snap, imported)
	if ls := c.mustRun("snapshot", "ls"); strings.Contains(ls, snap) {
		t.Errorf("ls after rm: %s", ls)
	}
}
