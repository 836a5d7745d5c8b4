package browserops

import (
	"context"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// CaptchaWaitArgs is AIO's CaptchaWaitRequest.
type CaptchaWaitArgs struct {
	dispatch.On
	Timeout      float64 `json:"timeout,omitempty" minimum:"0" doc:"seconds; 60 by default, at most 120"`
	PollInterval float64 `json:"poll_interval,omitempty" minimum:"0" doc:"seconds; 2 by default"`
}

// CaptchaWaitResult is AIO's CaptchaWaitResult.
type CaptchaWaitResult struct {
	Resolved bool `json:"resolved"`
}

// CaptchaDetection is captcha_detect's answer (captchaJS): the CAPTCHA
// widgets seen on the active page.
type CaptchaDetection struct {
	Detected bool          `json:"detected"`
	Captchas []CaptchaSign `json:"captchas"`
	URL      string        `json:"url"`
}

// CaptchaSign is one CAPTCHA widget found: its kind (recaptcha, hcaptcha,
// turnstile, cloudflare_challenge, arkose, geetest, generic), the selector
// that found it and whether it is visible.
type CaptchaSign struct {
	Type     string `json:"type"`
	Selector string `json:"selector"`
	Visible  bool   `json:"visible"`
}

// captchaTools detect a CAPTCHA on the active page and wait until a person
// has solved it (sandhold solves none).
func captchaTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolCaptchaDetect, "Detect a CAPTCHA widget on the active page (detection only: sandhold solves none)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) (CaptchaDetection, error) {
			return read[CaptchaDetection](ctx, s, c, a.Sandbox, captchaJS, nil)
		}, nil)
	define(ts, ToolCaptchaWait, "Wait until no CAPTCHA is detected on the active page (a person solves it, e.g. over VNC)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a CaptchaWaitArgs) (CaptchaWaitResult, error) {
			return s.CaptchaWait(ctx, c, a)
		}, nil)
}

// CaptchaWait polls detection until no CAPTCHA is seen or time runs out.
func (s *Service) CaptchaWait(ctx context.Context, c auth.Caller, a CaptchaWaitArgs) (CaptchaWaitResult, error) {
	timeout := seconds(a.Timeout, 60*time.Second)
	poll := max(time.Duration(a.PollInterval*float64(time.Second)), 200*time.Millisecond)
	if a.PollInterval == 0 {
		poll = 2 * time.Second
	}
	return run(ctx, s, c, a.Sandbox, func(o *op) (CaptchaWaitResult, error) {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for {
			var det struct {
				Detected bool `json:"detected"`
			}
			if err := callJS(wctx, o.page(), captchaJS, nil, &det); err == nil && !det.Detected {
				return CaptchaWaitResult{Resolved: true}, nil
			}
			select {
			case <-ctx.Done():
				return CaptchaWaitResult{}, ctx.Err()
			case <-wctx.Done():
				return CaptchaWaitResult{Resolved: false}, nil
			case <-time.After(poll):
			}
		}
	})
}
