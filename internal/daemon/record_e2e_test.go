package daemon_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// changingPage is served by a python server inside the sandbox: a counter
// that changes ten times a second, so every screencast frame differs.
const changingPage = `<html><body style="font-size:96px"><div id="n">0</div><script>
let i = 0; setInterval(() => { i++; document.getElementById("n").textContent = i; document.body.style.background = i % 2 ? "#fff" : "#fc0"; }, 100);
</script></body></html>`

// offerPage offers a file for download.
const offerPage = `<html><body><a id="dl" href="/report.csv" download>report</a></body></html>`

var reportCSV = strings.Repeat("day,visits\n2026-01-01,42\n", 2000)

// serveInSandbox writes files into the sandbox's site/ and serves them on
// 127.0.0.1:8000 inside it; it waits until the server answers.
func serveInSandbox(t *testing.T, c *daemontest.Client, id string, files map[string]string) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the test server needs /usr/bin/python3")
	}
	for name, body := range files {
		c.JSON("POST", "/sandboxes/"+id+"/v1/file/write", map[string]any{"file": "/workspace/site/" + name, "content": body}, http.StatusOK, nil)
	}
	c.JSON("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"command": "exec python3 -m http.server 8000 --bind 127.0.0.1 --directory site", "background": true, "timeout": 600}, http.StatusOK, nil)
	var r daemontest.ExecResult
	for range 100 {
		if r = c.Exec(id, "python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8000/\")'"); r.ExitCode != nil && *r.ExitCode == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the sandbox's test server did not answer: %+v; %+v", r, c.Exec(id, "ls -la site; ps -ef"))
}

// ffprobeFrames counts a video's frames with ffprobe inside the sandbox.
func ffprobeFrames(t *testing.T, c *daemontest.Client, id, file string) int {
	t.Helper()
	r := c.Exec(id, "ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 "+file)
	n, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if err != nil {
		t.Fatalf("ffprobe %s: %+v", file, r)
	}
	return n
}

// TestBrowserSandboxRecordsAChangingPageAndSavesADownload: a sandbox
// created with "browser": true runs its browser before any browser call
// and has the browser's pids default; page/record once makes an MP4 in the
// workspace that ffprobe, inside the sandbox, reads with more than one
// frame, and the file routes serve it; a download the page offers lands in
// the workspace and page/wait type=download answers its path and size; a
// hard restart with a locale gives pages that language, and a URL block
// list is refused.
func TestBrowserSandboxRecordsAChangingPageAndSavesADownload(t *testing.T) {
	requireChromium(t)
	if err := browser.RecorderAvailable(); err != nil {
		t.Skip(err)
	}
	d := daemontest.Start(t, func(c *config.Config) { c.MaxProcesses = 512; c.PreviewPorts = []uint16{8000} })
	admin := daemontest.NewClient(t, d)
	a := admin.As(admin.NewKey("agent-rec", "agent").Key)
	var sb struct {
		ID     string `json:"id"`
		Limits struct {
			Pids int64 `json:"pids"`
		} `json:"limits"`
	}
	a.JSON("POST", "/v1/sandboxes", map[string]any{"browser": true}, http.StatusCreated, &sb)
	// The server's default is its maximum here (512): at least the
	// browser's default, never above the maximum.
	if sb.Limits.Pids != max(512, min(browser.BrowserPids, 512)) {
		t.Fatalf("a browser sandbox's pids limit is %d", sb.Limits.Pids)
	}
	// The browser runs already: the sandbox's own process list shows it
	// before any browser route was called.
	if r := a.Exec(sb.ID, "ps -eo comm | grep -c chromium"); strings.TrimSpace(r.Stdout) == "0" {
		t.Fatalf("no chromium right after create: %+v", r)
	}
	var info struct {
		CDPURL string `json:"cdp_url"`
	}
	a.JSON("GET", "/sandboxes/"+sb.ID+"/v1/browser/info", nil, http.StatusOK, &info)
	if info.CDPURL == "" {
		t.Fatal("info has no cdp_url")
	}

	serveInSandbox(t, a, sb.ID, map[string]string{"index.html": changingPage, "offer.html": offerPage, "report.csv": reportCSV,
		"lang.html": `<html><body><script>document.body.textContent = "lang=" + navigator.language</script></body></html>`})
	if r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/navigate", map[string]any{"url": "http://127.0.0.1:8000/"}); !r.Success {
		t.Fatalf("navigate: %s", r.Raw)
	}
	var rec struct {
		Status string  `json:"status"`
		Path   string  `json:"save_path"`
		Bytes  int64   `json:"file_size_bytes"`
		Frames int64   `json:"frames"`
		Dur    float64 `json:"duration"`
	}
	r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/record", map[string]any{"action": "once", "duration": 3, "fps": 10, "save_path": "videos/page.mp4"})
	if !r.Success || json.Unmarshal(r.Data, &rec) != nil {
		t.Fatalf("record once: %s", r.Raw)
	}
	if rec.Status != "stopped" || rec.Path != "/workspace/videos/page.mp4" || rec.Bytes == 0 {
		t.Fatalf("record once: %s", r.Raw)
	}
	if n := ffprobeFrames(t, a, sb.ID, rec.Path); n <= 1 {
		t.Fatalf("the page recording has %d frames: %s", n, r.Raw)
	} else {
		t.Logf("page recording: %d frames, %d bytes, %.1f s", n, rec.Bytes, rec.Dur)
	}
	dl := a.Do("GET", "/sandboxes/"+sb.ID+"/v1/file/download?path="+url.QueryEscape(rec.Path), nil)
	if dl.Status != http.StatusOK || int64(len(dl.Raw)) != rec.Bytes {
		t.Fatalf("download: status %d, %d bytes, want %d", dl.Status, len(dl.Raw), rec.Bytes)
	}

	// start / pause / resume / status / stop.
	for _, step := range []struct{ action, want string }{{"start", "recording"}, {"pause", "paused"}, {"resume", "recording"}, {"status", "recording"}} {
		r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/record", map[string]any{"action": step.action, "fps": 5})
		if !r.Success || !strings.Contains(string(r.Data), `"status":"`+step.want+`"`) {
			t.Fatalf("%s: %s", step.action, r.Raw)
		}
	}
	if r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/record", map[string]any{"action": "start"}); r.Success {
		t.Fatalf("a second start succeeded: %s", r.Raw)
	}
	// Until a few frames are encoded (a loaded host starts the encoder
	// slowly), bounded.
	for i := 0; ; i++ {
		r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/record", map[string]any{"action": "status"})
		if !r.Success || json.Unmarshal(r.Data, &rec) != nil {
			t.Fatalf("status: %s", r.Raw)
		}
		if rec.Frames >= 3 {
			break
		}
		if i == 300 {
			t.Fatalf("no frames encoded after a minute: %s", r.Raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r = a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/record", map[string]any{"action": "stop"})
	if !r.Success || json.Unmarshal(r.Data, &rec) != nil || rec.Status != "stopped" || rec.Bytes == 0 {
		t.Fatalf("stop: %s", r.Raw)
	}
	if !strings.HasPrefix(rec.Path, browser.RecordDir+"/page_") {
		t.Fatalf("default path %q", rec.Path)
	}
	// A path outside the workspace is refused before anything runs.
	if r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/record", map[string]any{"action": "start", "save_path": "/etc/x.mp4"}); r.Success {
		t.Fatalf("a recording into /etc: %s", r.Raw)
	}

	// A download: the page offers report.csv; the click starts it, the
	// wait answers once it has completed.
	if r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/navigate", map[string]any{"url": "http://127.0.0.1:8000/offer.html"}); !r.Success {
		t.Fatalf("navigate: %s", r.Raw)
	}
	if r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/click", map[string]any{"selector": "#dl"}); !r.Success {
		t.Fatalf("click: %s", r.Raw)
	}
	var dlw struct {
		Path string `json:"path"`
		Size int64  `json:"size"`
	}
	r = a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/wait", map[string]any{"type": "download", "timeout": 60})
	if !r.Success || json.Unmarshal(r.Data, &dlw) != nil {
		t.Fatalf("wait download: %s", r.Raw)
	}
	if dlw.Path != "/workspace/downloads/report.csv" || dlw.Size != int64(len(reportCSV)) {
		t.Fatalf("wait download: %s (want %d bytes)", r.Raw, len(reportCSV))
	}
	got := a.Do("GET", "/sandboxes/"+sb.ID+"/v1/file/download?path="+url.QueryEscape(dlw.Path), nil)
	if got.Status != http.StatusOK || string(got.Raw) != reportCSV {
		t.Fatalf("the downloaded file: status %d, %d bytes", got.Status, len(got.Raw))
	}
	// Nothing more to wait for: the next wait times out; a directory
	// outside the workspace is refused.
	if r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/wait", map[string]any{"type": "download", "timeout": 1}); r.Success {
		t.Fatalf("a second wait found a download: %s", r.Raw)
	}
	if r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/wait", map[string]any{"type": "download", "save_path": "/etc"}); r.Success || r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("downloads into /etc: %d %s", r.Status, r.Raw)
	}

	// A hard restart with a locale: the browser asks for pages in it.
	if r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/restart", map[string]any{"mode": "hard", "locale": "de-DE"}); !r.Success {
		t.Fatalf("restart with a locale: %s", r.Raw)
	}
	if r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/page/navigate", map[string]any{"url": "http://127.0.0.1:8000/lang.html"}); !r.Success {
		t.Fatalf("navigate after the restart: %s", r.Raw)
	}
	var text string
	a.JSON("GET", "/sandboxes/"+sb.ID+"/v1/browser/page/text", nil, http.StatusOK, &text)
	if !strings.Contains(text, "lang=de-DE") {
		t.Fatalf("navigator.language after a de-DE restart: %q", text)
	}
	if r := a.Do("POST", "/sandboxes/"+sb.ID+"/v1/browser/restart", map[string]any{"url_blocklist": []string{"example.com"}}); r.Success {
		t.Fatalf("a URL block list was accepted: %s", r.Raw)
	}
}
