package browser

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Recording: a video of the page (its screencast frames, written to the
// encoder by internal/browserops) or of the headful desktop (ffmpeg's
// x11grab on the virtual display). The encoder is Debian's ffmpeg, run
// INSIDE the sandbox as the sandbox user like any command: it writes only
// where the sandbox may (landlock), counts against the sandbox's pids,
// memory and disk quota, and dies with the sandbox. The server never
// touches the file; clients fetch it with the file routes.
const (
	ffmpegPath = "/usr/bin/ffmpeg"
	// RecordDir is where a recording goes when the client names no file.
	RecordDir = "/workspace/recordings"
	// MaxRecordDuration bounds one recording (AIO's display default is
	// 600 s); ffmpeg stops by itself there (-t).
	MaxRecordDuration = 10 * time.Minute
	// MaxRecordBytes bounds one recording's file (ffmpeg -fs); the
	// workspace quota bounds it as well.
	MaxRecordBytes = 256 << 20
	// MaxRecordFPS is the highest frame rate (AIO's display maximum).
	MaxRecordFPS = 30
	// maxRecordPath bounds a save_path.
	maxRecordPath = 1024
	// finishWait is how long a stopped encoder gets to write its last
	// fragment before it is killed (the fragmented MP4 it writes stays
	// playable up to the last complete fragment either way).
	finishWait = 15 * time.Second
)

// RecorderAvailable reports whether this host has the recorder (ffmpeg, run
// from the read-only /usr inside the sandbox).
func RecorderAvailable() error {
	if _, err := os.Stat(ffmpegPath); err != nil {
		return fault.New(fault.Unsupported, "recording needs ffmpeg, which this server does not have (`make deps` installs Debian's ffmpeg)")
	}
	return nil
}

// RecordPath checks a client's save_path (the sandbox's view) and fills
// the default: relative paths are under /workspace; the file must be an
// .mp4 below /workspace or /tmp; no component may be hidden (".ssh",
// ".config": the sensitive places of the file policy all are).
func RecordPath(p, kind string, now time.Time) (string, error) {
	if p == "" {
		return path.Join(RecordDir, fmt.Sprintf("%s_%s.mp4", kind, now.UTC().Format("20060102T150405.000"))), nil
	}
	if len(p) > maxRecordPath || strings.ContainsRune(p, 0) {
		return "", fault.InvalidField("save_path", "save_path is too long or holds a NUL byte")
	}
	if !strings.HasPrefix(p, "/") {
		p = path.Join("/workspace", p)
	}
	p = path.Clean(p)
	if !strings.HasPrefix(p, "/workspace/") && !strings.HasPrefix(p, "/tmp/") {
		return "", fault.InvalidField("save_path", "a recording is written below /workspace or /tmp")
	}
	if !strings.HasSuffix(p, ".mp4") {
		return "", fault.InvalidField("save_path", "a recording is an MP4 file: save_path must end in .mp4")
	}
	for _, c := range strings.Split(p, "/") {
		if strings.HasPrefix(c, ".") {
			return "", fault.InvalidField("save_path", "save_path must not name a hidden file or directory")
		}
	}
	return p, nil
}

// EncodeSpec is what one recording makes.
type EncodeSpec struct {
	// Output is the file, in the sandbox's view (RecordPath).
	Output string
	// FPS is the frame rate (1..MaxRecordFPS).
	FPS int
	// CRF is H.264's quality (0 lossless … 51 worst).
	CRF int
	// MaxDuration ends the recording (0 or above MaxRecordDuration:
	// MaxRecordDuration).
	MaxDuration time.Duration
	// Width and Height are the video's size; odd values are rounded
	// down to even (H.264 wants even sizes).
	Width, Height int
}

func (sp *EncodeSpec) check() error {
	if sp.FPS <= 0 || sp.FPS > MaxRecordFPS {
		return fault.InvalidField("fps", fmt.Sprintf("fps must be within 1-%d", MaxRecordFPS))
	}
	if sp.CRF < 0 || sp.CRF > 51 {
		return fault.InvalidField("crf", "crf must be within 0-51")
	}
	if sp.MaxDuration <= 0 || sp.MaxDuration > MaxRecordDuration {
		sp.MaxDuration = MaxRecordDuration
	}
	if sp.Width < 16 || sp.Height < 16 || sp.Width > 3840 || sp.Height > 2160 {
		return fault.InvalidField("width", "the video's size must be within 16x16 and 3840x2160")
	}
	sp.Width &^= 1
	sp.Height &^= 1
	return nil
}

// Recorded describes a finished (or running) recording.
type Recorded struct {
	Path string `json:"save_path"`
	// Bytes is the file's size (0 while unknown).
	Bytes int64 `json:"file_size_bytes"`
	// Seconds is the video's length.
	Seconds float64 `json:"duration"`
	// Frames is how many frames the encoder has encoded.
	Frames int64 `json:"frames,omitempty"`
	// Ended says why it stopped when it stopped on its own (the
	// duration or size limit, the browser's end, an encoder failure).
	Ended string `json:"ended,omitempty"`
}

// Encoder is one ffmpeg inside a sandbox, making one recording.
type Encoder struct {
	log     *slog.Logger
	s       *sandbox.Sandbox
	p       *sandbox.Proc
	spec    EncodeSpec
	desktop bool
	started time.Time
	tail    *tailBuffer
	done    chan struct{}
	exit    agent.Exit
	// encoded is the frames ffmpeg reports encoded (-progress).
	encoded atomic.Int64

	// mu serialises writes to ffmpeg's stdin against closing it, and
	// guards frames, closed and final.
	mu     sync.Mutex
	frames int64 // written by WriteFrame
	closed bool
	final  *Recorded
}

// errEncoderDone is a write to an encoder that has stopped (its limit,
// its end, a failure).
var errEncoderDone = errors.New("the recording has ended")

// ErrEncoderDone reports whether err says the encoder has stopped.
func ErrEncoderDone(err error) bool { return errors.Is(err, errEncoderDone) }

// EncodeFrames starts an encoder for a page recording in the caller's
// sandbox: the caller writes JPEG frames (WriteFrame) at spec.FPS.
func (m *Manager) EncodeFrames(ctx context.Context, c auth.Caller, sandboxID string, spec EncodeSpec) (*Encoder, error) {
	s, err := m.sb.Resolve(ctx, c, sandboxID)
	if err != nil {
		return nil, err
	}
	if err := spec.check(); err != nil {
		return nil, err
	}
	in := []string{"-f", "image2pipe", "-c:v", "mjpeg", "-framerate", strconv.Itoa(spec.FPS), "-i", "pipe:0"}
	e := m.entry(s.ID())
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.run
	if r == nil || r.exited() || r.s != s {
		return nil, fault.New(fault.Conflict, "the sandbox's browser does not run")
	}
	enc, err := m.startEncoder(ctx, s, spec, in, false)
	if err != nil {
		return nil, err
	}
	r.addEncoder(enc)
	return enc, nil
}

// startEncoder spawns ffmpeg in s reading input (its arguments before
// the output's).
func (m *Manager) startEncoder(ctx context.Context, s *sandbox.Sandbox, spec EncodeSpec, input []string, desktop bool) (*Encoder, error) {
	if err := RecorderAvailable(); err != nil {
		return nil, err
	}
	argv := []string{"/bin/sh", "-c", `mkdir -p -- "$1" && shift && exec "$@"`, "sh", path.Dir(spec.Output),
		ffmpegPath, "-hide_banner", "-nostats", "-loglevel", "error",
		// key=value progress on stdout: the frames encoded so far.
		"-progress", "pipe:1"}
	argv = append(argv, input...)
	argv = append(argv,
		"-t", strconv.FormatFloat(spec.MaxDuration.Seconds(), 'f', 3, 64),
		"-fs", strconv.Itoa(MaxRecordBytes),
		// Scale to the fixed even size (a page's frames follow its
		// viewport), H.264 in 4:2:0 that every player reads.
		"-vf", fmt.Sprintf("scale=%d:%d,setsar=1,format=yuv420p", spec.Width, spec.Height),
		"-c:v", "libx264", "-preset", "veryfast", "-crf", strconv.Itoa(spec.CRF),
		// One encoding thread: threads count against the sandbox's
		// pids, which the browser mostly uses.
		"-threads", "1", "-filter_threads", "1",
		// A keyframe (and so a fragment) every two seconds: a recording
		// cut short (the sandbox deleted, the encoder killed) stays
		// playable up to its last fragment.
		"-g", strconv.Itoa(2*spec.FPS),
		"-movflags", "+frag_keyframe+empty_moov+default_base_moof",
		"-y", spec.Output)
	env := map[string]string{"HOME": "/tmp"}
	if desktop {
		env["DISPLAY"] = display
	}
	p, err := s.Spawn(ctx, sandbox.SpawnSpec{Argv: argv, Env: env, Cwd: "/tmp", Stdin: true, CPUTime: MaxRecordDuration + time.Minute})
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "the recorder could not be started in the sandbox")
	}
	e := &Encoder{log: m.cfg.Log, s: s, p: p, spec: spec, desktop: desktop, started: time.Now(), tail: &tailBuffer{max: stderrTail}, done: make(chan struct{})}
	go func() {
		var wg sync.WaitGroup
		if p.Stdout != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.readProgress(p.Stdout)
			}()
		}
		if p.Stderr != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(e.tail, p.Stderr)
			}()
		}
		e.exit = <-p.Exited()
		wg.Wait()
		close(e.done)
	}()
	m.cfg.Log.Info("recording started", "sandbox", s.ID(), "desktop", desktop, "fps", spec.FPS)
	return e, nil
}

// readProgress follows ffmpeg's -progress lines ("frame=12") until its
// stdout ends; lines are bounded by the scanner's buffer.
func (e *Encoder) readProgress(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "frame=")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			e.encoded.Store(n)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// WriteFrame hands one JPEG frame to the encoder.
func (e *Encoder) WriteFrame(jpeg []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.exited() {
		return errEncoderDone
	}
	if _, err := e.p.Stdin.Write(jpeg); err != nil {
		return fmt.Errorf("%w: %w", errEncoderDone, err)
	}
	e.frames++
	return nil
}

// Done is closed when the encoder has exited.
func (e *Encoder) Done() <-chan struct{} { return e.done }

func (e *Encoder) exited() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// Status is the recording so far (the file's size once it has ended).
func (e *Encoder) Status() Recorded {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.final != nil {
		return *e.final
	}
	return Recorded{Path: e.spec.Output, Seconds: e.seconds(), Frames: e.encoded.Load()}
}

// seconds is the video's length: the frames encoded at the constant
// frame rate (the wall time while ffmpeg has reported none).
func (e *Encoder) seconds() float64 {
	if n := e.encoded.Load(); n > 0 {
		return float64(n) / float64(e.spec.FPS)
	}
	return time.Since(e.started).Seconds()
}

// Finish stops the recording, lets ffmpeg write its end (bounded), and
// describes the file. ended says why when the recording stopped on its
// own. Finish may be called more than once.
func (e *Encoder) Finish(ctx context.Context) (Recorded, error) {
	e.mu.Lock()
	if e.final != nil {
		r := *e.final
		e.mu.Unlock()
		return r, nil
	}
	ownEnd := e.exited()
	if !e.closed {
		e.closed = true
		if e.desktop && !ownEnd {
			// ffmpeg's own stop key: it finishes the file and exits.
			_, _ = e.p.Stdin.WriteString("q")
		}
		_ = e.p.Stdin.Close()
	}
	frames := e.frames
	e.mu.Unlock()
	select {
	case <-e.done:
	case <-time.After(finishWait):
		e.p.Kill()
		<-e.done
	}
	e.p.Release()
	lvl := slog.LevelInfo
	if e.exit.Code != 0 {
		lvl = slog.LevelWarn
	}
	e.log.Log(ctx, lvl, "recording ended", "sandbox", e.s.ID(), "code", e.exit.Code, "signal", e.exit.Signal, "own_end", ownEnd,
		"frames_written", frames, "frames_encoded", e.encoded.Load(), "output", e.tail.String())
	r := Recorded{Path: e.spec.Output, Seconds: e.seconds(), Frames: e.encoded.Load()}
	if ownEnd {
		r.Ended = e.endReason()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	st, _, err := e.s.File(sctx, agent.OpStat, agent.FileReq{Path: e.spec.Output})
	var ferr error
	switch {
	case err != nil || st == nil || st.Stat == nil:
		ferr = fault.Errorf(fault.Unavailable, "the recording produced no file: %s", e.endReason())
	case st.Stat.Size == 0:
		ferr = fault.Errorf(fault.Unavailable, "the recording is empty: %s", e.endReason())
	default:
		r.Bytes = st.Stat.Size
	}
	e.mu.Lock()
	e.final = &r
	e.mu.Unlock()
	return r, ferr
}

// Kill ends the encoder at once (the browser or the sandbox is going).
func (e *Encoder) Kill() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.p.Kill()
}

// endReason names why ffmpeg stopped on its own, in client words (its
// output goes to the log only).
func (e *Encoder) endReason() string {
	out := e.tail.String()
	switch {
	case e.exit.Code == 0 && e.exit.Signal == 0:
		return fmt.Sprintf("stopped at its limit (%s or %d MiB)", e.spec.MaxDuration, MaxRecordBytes>>20)
	case strings.Contains(out, "Resource temporarily unavailable"):
		return "the encoder could not start a thread: the sandbox's process limit (limits.pids) is reached"
	case strings.Contains(out, "No space left") || strings.Contains(out, "Disk quota exceeded") || strings.Contains(out, "File too large"):
		return "the workspace is full (its disk quota)"
	case strings.Contains(out, "Permission denied"):
		return "the encoder may not write there"
	case e.exit.Signal != 0:
		return fmt.Sprintf("the encoder was killed (signal %d)", e.exit.Signal)
	}
	return fmt.Sprintf("the encoder failed (status %d)", e.exit.Code)
}
