package cdp_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	cdproto "github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"

	"github.com/sandhold/sandhold/internal/browser/cdp"
	"github.com/sandhold/sandhold/internal/browser/cdp/cdptest"
)

var yes = true

func TestClientAgainstChromium(t *testing.T) {
	b := cdptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cdp.Dial(ctx, b.Dial)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if c.Version().UserAgent == "" {
		t.Fatal("no user agent in /json/version")
	}

	t.Run("AttachFlattenedAndEvaluate", func(t *testing.T) {
		tid, err := cdproto.Call(ctx, c.Browser(), target.CreateTarget, target.CreateTargetParams{URL: "about:blank"})
		if err != nil {
			t.Fatal(err)
		}
		att, err := cdproto.Call(ctx, c.Browser(), target.AttachToTarget, target.AttachToTargetParams{TargetID: tid.TargetID, Flatten: &yes})
		if err != nil {
			t.Fatal(err)
		}
		s := c.Session(string(att.SessionID))
		res, err := cdproto.Call(ctx, s, runtime.Evaluate, runtime.EvaluateParams{Expression: "6*7", ReturnByValue: &yes})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Result.Value) != "42" {
			t.Fatalf("6*7 = %s", res.Result.Value)
		}
	})

	t.Run("EventsArriveOnTheirSession", func(t *testing.T) {
		tid, err := cdproto.Call(ctx, c.Browser(), target.CreateTarget, target.CreateTargetParams{URL: "about:blank"})
		if err != nil {
			t.Fatal(err)
		}
		att, err := cdproto.Call(ctx, c.Browser(), target.AttachToTarget, target.AttachToTargetParams{TargetID: tid.TargetID, Flatten: &yes})
		if err != nil {
			t.Fatal(err)
		}
		s := c.Session(string(att.SessionID))
		if _, err := cdproto.Call(ctx, s, page.Enable, page.EnableParams{}); err != nil {
			t.Fatal(err)
		}
		ectx, ecancel := context.WithTimeout(ctx, 20*time.Second)
		defer ecancel()
		events := cdproto.Events(ectx, s, page.LoadEventFired)
		if _, err := cdproto.Call(ctx, s, page.Navigate, page.NavigateParams{URL: "data:text/html,<p>hi</p>"}); err != nil {
			t.Fatal(err)
		}
		for _, err := range events {
			if err != nil {
				t.Fatalf("no load event: %v", err)
			}
			break
		}
	})

	t.Run("BrowserErrorsAreTyped", func(t *testing.T) {
		err := c.Browser().Call(ctx, "No.suchMethod", nil, nil)
		var ce *cdp.Error
		if !errors.As(err, &ce) || ce.Code == 0 {
			t.Fatalf("want a *cdp.Error, got %v", err)
		}
	})

	t.Run("CancelledCallReturns", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(ctx)
		ccancel()
		if err := c.Browser().Call(cctx, "Browser.getVersion", nil, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
		// A call abandoned while it waits leaves the connection usable.
		sctx, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer scancel()
		tid, err := cdproto.Call(ctx, c.Browser(), target.CreateTarget, target.CreateTargetParams{URL: "about:blank"})
		if err != nil {
			t.Fatal(err)
		}
		att, err := cdproto.Call(ctx, c.Browser(), target.AttachToTarget, target.AttachToTargetParams{TargetID: tid.TargetID, Flatten: &yes})
		if err != nil {
			t.Fatal(err)
		}
		s := c.Session(string(att.SessionID))
		err = s.Call(sctx, "Runtime.evaluate", map[string]any{"expression": "new Promise(r => setTimeout(r, 2000))", "awaitPromise": true}, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call past its deadline: %v", err)
		}
		if err := s.Call(ctx, "Runtime.evaluate", map[string]any{"expression": "1"}, nil); err != nil {
			t.Fatalf("the connection did not survive a cancelled call: %v", err)
		}
	})
}

// A connection that ends fails pending and later calls with ErrClosed and
// closes subscriptions, so the service above reconnects.
func TestClientClosedConnection(t *testing.T) {
	b := cdptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var conns []net.Conn
	c, err := cdp.Dial(ctx, func(ctx context.Context) (net.Conn, error) {
		nc, err := b.Dial(ctx)
		if err == nil {
			conns = append(conns, nc)
		}
		return nc, err
	})
	if err != nil {
		t.Fatal(err)
	}
	events, _ := c.Browser().Subscribe("Target.targetCreated")
	for _, nc := range conns {
		_ = nc.Close()
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("client did not notice the closed connection")
	}
	if err := c.Browser().Call(ctx, "Browser.getVersion", nil, nil); !errors.Is(err, cdp.ErrClosed) {
		t.Fatalf("want ErrClosed, got %v", err)
	}
	if _, ok := <-events; ok {
		t.Fatal("subscription still open after close")
	}
}

// Dial refuses a /json/version that does not name a browser WebSocket.
func TestDialRefusesOddVersion(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = nc.Close() }()
				buf := make([]byte, 4096)
				_, _ = nc.Read(buf)
				body := `{"webSocketDebuggerUrl":"ws://evil.example/other/path"}`
				_, _ = nc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
					itoa(len(body)) + "\r\n\r\n" + body))
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cdp.Dial(ctx, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	})
	if err == nil {
		t.Fatal("dial accepted a foreign WebSocket path")
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
