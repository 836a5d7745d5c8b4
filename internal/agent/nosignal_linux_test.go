package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"
)

// TestInitHasNoSignalRequest: the init serves no "signal" request. It had
// one, unused (the server signals commands through pidfds, package
// sandbox's Proc.Signal) and broken: the init's protocol threads are in
// landlock domains of their own below ABI 8 (go-landlock restricts each
// thread separately), sibling to the forking thread's, which commands
// inherit, so landlock's signal scope refused every kill with EPERM. An old
// server's request is refused as unknown, and the command lives on.
func TestInitHasNoSignalRequest(t *testing.T) {
	ts := launch(t, nil)
	p, _ := ts.spawnIn(t, proto.SpawnReq{Argv: []string{"sleep", "30"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, files, err := ts.call(ctx, proto.Request{Op: "signal"}, nil, nil)
	proto.CloseAll(files)
	var perr *proto.Error
	if !errors.As(err, &perr) || perr.Code != proto.CodeInvalid || !strings.Contains(perr.Msg, `unknown op "signal"`) {
		t.Fatalf("a signal request: %v, want EINVAL unknown op", err)
	}
	select {
	case ex := <-p.Exited():
		t.Fatalf("the command ended: %+v", ex)
	case <-time.After(200 * time.Millisecond):
	}
	if err := ts.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
