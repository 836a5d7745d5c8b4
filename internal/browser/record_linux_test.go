package browser

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/testenv"
)

func requireRecorder(t *testing.T) {
	t.Helper()
	testenv.SkipShort(t, "records a browser with ffmpeg")
	if err := RecorderAvailable(); err != nil {
		t.Skip(err)
	}
}

// probeFrames counts a video's frames with ffprobe, run inside the
// sandbox.
func probeFrames(t *testing.T, s *sandbox.Sandbox, file string) int {
	t.Helper()
	ex, err := s.Exec(context.Background(), sandbox.ExecRequest{Command: "ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames,width,height -of csv=p=0 " + file})
	if err != nil {
		t.Fatal(err)
	}
	<-ex.Done()
	r := ex.Result()
	fields := strings.Split(strings.TrimSpace(r.Stdout), ",")
	if len(fields) != 3 {
		t.Fatalf("ffprobe %s: %+v", file, r)
	}
	n, err := strconv.Atoi(fields[2])
	if err != nil {
		t.Fatalf("ffprobe %s: %+v", file, r)
	}
	t.Logf("%s: %sx%s, %d frames", file, fields[0], fields[1], n)
	return n
}

// TestDisplayRecordingMakesAVideoInTheWorkspace: start, a few seconds of
// the headful desktop, stop: an MP4 in the workspace that ffprobe (in the
// sandbox) reads with more than one frame; a second start while one runs
// is refused, and a headless browser has no desktop to record.
func TestDisplayRecordingMakesAVideoInTheWorkspace(t *testing.T) {
	requireBrowser(t)
	requireRecorder(t)
	if err := ProbeHost(context.Background()); !err.Desktop {
		t.Skip("Xvfb or x11vnc is not installed")
	}
	sm, bm := newManagers(t, 256)
	id := newSandbox(t, sm, ownerA)
	ctx := context.Background()
	path := "/workspace/rec/desk.mp4"
	st, err := bm.RecordDisplay(ctx, ownerA, DisplayRecordArgs{On: dispatch.On{Sandbox: id}, Action: "start", SavePath: &path, FPS: new(10)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "recording" || st.SavePath == nil || *st.SavePath != path {
		t.Fatalf("start: %+v", st)
	}
	if _, err := bm.RecordDisplay(ctx, ownerA, DisplayRecordArgs{On: dispatch.On{Sandbox: id}, Action: "start"}); !fault.Is(err, fault.Conflict) {
		t.Fatalf("a second start: %v, want conflict", err)
	}
	// Until the encoder has encoded a few frames (a loaded host takes
	// seconds to start it), bounded.
	for i := 0; ; i++ {
		st, err := bm.RecordDisplay(ctx, ownerA, DisplayRecordArgs{On: dispatch.On{Sandbox: id}, Action: "status"})
		if err != nil || st.Status != "recording" {
			t.Fatalf("status: %+v, %v", st, err)
		}
		if st.Frames >= 10 {
			break
		}
		if i == 600 {
			t.Fatalf("no frames encoded after a minute: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st, err = bm.RecordDisplay(ctx, ownerA, DisplayRecordArgs{On: dispatch.On{Sandbox: id}, Action: "stop"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "stopped" || st.FileSizeBytes == nil || *st.FileSizeBytes == 0 || st.Duration <= 0 {
		t.Fatalf("stop: %+v", st)
	}
	if n := probeFrames(t, mustSandbox(t, sm, id), path); n <= 1 {
		t.Fatalf("the recording has %d frames", n)
	}
	// Another key sees no sandbox; a bad path is refused before anything runs.
	if _, err := bm.RecordDisplay(ctx, ownerB, DisplayRecordArgs{On: dispatch.On{Sandbox: id}, Action: "status"}); !fault.Is(err, fault.NotFound) {
		t.Fatalf("another key: %v", err)
	}
	bad := "/workspace/.ssh/x.mp4"
	if _, err := bm.RecordDisplay(ctx, ownerA, DisplayRecordArgs{On: dispatch.On{Sandbox: id}, Action: "start", SavePath: &bad}); !fault.Is(err, fault.Invalid) {
		t.Fatalf("hidden path: %v, want invalid", err)
	}
	// A headless browser has no desktop.
	id2 := newSandbox(t, sm, ownerA)
	if _, err := bm.Start(ctx, ownerA, id2, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bm.RecordDisplay(ctx, ownerA, DisplayRecordArgs{On: dispatch.On{Sandbox: id2}, Action: "start"}); !fault.Is(err, fault.Conflict) {
		t.Fatalf("headless: %v, want conflict", err)
	}
}

func TestRecordPath(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct{ name, in, want string }{
		{"default", "", "/workspace/recordings/page_20260102T030405.000.mp4"},
		{"relative", "v/a.mp4", "/workspace/v/a.mp4"},
		{"tmp", "/tmp/a.mp4", "/tmp/a.mp4"},
		{"cleaned", "/workspace/x/../a.mp4", "/workspace/a.mp4"},
		{"escape", "../etc/a.mp4", ""},
		{"outside", "/etc/a.mp4", ""},
		{"not mp4", "/workspace/a.sh", ""},
		{"hidden dir", "/workspace/.ssh/a.mp4", ""},
		{"hidden file", ".a.mp4", ""},
		{"workspace itself", "/workspace", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RecordPath(tc.in, "page", now)
			if tc.want == "" {
				if !fault.Is(err, fault.Invalid) {
					t.Fatalf("%q: %q, %v; want invalid", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}
