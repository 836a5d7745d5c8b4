package daemon_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser/cdp/cdptest"
	"github.com/sandhold/sandhold/internal/browserops"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
)

// closeOnSecondWrite is a DevTools connection that ends when its user
// sends the first WebSocket frame (the first write is the HTTP upgrade).
type closeOnSecondWrite struct {
	net.Conn
	writes atomic.Int32
}

func (c *closeOnSecondWrite) Write(p []byte) (int, error) {
	if c.writes.Add(1) == 2 {
		_ = c.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

// TestBrowserConnectionEndingOnAttachIsUnavailable: a DevTools connection
// that ends while the browser operations attach to a freshly connected
// browser's tabs must reach the caller as "unavailable" (503, retry), the
// way one that ends during an operation does. Seen in
// TestAIOBrowserRoutesConformInSandbox (2 runs in 5, under load 30, both
// on the server's first browser start, the default sandbox's, pids 50 so
// --single-process): the first GET /v1/browser/info answered 500
// "internal error", the log saying "cdp: connection closed" (once "prepare
// tab: cdp: connection closed"; once followed by "connection reset by
// peer" on the DevTools port and the runtime restarting the browser).
// Here every connection ends: the bounded reconnects give up and the
// answer is unavailable.
func TestBrowserConnectionEndingOnAttachIsUnavailable(t *testing.T) {
	var dials atomic.Int32
	_, err := infoOverEndingConnections(t, &dials, func(n int32) bool { return n%2 == 0 })
	if err == nil {
		t.Fatal("info answered over connections that had all ended")
	}
	var fe *fault.Error
	if !errors.As(err, &fe) || fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("a connection that ended while attaching: %v (kind %q), want unavailable", err, fault.KindOf(err))
	}
	// One connect and two reconnects, each an HTTP and a WebSocket dial.
	if n := dials.Load(); n != 6 {
		t.Fatalf("%d dials, want 6 (the first attach and 2 bounded reconnects)", n)
	}
}

// TestBrowserConnectionEndingOnceOnAttachIsRetried: DevTools closes or
// resets its connection right after the browser starts or thaws; the
// browser operations attach again over a fresh connection, so the caller
// does not see it.
func TestBrowserConnectionEndingOnceOnAttachIsRetried(t *testing.T) {
	var dials atomic.Int32
	info, err := infoOverEndingConnections(t, &dials, func(n int32) bool { return n == 2 })
	if err != nil {
		t.Fatalf("info after one ended connection: %v", err)
	}
	if info.UserAgent == "" {
		t.Fatalf("info without a user agent: %+v", info)
	}
	if n := dials.Load(); n != 4 {
		t.Fatalf("%d dials, want 4 (the first attach and one reconnect)", n)
	}
}

// infoOverEndingConnections runs browser info against a fake browser whose
// WebSocket connections (the even dials: the first of a connect is HTTP)
// end on their first frame when ends(dial number) says so.
func infoOverEndingConnections(t *testing.T, dials *atomic.Int32, ends func(int32) bool) (browserops.BrowserInfo, error) {
	t.Helper()
	b := cdptest.Start(t)
	svc := browserops.New(browserops.Config{
		Open: func(ctx context.Context, _ auth.Caller, _ string) (net.Conn, error) {
			c, err := b.Dial(ctx)
			if err == nil && ends(dials.Add(1)) {
				return &closeOnSecondWrite{Conn: c}, nil
			}
			return c, err
		},
		Resolve: func(context.Context, auth.Caller, string) (string, error) { return "sb1", nil },
	})
	t.Cleanup(svc.Close)
	d := dispatch.New(dispatch.Options{})
	for _, tool := range browserops.Tools(svc) {
		d.MustRegister(tool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return browserops.ToolInfo.Call(ctx, d, auth.Caller{KeyID: "k", Role: auth.RoleAdmin}, browserops.InfoArgs{})
}
