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
// Why the browser's connection ends there is not found yet; that it
// answers 500 is reproduced here deterministically.
func TestBrowserConnectionEndingOnAttachIsUnavailable(t *testing.T) {
	t.Skip("bug: internal/browserops' op.connect returns refreshTabs' error as it is (acquire is outside op.public), so cdp.ErrClosed while attaching becomes an internal error (500); the fix is internal/browserops'")
	b := cdptest.Start(t)
	var dials atomic.Int32
	svc := browserops.New(browserops.Config{
		// The second connection of a connect is the WebSocket.
		Open: func(ctx context.Context, _ auth.Caller, _ string) (net.Conn, error) {
			c, err := b.Dial(ctx)
			if err == nil && dials.Add(1) == 2 {
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
	_, err := dispatch.Invoke[browserops.BrowserInfo](ctx, d, auth.Caller{KeyID: "k", Role: auth.RoleAdmin}, browserops.ToolInfo, browserops.InfoArgs{})
	if err == nil {
		t.Fatal("info answered over a connection that had ended")
	}
	var fe *fault.Error
	if !errors.As(err, &fe) || fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("a connection that ended while attaching: %v (kind %q), want unavailable", err, fault.KindOf(err))
	}
}
