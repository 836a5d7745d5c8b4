package agent

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"
)

// TestSetupWithoutWorkspaceEndsTheInit: the workspace comes with the setup
// request; a setup request that carries no descriptor is refused and the
// init ends (fail closed), with no layer applied.
func TestSetupWithoutWorkspaceEndsTheInit(t *testing.T) {
	var got LaunchSpec
	// prepareLaunchSetup makes the cgroup and the workspace; the launch
	// itself is done here by hand, with the setup sent bare.
	_ = prepareLaunchSetup(t, nil, func(ls *LaunchSpec) { got = *ls })
	srv, child, err := Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Close() }()
	conn, err := proto.NewConn(srv)
	_ = srv.Close()
	if err != nil {
		t.Fatal(err)
	}
	inst, err := launchHere(got, got.Exe, []string{"sandhold-init", "init"}, []string{"GOTRACEBACK=none"}, child, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Kill()
	if err := got.Place(inst.Pid); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ready, err := inst.Setup(ctx, got.Setup); err == nil {
		t.Fatalf("setup without the workspace answered %+v, want a refusal", ready)
	}
	select {
	case <-inst.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the init did not end after a setup without the workspace")
	}
	if log := got.Log.(*syncBuilder).String(); !strings.Contains(log, "want setup with the workspace") {
		t.Fatalf("init said %q, want the refusal", log)
	}
}

// TestLaunchAwaitsTheWorkspace: with AwaitWorkspace, the init is cloned
// first and placed only once the workspace is there; if it does not come,
// the launch fails with its error and the init is ended.
func TestLaunchAwaitsTheWorkspace(t *testing.T) {
	var order []string
	var ws *os.File
	ts := launchWith(t, nil, func(ls *LaunchSpec) {
		ws = ls.Workspace
		place := ls.Place
		ls.Workspace = nil
		ls.AwaitWorkspace = func() (*os.File, error) {
			order = append(order, "workspace")
			return ws, nil
		}
		ls.Place = func(pid int) error {
			order = append(order, "place")
			return place(pid)
		}
	})
	if strings.Join(order, ",") != "workspace,place" {
		t.Fatalf("launch order %v, want the workspace awaited before Place", order)
	}
	if r := ts.run(t, "sh", "-c", "test -d /workspace && stat -c %u /workspace"); strings.TrimSpace(r.stdout) != "1000" {
		t.Fatalf("/workspace inside: %+v, want the sandbox user's directory", r)
	}

	refused := errors.New("no workspace today")
	var placed bool
	launch := prepareLaunch(t, func(ls *LaunchSpec) {
		ls.Workspace = nil
		ls.AwaitWorkspace = func() (*os.File, error) { return nil, refused }
		ls.Place = func(int) error { placed = true; return nil }
	})
	if _, err := launch(); !errors.Is(err, refused) {
		t.Fatalf("launch without its workspace: %v, want %v", err, refused)
	}
	if placed {
		t.Fatal("an init whose workspace never came was placed")
	}
}
