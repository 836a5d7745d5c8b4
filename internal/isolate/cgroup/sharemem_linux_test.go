package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/sandhold/sandhold/internal/testenv"
)

// requireSeparateMemory is requireV1 on a host whose memory controller has
// a hierarchy of its own (where SubSharingLimits leaves a group out of it).
func requireSeparateMemory(t *testing.T) *v1Manager {
	t.Helper()
	m := requireV1(t)
	if m.lean == nil {
		t.Skip("the memory controller is co-mounted with another one here: SubSharingLimits is Sub")
	}
	return m
}

// TestSubSharingLimitsHasNoMemoryGroup: a group made by SubSharingLimits,
// and every group below it, is in every hierarchy but the memory one; its
// processes sit in the sandbox group's memory group (which limits them),
// in their own group everywhere else; a memory limit of their own is
// refused; and the group is found again, destroyed and reaped like any.
func TestSubSharingLimitsHasNoMemoryGroup(t *testing.T) {
	m := requireSeparateMemory(t)
	sbx := mustCreate(t, m, "sbx", Limits{MemoryBytes: 256 << 20, Pids: 100})
	user, err := sbx.SubSharingLimits("user", Limits{Pids: 20})
	if err != nil {
		t.Fatal(err)
	}
	x, err := user.Sub("x1", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	memDir := m.dir("memory", "")
	cpuOwn := slices.ContainsFunc(m.lean, func(h v1Hier) bool { return slices.Contains(h.controllers, "cpu") })
	for _, rel := range []string{"sbx/user", "sbx/user/x1"} {
		if _, err := os.Stat(filepath.Join(memDir, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("memory directory of %s: %v, want none", rel, err)
		}
		if _, err := os.Stat(filepath.Join(m.dir("cpu", ""), rel)); !cpuOwn && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("cpu directory of %s: %v, want none (cpu has a hierarchy of its own here)", rel, err)
		}
		if _, err := os.Stat(filepath.Join(m.dir("pids", ""), rel)); err != nil {
			t.Fatalf("pids directory of %s: %v", rel, err)
		}
	}

	c := startIn(t, x, "exec sleep 300")
	pid := strconv.Itoa(c.cmd.Process.Pid)
	base := filepath.Base(m.hiers[0].baseDir)
	if got, want := filepath.Base(filepath.Dir(cgroupOf(t, pid, "memory")))+"/"+filepath.Base(cgroupOf(t, pid, "memory")), base+"/sbx"; got != want {
		t.Fatalf("memory cgroup of the process ends in %s, want %s", got, want)
	}
	if got := cgroupOf(t, pid, "pids"); filepath.Base(got) != "x1" {
		t.Fatalf("pids cgroup of the process is %s, want the execution group", got)
	}
	if got := cgroupOf(t, pid, "cpu"); !cpuOwn && filepath.Base(got) != "sbx" {
		t.Fatalf("cpu cgroup of the process is %s, want the sandbox group's", got)
	}
	if got := cgroupOf(t, pid, "cpuacct"); filepath.Base(got) != "x1" {
		t.Fatalf("cpuacct cgroup of the process is %s, want the execution group", got)
	}

	if _, err := user.Sub("x2", Limits{MemoryBytes: 64 << 20}); err == nil {
		t.Fatal("a memory limit below a shared group was accepted")
	}
	if err := x.SetLimits(Limits{MemoryBytes: 64 << 20}); err == nil {
		t.Fatal("SetLimits with memory on a shared group was accepted")
	}
	if _, err := sbx.SubSharingLimits("y", Limits{MemoryBytes: 64 << 20}); err == nil {
		t.Fatal("SubSharingLimits with a memory limit was accepted")
	}
	if _, err := sbx.SubSharingLimits("y", Limits{CPUMilli: 500}); err == nil {
		t.Fatal("SubSharingLimits with a CPU limit was accepted")
	}
	if err := x.SetLimits(Limits{CPUMilli: 500}); !cpuOwn && err == nil {
		t.Fatal("SetLimits with a CPU limit on a shared group was accepted")
	}
	if err := user.SetLimits(Limits{Pids: 30}); err != nil {
		t.Fatal(err)
	}

	st, err := x.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if !st.MemoryShared || st.MemoryBytes != 0 || st.Pids != 1 {
		t.Fatalf("stats of the shared execution group %+v, want MemoryShared, no memory figures, one task", st)
	}
	ust, err := user.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if ust.PidsLimit != 30 {
		t.Fatalf("user pids limit %d, want 30", ust.PidsLimit)
	}
	sst, err := sbx.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if sst.MemoryShared || sst.MemoryLimit != 256<<20 {
		t.Fatalf("sandbox group stats %+v: want its own memory figures", sst)
	}

	// Found again after a restart, still without a memory group.
	ru, err := sbx.OpenSub("user")
	if err != nil {
		t.Fatal(err)
	}
	rx, err := ru.OpenSub("x1")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := rx.Stats(); err != nil || !st.MemoryShared || st.Pids != 1 {
		t.Fatalf("re-opened execution group: %+v, %v", st, err)
	}
	if names, err := ru.Subs(); err != nil || len(names) != 1 || names[0] != "x1" {
		t.Fatalf("Subs of user: %v, %v", names, err)
	}

	if err := rx.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err == nil {
		t.Fatal("the execution's process outlived Destroy")
	}
	for _, d := range groupDirs(x) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left after Destroy: %v", d, err)
		}
	}
	if err := sbx.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, d := range append(groupDirs(sbx), groupDirs(user)...) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left after Destroy: %v", d, err)
		}
	}
}

// TestSharedMemoryGroupIsLimitedAndOOMKilled: a balloon in an execution
// group below a SubSharingLimits group meets the sandbox group's limit,
// is OOM-killed, and the kill shows in the sandbox group's Stats.
func TestSharedMemoryGroupIsLimitedAndOOMKilled(t *testing.T) {
	m := requireSeparateMemory(t)
	sbx := mustCreate(t, m, "sbx", Limits{MemoryBytes: 64 << 20})
	user, err := sbx.SubSharingLimits("user", Limits{Pids: 20})
	if err != nil {
		t.Fatal(err)
	}
	x, err := user.Sub("x1", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	script := `exec awk 'BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }'`
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		script = `exec /usr/bin/python3 -c 'b = b"\x01" * (300 << 20)'`
	}
	c := startIn(t, x, script)
	err = c.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("balloon exited with %v, want a kill", err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("balloon ended with %v, want SIGKILL", ws)
	}
	st, err := sbx.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.OOMKills < 1 {
		t.Fatalf("sandbox OOMKills = %d after its execution's OOM kill", st.OOMKills)
	}
	if n, err := sbx.OOMKills(); err != nil || n != st.OOMKills {
		t.Fatalf("sandbox OOMKills() = %d, %v; Stats says %d", n, err, st.OOMKills)
	}
	if st.MemoryPeak > 64<<20 {
		t.Fatalf("peak %d above the sandbox's limit", st.MemoryPeak)
	}
}

// TestSharedMemoryGroupFreezesAndHoldsPids: the shared group's pids limit
// stops a fork loop, and freezing the sandbox group freezes it.
func TestSharedMemoryGroupFreezesAndHoldsPids(t *testing.T) {
	m := requireSeparateMemory(t)
	sbx := mustCreate(t, m, "sbx", Limits{MemoryBytes: 256 << 20})
	user, err := sbx.SubSharingLimits("user", Limits{Pids: 5})
	if err != nil {
		t.Fatal(err)
	}
	x, err := user.Sub("x1", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// Ten sleeps in the background: only five tasks fit (the shell counts).
	c := startIn(t, x, `for i in 1 2 3 4 5 6 7 8 9 10; do sleep 300 & done 2>/dev/null; exec sleep 300`)
	testenv.Eventually(t, "the fork loop to end", func() bool {
		st, err := user.Stats()
		return err == nil && st.Pids == 5
	})
	if err := sbx.Freeze(); err != nil {
		t.Fatal(err)
	}
	st, err := x.Stats()
	if err != nil || !st.Frozen {
		t.Fatalf("execution group below a frozen sandbox: %+v, %v", st, err)
	}
	if err := sbx.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := sbx.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait() // killed; reaps it, so it stops counting
	testenv.Eventually(t, "every task of the group to be gone", func() bool {
		st, err := user.Stats()
		return err == nil && st.Pids == 0
	})
}
