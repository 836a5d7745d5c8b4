package browserops

import (
	"context"
	"regexp"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// RestartArgs is AIO's RestartRequest.
type RestartArgs struct {
	dispatch.On
	Mode         string   `json:"mode,omitempty" enum:"soft,hard" doc:"soft: reconnect to the browser; hard (default): restart the browser process"`
	URLBlocklist []string `json:"url_blocklist,omitempty" doc:"refused: Chromium reads URL lists only as managed policies from /etc, which a sandbox cannot have; the sandbox's egress allow-list (network.allow) decides what the browser reaches"`
	URLAllowlist []string `json:"url_allowlist,omitempty" doc:"refused: see url_blocklist"`
	// AllowFileSelectionDialogs false intercepts every tab's file
	// chooser (Page.setInterceptFileChooserDialog), so no page opens
	// one; true or null is the browser's default.
	AllowFileSelectionDialogs *bool `json:"allow_file_selection_dialogs,omitempty" doc:"false: no page can open a file picker (upload_file still sets files); true or null: the browser's default"`
	// Locale is Chromium's --lang and --accept-lang (hard restarts).
	Locale *string `json:"locale,omitempty" doc:"the browser's UI language and Accept-Language, e.g. de-DE (needs mode hard); empty or null: the default"`
}

// localeRE is a BCP 47-like tag: a language and up to three subtags.
var localeRE = regexp.MustCompile(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$`)

// Validate refuses what cannot be applied: URL lists (no way to give
// them to Chromium inside a sandbox), a malformed locale, a locale on a
// soft restart (the process keeps its language).
func (a RestartArgs) Validate() error {
	switch a.Mode {
	case "", "soft", "hard":
	default:
		return fault.InvalidField("body.mode", "mode must be soft or hard")
	}
	if len(a.URLBlocklist) > 0 {
		return fault.InvalidField("body.url_blocklist", "URL block lists are not supported: Chromium reads them only as managed policies from /etc, which a sandbox cannot provide; use the sandbox's egress allow-list (network.allow) or network/route to abort requests")
	}
	if len(a.URLAllowlist) > 0 {
		return fault.InvalidField("body.url_allowlist", "URL allow lists are not supported: Chromium reads them only as managed policies from /etc, which a sandbox cannot provide; the sandbox's egress allow-list (network.allow) decides what the browser reaches")
	}
	if a.Locale != nil && *a.Locale != "" {
		if !localeRE.MatchString(strings.ReplaceAll(*a.Locale, "_", "-")) {
			return fault.InvalidField("body.locale", "locale must be a language tag like en-US or de")
		}
		if a.Mode == "soft" {
			return fault.InvalidField("body.locale", "a locale takes a hard restart (mode hard): the running browser keeps its language")
		}
	}
	return nil
}

// RestartOptions are what a hard restart gives the browser process.
type RestartOptions struct {
	// Locale is --lang / --accept-lang ("" the default).
	Locale string
}

// restartTools restart the browser (hard) or reconnect to it (soft).
func restartTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolRestart, "Restart the sandbox's browser (hard) or reconnect to it (soft)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a RestartArgs) (map[string]any, error) {
			return s.RestartBrowser(ctx, c, a)
		},
		func(a RestartArgs) (string, map[string]any) { return cmpOr(a.Mode, "hard"), nil })
}

// RestartBrowser restarts the browser (hard, through the runtime) or
// drops and reopens the connection (soft); tabs and logs start afresh.
func (s *Service) RestartBrowser(ctx context.Context, c auth.Caller, a RestartArgs) (map[string]any, error) {
	id, err := s.cfg.Resolve(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	mode := cmpOr(a.Mode, "hard")
	if mode == "hard" && s.cfg.Restart == nil {
		return nil, fault.New(fault.Unsupported, "restarting the browser is not available on this server")
	}
	b := s.state(id)
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fault.Wrap(fault.Timeout, ctx.Err(), "the browser is busy with another operation")
	}
	b.closeClient()
	<-b.sem
	s.mu.Lock()
	if s.browsers[id] == b {
		delete(s.browsers, id)
	}
	s.mu.Unlock()
	s.mu.Lock()
	s.noDialogs[id] = a.AllowFileSelectionDialogs != nil && !*a.AllowFileSelectionDialogs
	s.mu.Unlock()
	opts := RestartOptions{}
	if a.Locale != nil {
		opts.Locale = strings.ReplaceAll(*a.Locale, "_", "-")
	}
	if mode == "hard" {
		if err := s.cfg.Restart(ctx, c, id, opts); err != nil {
			return nil, err
		}
	}
	return run(ctx, s, c, id, func(o *op) (map[string]any, error) {
		out := map[string]any{"mode": mode, "user_agent": o.b.client.Version().UserAgent,
			"allow_file_selection_dialogs": !o.s.dialogsIntercepted(id)}
		if mode == "hard" {
			out["locale"] = opts.Locale
		}
		return out, nil
	})
}
