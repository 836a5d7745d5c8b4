package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// heldSpawn starts a held `touch /workspace/<mark>` in an execution group
// of its own and returns the spawn's result channel; the spawn's release
// returns what decide sends.
func (ts *testSandbox) heldSpawn(t *testing.T, mark string, h *Hold, decide chan error) (cgroup.Group, chan error) {
	t.Helper()
	sub, err := ts.group.Sub("held-"+mark, cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Destroy() })
	attach, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer proto.CloseAll(attach)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p, err := ts.SpawnHeld(ctx, proto.SpawnReq{Argv: []string{"/usr/bin/touch", "/workspace/" + mark},
			Env: []string{"PATH=/usr/bin:/bin"}, Cwd: "/workspace"}, attach, ts.home, h, func() error { return <-decide })
		h.CloseReader()
		if err == nil {
			select {
			case <-p.Exited():
			case <-ctx.Done():
				err = errors.New("the released command did not end")
			}
			p.Close()
		}
		done <- err
	}()
	return sub, done
}

// waitHolding waits (bounded) until the init's forking thread — its main
// thread, the one that forks every command — blocks in read(2) on the
// hold: the request arrived and was prepared.
func (ts *testSandbox) waitHolding(t *testing.T) {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/task/%d/syscall", ts.Pid, ts.Pid)
	for range 3000 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Skip("cannot read the init's system call:", err)
		}
		if strings.HasPrefix(string(b), "0 ") { // read
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the init never blocked on the hold")
}

// TestHeldSpawnStartsWhenReleased: a held command is prepared and waits,
// with no process in its group and no trace of it, until the hold is
// released; then it runs.
func TestHeldSpawnStartsWhenReleased(t *testing.T) {
	ts := launch(t, nil)
	h, err := NewHold()
	if err != nil {
		t.Fatal(err)
	}
	decide := make(chan error, 1)
	sub, done := ts.heldSpawn(t, "released", h, decide)
	ts.waitHolding(t)
	if procs, err := sub.Procs(); err != nil || len(procs) != 0 {
		t.Fatalf("held command's group holds %v (%v)", procs, err)
	}
	if _, err := os.Stat(filepath.Join(ts.ws, "released")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the held command ran before its release (%v)", err)
	}
	select {
	case err := <-done:
		t.Fatalf("held spawn answered before its release: %v", err)
	default:
	}
	decide <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ts.ws, "released")); err != nil {
		t.Fatalf("released command left no trace: %v", err)
	}
}

// TestHeldSpawnRefusedWhenTheHoldEnds: a hold ended unreleased refuses the
// spawn; nothing ran, and the init serves on.
func TestHeldSpawnRefusedWhenTheHoldEnds(t *testing.T) {
	ts := launch(t, nil)
	h, err := NewHold()
	if err != nil {
		t.Fatal(err)
	}
	decide := make(chan error, 1)
	_, done := ts.heldSpawn(t, "refused", h, decide)
	ts.waitHolding(t)
	decide <- errors.New("the record was not stored")
	err = <-done
	var ae *proto.Error
	if !errors.As(err, &ae) || ae.Code != proto.CodeNotReleased {
		t.Fatalf("spawn after an unreleased end = %v, want %s", err, proto.CodeNotReleased)
	}
	if _, err := os.Stat(filepath.Join(ts.ws, "refused")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused command ran (%v)", err)
	}
	if r := ts.run(t, "/bin/true"); r.exit.Code != 0 {
		t.Fatalf("a spawn after the refusal: %+v", r)
	}
}
