package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/console"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// desktopColor is the page the sandbox's browser shows on its desktop:
// a colour noVNC's canvas must then show (dodger blue, far from the
// greys of the page chrome and the window frame).
var desktopColor = [3]uint8{30, 144, 255}

// TestNoVNCPageShowsTheDesktop opens a sandbox's noVNC page
// (/sandboxes/{id}/vnc/index.html?ticket=…) in the host's Chromium with
// playwright-core (web/e2e/vnc-desktop.mjs) while the sandbox's headful
// browser shows a page of one colour: the page connects, and the canvas's
// screenshot — decoded here — is a desktop (its pixels vary) showing that
// page (a large share of them is the colour). Without a ticket, with a
// forged one, a spent one, or another key's, the page shows no desktop:
// not connected, and not one pixel of the colour on the screen.
func TestNoVNCPageShowsTheDesktop(t *testing.T) {
	shots, out := desktopRun(t, false)
	results := map[string]struct {
		Status string  `json:"status"`
		Share  float64 `json:"share"`
	}{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "result: "); ok {
			var r struct {
				Name   string  `json:"name"`
				Status string  `json:"status"`
				Share  float64 `json:"share"`
			}
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatalf("result line %q: %v", line, err)
			}
			results[r.Name] = struct {
				Status string  `json:"status"`
				Share  float64 `json:"share"`
			}{r.Status, r.Share}
		}
	}

	// The desktop: connected, the canvas's own screenshot varies (a
	// desktop, not a blank canvas) and much of it is the page's colour.
	if r := results["desktop"]; r.Status != "Connected" {
		t.Errorf("desktop: status %q", r.Status)
	}
	img := decodePNG(t, filepath.Join(shots, "vnc-desktop.png"))
	sd, share := pixelStats(img)
	t.Logf("desktop canvas %v: luminance standard deviation %.1f, %.0f%% of pixels the page's colour", img.Bounds().Size(), sd, 100*share)
	if img.Bounds().Dx() < 320 || img.Bounds().Dy() < 240 {
		t.Errorf("desktop canvas is %v", img.Bounds().Size())
	}
	if sd < 5 {
		t.Errorf("desktop canvas is blank: luminance standard deviation %.2f", sd)
	}
	if share < 0.2 {
		t.Errorf("desktop canvas shows %.1f%% of the page's colour, want the page on the desktop", 100*share)
	}
	// No desktop without a valid ticket.
	for _, name := range []string{"no-ticket", "bogus-ticket", "used-ticket", "other-key"} {
		r, ok := results[name]
		if !ok {
			t.Errorf("%s: no result", name)
			continue
		}
		img := decodePNG(t, filepath.Join(shots, "vnc-"+name+".png"))
		_, share := pixelStats(img)
		t.Logf("%s: status %q, %.2f%% of the page's colour", name, r.Status, 100*share)
		if r.Status == "Connected" || r.Share > 0 || share > 0.001 {
			t.Errorf("%s: the page shows the desktop (status %q, canvas %.2f, screenshot %.2f%% colour)", name, r.Status, r.Share, 100*share)
		}
	}
}

// desktopRun starts a server and a sandbox whose headful browser shows
// the one-colour page, and runs web/e2e/vnc-desktop.mjs against it (only
// the owner's desktop when onlyDesktop); it returns the screenshots'
// directory and the script's output.
func desktopRun(t *testing.T, onlyDesktop bool) (string, []byte) {
	t.Helper()
	node, chrome, web, tmp := requireBrowserRun(t)
	if err := browser.Available(); err != nil {
		t.Skip(err)
	}
	d := daemontest.Start(t, nil)
	if !console.EmbeddedBuilt() {
		t.Skip("this test binary was built without the console's assets: run `make console` (make build and make test do) before go test")
	}
	admin := daemontest.NewClient(t, d)
	ka := admin.NewKey("agent-a", "agent")
	kb := admin.NewKey("agent-b", "agent")
	a := admin.As(ka.Key)
	id := a.NewSandbox(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	// Opening the desktop starts a headful browser; then it shows the
	// coloured page.
	openDesktop(t, ctx, a, d.Addr(), id)
	page := fmt.Sprintf(`data:text/html,<body style="margin:0;background:rgb(%d,%d,%d)"><h1 style="color:white;font:bold 64px sans-serif;padding:40px">sandbox desktop</h1>`,
		desktopColor[0], desktopColor[1], desktopColor[2])
	if r := a.Do("POST", "/sandboxes/"+id+"/v1/browser/page/navigate", map[string]any{"url": page}); r.Status != http.StatusOK || !r.Success {
		t.Fatalf("navigate the desktop's browser: %d %s", r.Status, r.Raw)
	}

	shots := filepath.Join(t.ArtifactDir(), "vnc")
	if err := os.MkdirAll(shots, 0o750); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, filepath.Join("e2e", "vnc-desktop.mjs"))
	cmd.Dir = web
	cmd.Env = browserEnv(tmp, "BASE_URL=http://"+d.Addr(), "SANDBOX="+id, "KEY_A="+ka.Key, "KEY_B="+kb.Key,
		"CHROMIUM="+chrome, "OUT_DIR="+shots, fmt.Sprintf("COLOR=%d,%d,%d", desktopColor[0], desktopColor[1], desktopColor[2]))
	if onlyDesktop {
		cmd.Env = append(cmd.Env, "ONLY_DESKTOP=1")
	}
	out, err := cmd.CombinedOutput()
	t.Logf("node e2e/vnc-desktop.mjs:\n%s", out)
	t.Logf("screenshots: %s", shots)
	if err != nil || !strings.Contains(string(out), "\nPASS") {
		t.Fatalf("the browser run failed: %v", err)
	}
	return shots, out
}

// TestNoVNCDesktopShowsThePageInTheWholeWindow: a person who takes over
// the desktop sees the page fill the browser's window. Today the browser
// operations give every tab a 1280x720 viewport override (AIO's default
// resolution) also in a headful browser, whose window is 1280x1024: the
// page ends at 720 px and the window's lower part stays white.
func TestNoVNCDesktopShowsThePageInTheWholeWindow(t *testing.T) {
	shots, _ := desktopRun(t, true)
	img := decodePNG(t, filepath.Join(shots, "vnc-desktop.png"))
	b := img.Bounds()
	// The bottom tenth of the desktop, where the window's page area ends.
	band := image.Rect(b.Min.X, b.Max.Y-b.Dy()/10, b.Max.X, b.Max.Y)
	_, share := pixelStats(img.(interface {
		SubImage(image.Rectangle) image.Image
	}).SubImage(band))
	if share < 0.5 {
		t.Fatalf("the bottom tenth of the desktop is %.0f%% the page's colour: the page does not fill the window", 100*share)
	}
}

// openDesktop opens and closes the sandbox's VNC relay once, which starts
// its browser headful.
func openDesktop(t *testing.T, ctx context.Context, a *daemontest.Client, addr, id string) {
	t.Helper()
	var tk struct {
		Ticket string `json:"ticket"`
	}
	a.JSON("POST", "/v1/tickets", map[string]string{"scope": "vnc"}, http.StatusCreated, &tk)
	u := "ws://" + addr + "/sandboxes/" + id + "/vnc/websockify?ticket=" + url.QueryEscape(tk.Ticket)
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"binary"}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("open the desktop: %v", err)
	}
	// The RFB greeting: the VNC server is up behind the relay.
	if _, msg, err := c.Read(ctx); err != nil || !strings.HasPrefix(string(msg), "RFB ") {
		t.Fatalf("RFB greeting: %q %v", msg, err)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
}

func decodePNG(t *testing.T, p string) image.Image {
	t.Helper()
	f, err := os.Open(p) // #nosec G304 -- a screenshot the test's script wrote in its artifact dir
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return img
}

// pixelStats is the standard deviation of img's luminance and the share
// of its pixels within 24 of desktopColor per channel.
func pixelStats(img image.Image) (sd, share float64) {
	b := img.Bounds()
	var n, hit float64
	var sum, sq float64
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r8, g8, b8 := float64(r>>8), float64(g>>8), float64(bl>>8)
			l := 0.299*r8 + 0.587*g8 + 0.114*b8
			sum += l
			sq += l * l
			n++
			if math.Abs(r8-float64(desktopColor[0])) < 24 && math.Abs(g8-float64(desktopColor[1])) < 24 && math.Abs(b8-float64(desktopColor[2])) < 24 {
				hit++
			}
		}
	}
	if n == 0 {
		return 0, 0
	}
	mean := sum / n
	return math.Sqrt(math.Max(sq/n-mean*mean, 0)), hit / n
}

// requireBrowserRun skips unless this host can drive its Chromium with
// playwright-core: node, Chromium that starts, web/node_modules. It
// returns node's and Chromium's paths, the web directory and the TMPDIR
// that every Chromium of the test (the probe and playwright's) runs with.
//
// Chromium makes a directory for its singleton socket in TMPDIR
// (org.chromium.Chromium.XXXXXX) and does not always remove it; a TMPDIR
// of the test's own goes with the test. Not a t.TempDir: a socket's path
// must fit in 108 bytes, and those carry the test's name.
func requireBrowserRun(t *testing.T) (node, chrome, web, tmp string) {
	t.Helper()
	daemontest.RequireSandboxes(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the browser test needs Node.js 18+ and playwright-core (make deps)")
	}
	for _, name := range chromiumPaths {
		if p, err := exec.LookPath(name); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		t.Skip("Chromium is not installed (apt-get install chromium; make deps does)")
	}
	web, err = filepath.Abs(filepath.Join("..", "..", "web"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "playwright-core", "package.json")); err != nil {
		t.Skip("playwright-core is not installed: run `npm ci --prefix web` (make deps does)")
	}
	tmp, err = os.MkdirTemp("", "console-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	// Chromium must start here at all (a container without /dev/shm or
	// the needed libraries): probe it in a child, skip with its words.
	probe, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(probe, chrome, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "about:blank")
	cmd.Env = browserEnv(tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("Chromium does not start on this host: %v: %s", err, lastLine(out))
	}
	return node, chrome, web, tmp
}

// browserEnv is this process's environment with TMPDIR set to tmp, for
// node and the Chromium it starts.
func browserEnv(tmp string, more ...string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TMPDIR=") })
	return append(append(env, "TMPDIR="+tmp), more...)
}
