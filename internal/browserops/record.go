package browserops

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	cdproto "github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/page"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/browser/cdp"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// Page recording (AIO's page/record): the active tab's screencast
// (Page.startScreencast JPEG frames) is sampled at a constant frame rate
// and written to an encoder — ffmpeg inside the sandbox, started by the
// runtime (Config.Encode) — that makes an MP4 in the sandbox. A page that
// does not change repeats its last frame, so the video's length is the
// time recorded; a paused recording skips the paused time.

// PageEncoder is one recording's encoder in the sandbox
// (internal/browser's *Encoder).
type PageEncoder interface {
	WriteFrame(jpeg []byte) error
	Status() browser.Recorded
	Finish(ctx context.Context) (browser.Recorded, error)
	Done() <-chan struct{}
}

// Encode starts an encoder for sandboxID's page recording.
type Encode func(ctx context.Context, c auth.Caller, sandboxID string, spec browser.EncodeSpec) (PageEncoder, error)

const (
	defaultRecordFPS      = 15
	defaultRecordQuality  = 80
	defaultRecordDuration = 10 * time.Second
	// recordCRF is the H.264 quality of page recordings (the JPEG
	// quality is the client's).
	recordCRF = 26
	// maxFrameBytes bounds one screencast frame kept (a JPEG of the
	// largest viewport is far below it).
	maxFrameBytes = 8 << 20
)

// pageRecording is a browser's page recording, running or ended.
type pageRecording struct {
	enc     PageEncoder
	session *cdp.Session
	fps     int
	paused  atomic.Bool
	latest  atomic.Pointer[[]byte]
	stopReq chan struct{}
	stopped sync.Once
	// done is closed when the pump has finished the file; result and
	// err are set before.
	done   chan struct{}
	result browser.Recorded
	err    error
}

// onFrame keeps a screencast frame and acknowledges it (Chromium sends
// the next only then). It runs on a goroutine of its own: it calls the
// browser.
func (b *browserState) onFrame(client *cdp.Client, session string, params jsonv2.Value) {
	var ev page.EventScreencastFrame
	if jsonv2.Unmarshal(params, &ev) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = cdproto.Call(ctx, client.Session(session), page.ScreencastFrameAck, page.ScreencastFrameAckParams{SessionID: ev.SessionID})
	b.recMu.Lock()
	r := b.rec
	b.recMu.Unlock()
	if r == nil || r.session.ID() != session || len(ev.Data) == 0 || len(ev.Data) > maxFrameBytes {
		return
	}
	img := ev.Data
	r.latest.Store(&img)
}

// pump writes the newest frame at the frame rate until the recording is
// stopped, the encoder ends (its limits) or the browser connection does,
// then finishes the file.
func (r *pageRecording) pump(client *cdp.Client) {
	defer close(r.done)
	t := time.NewTicker(time.Second / time.Duration(r.fps))
	defer t.Stop()
	why := ""
loop:
	for {
		select {
		case <-r.stopReq:
			break loop
		case <-client.Done():
			why = "the browser connection ended (the browser restarted or stopped)"
			break loop
		case <-r.enc.Done():
			break loop
		case <-t.C:
			if r.paused.Load() {
				continue
			}
			if f := r.latest.Load(); f != nil {
				if err := r.enc.WriteFrame(*f); err != nil {
					break loop
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = cdproto.Call(ctx, r.session, page.StopScreencast, cdproto.Empty{})
	r.result, r.err = r.enc.Finish(ctx)
	if why != "" && r.result.Ended == "" {
		r.result.Ended = why
	}
}

// stop ends the recording and waits for its file.
func (r *pageRecording) stop() (browser.Recorded, error) {
	r.stopped.Do(func() { close(r.stopReq) })
	<-r.done
	return r.result, r.err
}

func (r *pageRecording) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// recordAnswer is page/record's data.
func recordAnswer(status string, rec browser.Recorded, fps int) map[string]any {
	out := map[string]any{"status": status, "save_path": rec.Path, "duration": math.Round(rec.Seconds*1000) / 1000,
		"frames": rec.Frames}
	if fps > 0 {
		out["fps"] = fps
	}
	if rec.Bytes > 0 {
		out["file_size_bytes"] = rec.Bytes
	}
	if rec.Ended != "" {
		out["ended"] = rec.Ended
	}
	return out
}

// Record is AIO's page/record: once (record duration seconds, then answer
// with the file), start, pause, resume, stop, status.
func (s *Service) Record(ctx context.Context, c auth.Caller, a RecordArgs) (map[string]any, error) {
	id, err := s.cfg.Resolve(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	b := s.state(id)
	action := cmpOr(a.Action, "once")
	b.recMu.Lock()
	cur := b.rec
	b.recMu.Unlock()
	switch action {
	case "status":
		switch {
		case cur == nil:
			return map[string]any{"status": "idle"}, nil
		case cur.ended():
			return recordAnswer("stopped", cur.result, cur.fps), cur.err
		case cur.paused.Load():
			return recordAnswer("paused", cur.enc.Status(), cur.fps), nil
		}
		return recordAnswer("recording", cur.enc.Status(), cur.fps), nil
	case "pause", "resume":
		if cur == nil || cur.ended() {
			return nil, fault.New(fault.Conflict, "no page recording runs")
		}
		cur.paused.Store(action == "pause")
		st := "recording"
		if action == "pause" {
			st = "paused"
		}
		return recordAnswer(st, cur.enc.Status(), cur.fps), nil
	case "stop":
		if cur == nil {
			return nil, fault.New(fault.Conflict, "no page recording runs")
		}
		rec, err := cur.stop()
		if err != nil {
			return nil, err
		}
		return recordAnswer("stopped", rec, cur.fps), nil
	case "start", "once":
	default:
		return nil, fault.InvalidField("body.action", "action must be once, start, pause, resume, stop or status")
	}
	if s.cfg.Encode == nil {
		return nil, fault.New(fault.Unsupported, "page recording is not available on this server")
	}
	if cur != nil && !cur.ended() {
		return nil, fault.New(fault.Conflict, "a page recording runs already; stop it first")
	}
	var save string
	if a.SavePath != nil {
		save = *a.SavePath
	}
	out, err := browser.RecordPath(save, "page", time.Now())
	if err != nil {
		return nil, err
	}
	fps := cmpInt(a.FPS, defaultRecordFPS)
	quality := defaultRecordQuality
	if a.Quality != nil {
		quality = *a.Quality
	}
	limit := browser.MaxRecordDuration
	if action == "once" {
		limit = defaultRecordDuration
		if a.Duration > 0 {
			limit = time.Duration(a.Duration * float64(time.Second))
		}
	}
	rec, err := run(ctx, s, c, id, func(o *op) (*pageRecording, error) {
		res := o.viewport(ctx)
		enc, err := s.cfg.Encode(ctx, c, id, browser.EncodeSpec{Output: out, FPS: fps, CRF: recordCRF,
			MaxDuration: limit, Width: res.Width, Height: res.Height})
		if err != nil {
			return nil, err
		}
		r := &pageRecording{enc: enc, session: o.page(), fps: fps, stopReq: make(chan struct{}), done: make(chan struct{})}
		b.recMu.Lock()
		b.rec = r
		b.recMu.Unlock()
		q := int64(quality)
		_, err = cdproto.Call(ctx, r.session, page.StartScreencast, page.StartScreencastParams{Format: page.StartScreencastFormatJpeg,
			Quality: &q, MaxWidth: int64(res.Width), MaxHeight: int64(res.Height), EveryNthFrame: 1})
		if err == nil {
			// The first frame now: Chromium sends one only when the page
			// paints, which a still page (or a loaded host) delays.
			shot, serr := cdproto.Call(ctx, r.session, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatJpeg, Quality: &q})
			if serr == nil && len(shot.Data) > 0 && len(shot.Data) <= maxFrameBytes {
				first := shot.Data
				r.latest.CompareAndSwap(nil, &first)
			}
		}
		go r.pump(o.b.client)
		if err != nil {
			_, _ = r.stop()
			return nil, err
		}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	if action == "start" {
		return recordAnswer("recording", rec.enc.Status(), fps), nil
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-t.C:
	case <-rec.done:
	case <-ctx.Done():
	}
	res, err := rec.stop()
	if err != nil {
		return nil, err
	}
	return recordAnswer("stopped", res, fps), nil
}

// RecordArgs is AIO's RecordRequest.
type RecordArgs struct {
	dispatch.On
	Action   string  `json:"action,omitempty" enum:"once,start,pause,resume,stop,status" doc:"once (default): record duration seconds and answer with the file"`
	SavePath *string `json:"save_path,omitempty" doc:"an .mp4 below /workspace or /tmp (default /workspace/recordings/page_{time}.mp4)"`
	Duration float64 `json:"duration,omitempty" doc:"seconds of a once recording (default 10, at most 600); start records until stop or 600 s"`
	FPS      int     `json:"fps,omitempty" doc:"frames per second (default 15, at most 30)"`
	Quality  *int    `json:"quality,omitempty" minimum:"0" maximum:"100" doc:"JPEG quality of the captured frames (default 80)"`
}

// Validate bounds the numbers (AIO's ranges, and sandhold's recording
// limits).
func (a RecordArgs) Validate() error {
	switch {
	case a.FPS < 0 || a.FPS > browser.MaxRecordFPS:
		return fault.InvalidField("body.fps", "fps must be within 1-30")
	case math.IsNaN(a.Duration) || a.Duration < 0 || a.Duration > browser.MaxRecordDuration.Seconds():
		return fault.InvalidField("body.duration", "duration must be within (0, 600] seconds")
	case a.Quality != nil && (*a.Quality < 0 || *a.Quality > 100):
		return fault.InvalidField("body.quality", "quality must be within 0-100")
	}
	return nil
}

// recordTools record the active page to an MP4.
func recordTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolRecord, "Record the active page (AIO's page/record: once, start, pause, resume, stop, status) to an MP4 made inside the sandbox (default /workspace/recordings)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a RecordArgs) (map[string]any, error) {
			return s.Record(ctx, c, a)
		}, func(a RecordArgs) (string, map[string]any) {
			d := map[string]any{}
			if a.SavePath != nil {
				d["save_path"] = clipMsg(*a.SavePath)
			}
			return cmpOr(a.Action, "once"), d
		})
}
