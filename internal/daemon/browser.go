package daemon

import (
	"context"

	"github.com/sandhold/sandhold/internal/api/relay"
	"github.com/sandhold/sandhold/internal/browser"
)

// startBrowser wires the browser runtime (one Chromium per sandbox, started
// on first use) and the relays into sandboxes: the preview proxy, the
// DevTools relay and the VNC relay, their tools in the dispatcher and their
// routes. Browsers end before the sandbox manager closes (closers run in
// reverse order); a revoked key's relays close with its other sessions.
func (d *Daemon) startBrowser(_ context.Context) error {
	d.browser = browser.New(d.sandboxes, browser.Config{Log: d.log})
	d.closers = append(d.closers, func() error { d.browser.Close(); return nil })
	// "browser": true on create: browser-sized limits, the browser
	// started with the sandbox.
	d.sandboxes.OnCreate(d.browser.CreateHook())
	d.register(browser.Tools(d.browser, d.cfg.PreviewPorts))
	relays := relay.Routes(d.api, d.dispatch, d.audit, d.log)
	d.onRevoke(relays.Revoke)
	if err := browser.Available(); err != nil {
		d.log.Info("browser unavailable; the DevTools and VNC relays will answer 'unsupported'", "reason", err.Error())
	}
	return nil
}
