package daemon_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/aiocompat/aiotest"
	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// TestAIODisplayRecordConforms drives AIO's display/record (status, start,
// status, stop, a second stop) at both prefixes — the key's default
// sandbox and a named one — and checks every answer against AIO's schema;
// the recording is a real file in the sandbox that ffprobe reads.
func TestAIODisplayRecordConforms(t *testing.T) {
	requireChromium(t)
	if err := browser.RecorderAvailable(); err != nil {
		t.Skip(err)
	}
	v := aiotest.Load(t)
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	a := admin.As(admin.NewKey("agent-display", "agent").Key)
	named := a.NewSandbox(nil)
	const path = "/v1/display/record"
	type result struct {
		Success bool   `json:"success"`
		Message string `json:"message"`
		Data    *struct {
			Status   string  `json:"status"`
			SavePath string  `json:"save_path"`
			Duration float64 `json:"duration"`
			Size     *int64  `json:"file_size_bytes"`
		} `json:"data"`
	}
	call := func(prefix string, body map[string]any) result {
		t.Helper()
		r := a.Do("POST", prefix+path, body)
		if r.Status != http.StatusOK {
			t.Fatalf("%s%s %v: %d %s", prefix, path, body, r.Status, r.Raw)
		}
		v.Check(t, "POST", path, r.Status, r.Raw)
		var out result
		if err := json.Unmarshal(r.Raw, &out); err != nil {
			t.Fatalf("%s: %v", r.Raw, err)
		}
		return out
	}
	for _, tc := range []struct{ prefix, sandbox string }{{"", ""}, {"/sandboxes/" + named, named}} {
		t.Run("prefix "+tc.prefix, func(t *testing.T) {
			if r := call(tc.prefix, map[string]any{"action": "status"}); !r.Success || r.Data == nil || r.Data.Status != "idle" {
				t.Fatalf("status before any recording: %+v", r)
			}
			r := call(tc.prefix, map[string]any{"action": "start", "fps": 5})
			if !r.Success || r.Data == nil || r.Data.Status != "recording" {
				t.Fatalf("start: %+v", r)
			}
			file := r.Data.SavePath
			time.Sleep(3 * time.Second)
			if r := call(tc.prefix, map[string]any{"action": "status"}); !r.Success || r.Data == nil || r.Data.Status != "recording" {
				t.Fatalf("status while recording: %+v", r)
			}
			r = call(tc.prefix, map[string]any{"action": "stop"})
			if !r.Success || r.Data == nil || r.Data.Status != "stopped" || r.Data.Size == nil || *r.Data.Size <= 0 || r.Data.SavePath != file {
				t.Fatalf("stop: %+v", r)
			}
			id := tc.sandbox
			if id == "" {
				var list []struct {
					ID      string `json:"id"`
					Default bool   `json:"default"`
				}
				a.JSON("GET", "/v1/sandboxes", nil, http.StatusOK, &list)
				for _, s := range list {
					if s.Default {
						id = s.ID
					}
				}
			}
			if n := ffprobeFrames(t, a, id, file); n < 2 {
				t.Fatalf("%s has %d frames", file, n)
			}
			// A tool-level failure: AIO's envelope, success false, still 200.
			if r := call(tc.prefix, map[string]any{"action": "stop"}); r.Success && (r.Data == nil || r.Data.Status != "stopped") {
				t.Fatalf("a second stop: %+v", r)
			}
		})
	}
}
