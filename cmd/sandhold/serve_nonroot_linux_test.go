package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeAsNonRootRefusesBeforeWriting: `sandhold serve` run by a user
// without root's capabilities says what it needs and how to get it, and
// writes nothing: no data dir, no admin key (it used to generate and save
// one, then die on a cgroup mkdir).
func TestServeAsNonRootRefusesBeforeWriting(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the test drops to an unprivileged user, which needs root")
	}
	// The binary and the data dir's parent must be reachable by nobody.
	dir, err := os.MkdirTemp("", "sandhold-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil { // #nosec G302 -- a test dir the unprivileged user writes to
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandhold")
	copyFile(t, os.Args[0], bin, 0o755)
	data := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = []string{runMainEnv + "=1", "PATH=/usr/bin:/bin", "HOME=" + dir, "SANDBOX_DATA_DIR=" + data}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("serve as uid 65534: %v (want a failure); stderr:\n%s", err, stderr.String())
	}
	msg := stderr.String()
	for _, want := range []string{"needs root", "sudo", "deploy/systemd", "Nothing was written"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, msg)
		}
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data dir was made (%v) before the refusal", err)
	}
	if strings.Contains(msg, "generated admin API key") {
		t.Errorf("an admin key was generated before the refusal:\n%s", msg)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src) //nolint:gosec // G304: the test binary
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode) //nolint:gosec // G304: a test temp dir
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
