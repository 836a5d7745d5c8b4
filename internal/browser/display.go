package browser

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// ToolDisplayRecord records the headful desktop (AIO's display/record).
var ToolDisplayRecord = dispatch.Ref[DisplayRecordArgs, DisplayRecordResult]("display.record")

// DisplayRecordArgs is AIO's DisplayRecordRequest.
type DisplayRecordArgs struct {
	dispatch.On
	Action      string   `json:"action" required:"true" enum:"start,stop,status" doc:"start, stop or status"`
	SavePath    *string  `json:"save_path,omitempty" doc:"an .mp4 below /workspace or /tmp (default: /workspace/recordings/display_{time}.mp4)"`
	FPS         *int     `json:"fps,omitempty" doc:"frames per second (default 5, at most 30)"`
	CRF         *int     `json:"crf,omitempty" doc:"H.264 quality, 0 lossless … 51 worst (default 28)"`
	MaxDuration *float64 `json:"max_duration,omitempty" doc:"seconds; the recording stops by itself there (default and maximum 600)"`
	Width       *int     `json:"width,omitempty" doc:"captured width (default: the whole display)"`
	Height      *int     `json:"height,omitempty" doc:"captured height (default: the whole display)"`
}

// Validate checks the action and the numbers' ranges.
func (a DisplayRecordArgs) Validate() error {
	switch a.Action {
	case "start", "stop", "status":
	default:
		return fault.InvalidField("body.action", "action must be start, stop or status")
	}
	if a.FPS != nil && (*a.FPS <= 0 || *a.FPS > MaxRecordFPS) {
		return fault.InvalidField("body.fps", "fps must be within 1-30")
	}
	if a.CRF != nil && (*a.CRF < 0 || *a.CRF > 51) {
		return fault.InvalidField("body.crf", "crf must be within 0-51")
	}
	if d := a.MaxDuration; d != nil && (math.IsNaN(*d) || *d <= 0 || *d > MaxRecordDuration.Seconds()) {
		return fault.InvalidField("body.max_duration", "max_duration must be within (0, 600] seconds")
	}
	if (a.Width != nil && *a.Width <= 0) || (a.Height != nil && *a.Height <= 0) {
		return fault.InvalidField("body.width", "width and height must be positive")
	}
	return nil
}

// DisplayRecordResult is AIO's DisplayRecordResult.
type DisplayRecordResult struct {
	Status        string  `json:"status" enum:"idle,recording,stopped"`
	SavePath      *string `json:"save_path"`
	Duration      float64 `json:"duration"`
	FileSizeBytes *int64  `json:"file_size_bytes"`
	// Frames encoded so far, and why a recording stopped on its own
	// (sandhold's additions).
	Frames int64  `json:"frames,omitempty"`
	Ended  string `json:"ended,omitempty"`
}

func displayResult(status string, r Recorded) DisplayRecordResult {
	out := DisplayRecordResult{Status: status, Duration: math.Round(r.Seconds*1000) / 1000, Frames: r.Frames, Ended: r.Ended}
	if r.Path != "" {
		p := r.Path
		out.SavePath = &p
	}
	if r.Bytes > 0 {
		b := r.Bytes
		out.FileSizeBytes = &b
	}
	return out
}

// RecordDisplay starts, stops or reports the recording of the sandbox's
// desktop. Starting needs the headful browser (started if no browser
// runs, like the VNC relay; a headless one is refused). One recording per
// sandbox at a time; it ends with the browser.
func (m *Manager) RecordDisplay(ctx context.Context, c auth.Caller, a DisplayRecordArgs) (DisplayRecordResult, error) {
	s, err := m.sb.Resolve(ctx, c, a.Sandbox)
	if err != nil {
		return DisplayRecordResult{}, err
	}
	e := m.entry(s.ID())
	switch a.Action {
	case "status":
		e.mu.Lock()
		enc, last := e.display, e.lastDisplay
		e.mu.Unlock()
		switch {
		case enc == nil && last == nil:
			return DisplayRecordResult{Status: "idle"}, nil
		case enc == nil:
			return displayResult("stopped", *last), nil
		}
		if enc.exited() {
			return m.finishDisplay(ctx, e, enc)
		}
		return displayResult("recording", enc.Status()), nil
	case "stop":
		e.mu.Lock()
		enc, last := e.display, e.lastDisplay
		e.mu.Unlock()
		switch {
		case enc == nil && last == nil:
			return DisplayRecordResult{}, fault.New(fault.Conflict, "no display recording runs")
		case enc == nil:
			return displayResult("stopped", *last), nil
		}
		return m.finishDisplay(ctx, e, enc)
	}
	if err := RecorderAvailable(); err != nil {
		return DisplayRecordResult{}, err
	}
	out, err := RecordPath(deref(a.SavePath), "display", time.Now())
	if err != nil {
		return DisplayRecordResult{}, err
	}
	st, err := m.ensure(ctx, s, &Options{Headful: true})
	if err != nil {
		return DisplayRecordResult{}, err
	}
	if !st.Headful {
		return DisplayRecordResult{}, fault.New(fault.Conflict, "the sandbox's browser runs headless, without a desktop to record; restart it headful, or record the page (browser/page/record)")
	}
	spec := EncodeSpec{Output: out, FPS: derefOr(a.FPS, 5), CRF: derefOr(a.CRF, 28), Width: st.Width, Height: st.Height}
	if a.MaxDuration != nil {
		spec.MaxDuration = time.Duration(*a.MaxDuration * float64(time.Second))
	}
	if a.Width != nil || a.Height != nil {
		spec.Width, spec.Height = derefOr(a.Width, st.Width), derefOr(a.Height, st.Height)
		if spec.Width > st.Width || spec.Height > st.Height {
			return DisplayRecordResult{}, fault.InvalidField("body.width", "width and height must fit the display ("+strconv.Itoa(st.Width)+"x"+strconv.Itoa(st.Height)+")")
		}
	}
	if err := spec.check(); err != nil {
		return DisplayRecordResult{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.display != nil && !e.display.exited() {
		return DisplayRecordResult{}, fault.New(fault.Conflict, "a display recording runs already; stop it first")
	}
	r := e.run
	if r == nil || r.exited() || r.s != s {
		return DisplayRecordResult{}, fault.New(fault.Unavailable, "the browser ended while the recording was starting; retry")
	}
	input := []string{"-f", "x11grab", "-framerate", strconv.Itoa(spec.FPS), "-video_size",
		strconv.Itoa(spec.Width&^1) + "x" + strconv.Itoa(spec.Height&^1), "-draw_mouse", "1", "-i", display}
	enc, err := m.startEncoder(ctx, s, spec, input, true)
	if err != nil {
		return DisplayRecordResult{}, err
	}
	r.addEncoder(enc)
	e.display, e.lastDisplay = enc, nil
	return displayResult("recording", enc.Status()), nil
}

// finishDisplay stops enc (if it is still e's recording) and keeps its
// description for status.
func (m *Manager) finishDisplay(ctx context.Context, e *entry, enc *Encoder) (DisplayRecordResult, error) {
	rec, err := enc.Finish(ctx)
	e.mu.Lock()
	if e.display == enc {
		e.display, e.lastDisplay = nil, &rec
	}
	e.mu.Unlock()
	if err != nil {
		return DisplayRecordResult{}, err
	}
	return displayResult("stopped", rec), nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

// recordTool is display.record: watching the screen is what VNC gives,
// so the same tier (medium); each call counts against the browser limit.
func recordTool(m *Manager) dispatch.Tool {
	return dispatch.Define(ToolDisplayRecord, dispatch.Spec{
		Description: "Record the sandbox's desktop (the headful browser's virtual display) to an MP4 in the sandbox: start, stop, status",
		Risk:        guard.Medium, Category: ratelimit.Browser,
	}, func(ctx context.Context, c auth.Caller, a DisplayRecordArgs) (DisplayRecordResult, error) {
		return m.RecordDisplay(ctx, c, a)
	}, dispatch.Hooks[DisplayRecordArgs, DisplayRecordResult]{
		Describe: func(a DisplayRecordArgs) dispatch.Target {
			return dispatch.Target{Sandbox: a.Sandbox, Target: a.Action, Detail: map[string]any{"save_path": deref(a.SavePath)}}
		},
	})
}
