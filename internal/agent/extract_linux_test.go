package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"github.com/sandhold/sandhold/internal/archive"
	"github.com/sandhold/sandhold/internal/archive/deny"
	"github.com/sandhold/sandhold/internal/archive/spec"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// tarGz writes a tar.gz of the given names and bodies to a temporary file.
func tarGz(t *testing.T, entries map[string]string) *os.File {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "a-*.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if _, err := f.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestExtractorRefusalReachesTheClient: the extractor is a separate
// program now; a hostile archive's refusal still comes back as the same
// *archive.Error (kind, rule, entry), nothing is written outside the
// destination, and a good archive still extracts.
func TestExtractorRefusalReachesTheClient(t *testing.T) {
	ts := launch(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lim := archive.DefaultLimits()
	hostile := tarGz(t, map[string]string{"ok.txt": "fine", "../../escaped.txt": "out"})
	_, err := ts.Extract(ctx, proto.TransferReq{Path: "/workspace/x", Format: archive.FormatTarGz, Limits: lim}, hostile)
	var ae *archive.Error
	if !errors.As(err, &ae) || ae.Kind != archive.KindInvalid || ae.Reason != archive.ReasonParentComponent || ae.Entry != "../../escaped.txt" {
		t.Fatalf("hostile archive: %v (%#v), want an invalid parent_component refusal naming the entry", err, ae)
	}
	for _, p := range []string{filepath.Join(ts.ws, "escaped.txt"), filepath.Join(filepath.Dir(ts.ws), "escaped.txt"), filepath.Join(ts.ws, "x", "ok.txt")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists after a refused extraction", p)
		}
	}
	// The sensitive-path policy, now applied in the extractor.
	sens := tarGz(t, map[string]string{".ssh/authorized_keys": "key"})
	_, err = ts.Extract(ctx, proto.TransferReq{Path: "/workspace", Limits: lim, Deny: proto.Deny{Dirs: []string{".ssh"}}}, sens)
	if !errors.As(err, &ae) || ae.Kind != archive.KindForbidden || ae.Reason != deny.ReasonSensitive {
		t.Fatalf("sensitive path: %v, want a forbidden %s refusal", err, deny.ReasonSensitive)
	}
	good := tarGz(t, map[string]string{"d/a.txt": "hello"})
	res, err := ts.Extract(ctx, proto.TransferReq{Path: "/workspace/y", Limits: lim}, good)
	if err != nil || res.Files != 1 || res.Bytes != 5 {
		t.Fatalf("good archive: %+v, %v", res, err)
	}
	if b, err := os.ReadFile(filepath.Join(ts.ws, "y", "d", "a.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("extracted file: %q, %v", b, err)
	}
	// Outside the writable trees: the init's own refusal, as before.
	_, err = ts.Extract(ctx, proto.TransferReq{Path: "/usr/x", Limits: lim}, good)
	var e *proto.Error
	if !errors.As(err, &e) || e.Code != "EROFS" {
		t.Fatalf("extract to /usr: %v, want EROFS", err)
	}
	// No command ever ran here, so the reaper had no child before the
	// first extractor: each must still be collected when it ends (a
	// zombie would hold a pid and keep the init from sleeping).
	children := fmt.Sprintf("/proc/%d/task/%d/children", ts.Pid, ts.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(children)
		if err != nil {
			t.Fatal(err)
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the init still has children %q after its extractors ended", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestExtractorRunsLikeACommand: while a pack is blocked on a pipe nobody
// reads, the extractor is a process other than the init — in the
// execution group PackIn names, or without one in the sandbox's own
// group — running as the sandbox user with no capabilities (effective,
// permitted and bounding), no_new_privs and the seccomp filter, in the
// init's namespaces. Then the pack completes once read.
func TestExtractorRunsLikeACommand(t *testing.T) {
	ts := launch(t, nil)
	t.Run("sandbox group", func(t *testing.T) { extractorLikeACommand(t, ts, false) })
	t.Run("execution group", func(t *testing.T) { extractorLikeACommand(t, ts, true) })
}

func extractorLikeACommand(t *testing.T, ts *testSandbox, inGroup bool) {
	group := ts.group
	var attach, home []*os.File
	if inGroup {
		sub, err := ts.group.Sub(fmt.Sprintf("x%d", time.Now().UnixNano()%1e9), cgroup.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Destroy() }()
		if attach, err = sub.OpenThreadAttach(); err != nil {
			t.Fatal(err)
		}
		defer proto.CloseAll(attach)
		group, home = sub, ts.home
	}
	// The sandbox user on the host: the workspace's owner.
	var st syscall.Stat_t
	if err := syscall.Stat(ts.ws, &st); err != nil {
		t.Fatal(err)
	}
	owner := int(st.Uid)
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: far over a pipe's buffer
	if err := os.WriteFile(filepath.Join(ts.ws, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(ts.ws, "big.bin"), owner, owner); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type packed struct {
		res archive.Result
		err error
	}
	done := make(chan packed, 1)
	go func() {
		res, err := ts.PackIn(ctx, proto.TransferReq{Path: "/workspace", Format: archive.FormatTar, Limits: archive.DefaultLimits()}, w, attach, home)
		_ = w.Close()
		done <- packed{res, err}
	}()
	var child int
	for deadline := time.Now().Add(20 * time.Second); child == 0 && time.Now().Before(deadline); {
		procs, err := group.Procs()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			// Once it has executed the program: between its fork and
			// the exec, the child is still the init's copy (root of the
			// namespace, the init's capabilities).
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			if p != ts.Pid && strings.HasPrefix(string(cmd), spec.ChildName+"\x00") {
				child = p
			}
		}
		if child == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if child == 0 {
		t.Fatalf("no process besides the init appeared in the cgroup %s while packing", group.Name())
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", child))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Uid":        fmt.Sprint(owner),
		"CapEff":     "0000000000000000",
		"CapPrm":     "0000000000000000",
		"CapBnd":     "0000000000000000",
		"NoNewPrivs": "1",
		"Seccomp":    "2",
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if w, ok := want[k]; ok {
			if f := strings.Fields(v); len(f) == 0 || f[0] != w {
				t.Errorf("extractor %s: %q, want %s", k, strings.TrimSpace(v), w)
			}
			delete(want, k)
		}
	}
	if len(want) > 0 {
		t.Errorf("status lacks %v", want)
	}
	for _, ns := range []string{"mnt", "pid", "net", "user", "ipc", "uts"} {
		a, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", child, ns))
		b, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", ts.Pid, ns))
		if err1 != nil || err2 != nil || a != b {
			t.Errorf("extractor's %s namespace %s (%v), the init's %s (%v)", ns, a, err1, b, err2)
		}
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		t.Fatal(err)
	}
	p := <-done
	if p.err != nil || p.res.Files != 1 || p.res.Bytes != int64(len(big)) || n < int64(len(big)) {
		t.Fatalf("pack: %+v, %v (%d bytes read)", p.res, p.err, n)
	}
}
