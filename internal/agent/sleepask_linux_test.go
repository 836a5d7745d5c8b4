package agent

import (
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"
)

// TestSleepQuestionsOfAnInitThatDoesNotRead: an init that asks to sleep
// again and again and never reads its socket gets one leave on its way at
// a time, not a send per question left waiting on its socket (each a
// goroutine of the server's); once it reads, the questions it asked
// meanwhile are answered by one more leave, through the gate.
func TestSleepQuestionsOfAnInitThatDoesNotRead(t *testing.T) {
	srv, child, err := Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	srvConn, err := proto.NewConn(srv)
	if err != nil {
		t.Fatal(err)
	}
	initConn, err := proto.NewConn(child)
	if err != nil {
		t.Fatal(err)
	}
	// Fill the init's receive queue, so that the next send to it waits.
	filler, err := json.Marshal(proto.Request{Op: proto.OpPing})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := srvConn.Unix().SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	queued := 0
	if err := raw.Write(func(fd uintptr) bool {
		for {
			if err := syscall.Sendmsg(int(fd), filler, nil, nil, syscall.MSG_DONTWAIT); err != nil {
				if !errors.Is(err, syscall.EAGAIN) {
					t.Errorf("fill: %v", err)
				}
				return true
			}
			queued++
		}
	}); err != nil {
		t.Fatal(err)
	}
	var asked, started atomic.Int64
	gate := func(grant func()) {
		asked.Add(1)
		go func() {
			started.Add(1)
			grant()
		}()
	}
	seen := make(chan struct{})
	c := newClient(srvConn, func(f *os.File) { _ = f.Close(); seen <- struct{}{} }, gate)
	t.Cleanup(func() { _ = c.Close(); _ = initConn.Close() })
	marker, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = marker.Close() }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !ok(); runtime.Gosched() {
			if time.Now().After(deadline) {
				t.Fatalf("never %s", what)
			}
		}
	}
	const questions = 20
	for range questions {
		if err := initConn.Send(proto.Response{Kind: proto.EventSleep}); err != nil {
			t.Fatal(err)
		}
		// The client has read the question once it reads the marker
		// sent after it (one reader, in order).
		if err := initConn.Send(proto.Response{Kind: proto.EventConn}, marker); err != nil {
			t.Fatal(err)
		}
		<-seen
		waitFor("started the gate's grants", func() bool { return started.Load() == asked.Load() })
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("%d leaves granted to an init that does not read, want 1 on its way", n)
	}

	// The init reads: the leave on its way arrives, and the questions
	// asked meanwhile go through the gate once more.
	leaves := make(chan struct{}, questions)
	go func() {
		for {
			var req proto.Request
			files, err := initConn.Recv(&req)
			if err != nil {
				return
			}
			proto.CloseAll(files)
			if req.Op == proto.OpSleep {
				leaves <- struct{}{}
			}
		}
	}()
	for i := range 2 {
		select {
		case <-leaves:
		case <-time.After(time.Minute):
			t.Fatalf("%d leaves arrived after %d queued messages, want 2", i, queued)
		}
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("the gate was asked %d times, want 2", n)
	}
}
