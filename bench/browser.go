package main

// "bench browser": the browser inside a sandbox against the same Chromium
// started directly on the host, in one run.
//
//   - cold start: sandbox create + browser start to the first DevTools
//     answer (/sandboxes/{id}/cdp/json/version through the relay), against
//     the host Chromium's exec to its first /json/version answer;
//   - warm navigate + screenshot round trips (AIO's page/navigate and
//     page/screenshot over HTTP, against Page.navigate + load +
//     Page.captureScreenshot over the host Chromium's own DevTools), and
//     screenshots per second;
//   - idle memory: the sandbox's cgroup memory before and after its
//     browser starts (headless, and headful: Xvfb + x11vnc + Chromium),
//     against the host Chromium alone in a memory cgroup of its own.
//
// The peer runs with the runtime's flags (internal/browser's chromiumArgs,
// copied here: the bench must not reach into the runtime) except those
// that only make sense in a sandbox.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// browserOpts are the flags of bench browser.
type browserOpts struct {
	starts int // cold starts per side
	rounds int // navigate+screenshot round trips per side
	pids   int // the sandboxes' pids limit (>= 160: multi-process Chromium)
}

const (
	// chromiumBin is Debian's browser binary, the one the sandboxes run.
	chromiumBin = "/usr/lib/chromium/chromium"
	// idleSettle is how long a started browser idles before its memory is
	// read (the runtime's own figure in BENCHMARKS.md waited 3 s too).
	idleSettle = 3 * time.Second
	// startPoll is how often a starting peer's port is tried (the runtime
	// polls every 50 ms too).
	startPoll = 50 * time.Millisecond
	// startLimit bounds one start (the runtime's own start timeout).
	startLimit = 60 * time.Second
)

// benchPage is the page both sides navigate to: some text and colour,
// numbered so every navigation is a new document.
func benchPage(i int) string {
	return "data:text/html," + url.PathEscape(fmt.Sprintf(`<!doctype html><title>bench %d</title><body style="font:16px sans-serif;background:#eef">`+
		`<h1>Benchmark page %d</h1><p>%s</p><ul><li>one</li><li>two</li><li>three</li></ul></body>`, i, i, strings.Repeat("Lorem ipsum dolor sit amet. ", 40)))
}

type browserSide struct {
	Create             *figure `json:"create,omitempty"`
	BrowserStart       *figure `json:"browser_start,omitempty"`
	ColdStart          figure  `json:"cold_start_to_devtools"`
	NavigateScreenshot figure  `json:"navigate_screenshot"`
	ScreenshotsPerSec  float64 `json:"screenshots_per_second"`
	IdleHeadlessMiB    float64 `json:"idle_headless_mib"`
	IdleHeadfulMiB     float64 `json:"idle_headful_mib,omitempty"`
	MemorySource       string  `json:"memory_source"`
	Screenshot         string  `json:"screenshot_size"`
}

type browserResult struct {
	Chromium string      `json:"chromium"`
	Pids     int         `json:"sandbox_pids"`
	LoadAvg  [2]string   `json:"load_average_start_end"`
	Sandhold browserSide `json:"sandhold"`
	Peer     browserSide `json:"host_chromium"`
	Ratios   struct {
		ColdStart          float64 `json:"cold_start_sandhold_over_peer"`
		NavigateScreenshot float64 `json:"navigate_screenshot_p50_sandhold_over_peer"`
		ScreenshotsPerSec  float64 `json:"screenshots_per_second_sandhold_over_peer"`
		IdleHeadless       float64 `json:"idle_headless_memory_sandhold_over_peer"`
		IdleHeadful        float64 `json:"idle_headful_memory_sandhold_over_peer_headless"`
	} `json:"ratios"`
}

func browserBench(ctx context.Context, o options, bo browserOpts) error {
	if _, err := os.Stat(chromiumBin); err != nil {
		return fmt.Errorf("chromium is not installed (%s; make deps installs it)", chromiumBin)
	}
	if bo.starts < 1 || bo.rounds < 1 {
		return errors.New("-starts and -rounds must be at least 1")
	}
	var res browserResult
	res.Pids = bo.pids
	res.LoadAvg[0] = loadAvg()
	if out, err := exec.CommandContext(ctx, chromiumBin, "--version").Output(); err == nil {
		res.Chromium = strings.TrimSpace(string(out))
	}
	// The sandboxes get a pids budget in which Chromium runs
	// multi-process, like the peer (the server's maximum must allow it).
	if err := os.Setenv("SANDBOX_MAX_PROCESSES", strconv.Itoa(max(bo.pids, 50))); err != nil {
		return err
	}
	srv, err := startServer(ctx, o.server, 0)
	if err != nil {
		return err
	}
	defer srv.stop()
	if err := compareBrowsers(ctx, srv, o, bo, &res); err != nil {
		return err
	}
	res.LoadAvg[1] = loadAvg()
	s, p := res.Sandhold, res.Peer
	res.Ratios.ColdStart = s.ColdStart.P50ms / p.ColdStart.P50ms
	res.Ratios.NavigateScreenshot = s.NavigateScreenshot.P50ms / p.NavigateScreenshot.P50ms
	res.Ratios.ScreenshotsPerSec = s.ScreenshotsPerSec / p.ScreenshotsPerSec
	res.Ratios.IdleHeadless = s.IdleHeadlessMiB / p.IdleHeadlessMiB
	res.Ratios.IdleHeadful = s.IdleHeadfulMiB / p.IdleHeadlessMiB
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	printBrowser(res)
	return nil
}

// compareBrowsers measures both sides, alternating sample by sample so
// that a host whose load changes during the run weighs on both alike.
func compareBrowsers(ctx context.Context, srv *server, o options, bo browserOpts, res *browserResult) error {
	sh, pe := &res.Sandhold, &res.Peer
	spec := map[string]any{"limits": map[string]any{"pids": bo.pids}}
	var create, start, cold, peerCold latency
	var mem, peerMem []float64
	var keep string
	var last *peer
	defer func() {
		if last != nil {
			last.stop()
		}
	}()
	for i := range bo.starts {
		id, created, started, m, err := sandholdCold(srv, spec)
		if err != nil {
			return fmt.Errorf("sandhold, start #%d: %w", i+1, err)
		}
		create, start, cold = append(create, created), append(start, started), append(cold, created+started)
		mem = append(mem, m)
		p, d, pm, err := peerColdStart(ctx, i)
		if err != nil {
			return fmt.Errorf("host chromium, start #%d: %w", i+1, err)
		}
		peerCold, peerMem = append(peerCold, d), append(peerMem, pm)
		if i == bo.starts-1 { // the warm figures use the last ones
			keep, last = id, p
			break
		}
		p.stop()
		if err := srv.delete(id); err != nil {
			return err
		}
	}
	fc, fs := fig(create), fig(start)
	sh.Create, sh.BrowserStart, sh.ColdStart, pe.ColdStart = &fc, &fs, fig(cold), fig(peerCold)
	sh.IdleHeadlessMiB, pe.IdleHeadlessMiB = median(mem), median(peerMem)
	sh.MemorySource = "the sandbox's cgroup memory (memory.usage_in_bytes or memory.current) after minus before the browser"
	pe.MemorySource = "a memory cgroup holding only the host Chromium (" + filepath.Base(last.memFile) + ")"

	// Warm: navigate + screenshot, then screenshots alone. The peer's
	// viewport is the size of the sandbox's screenshots.
	pre := "/sandboxes/" + keep + "/v1/browser"
	w, h, err := sandholdRound(srv, pre, 0)
	if err != nil {
		return err
	}
	sh.Screenshot, pe.Screenshot = fmt.Sprintf("%dx%d", w, h), fmt.Sprintf("%dx%d", w, h)
	k, err := dialPage(ctx, last.port)
	if err != nil {
		return err
	}
	defer func() { _ = k.c.CloseNow() }()
	if _, err := k.call(ctx, "Page.enable", nil, ""); err != nil {
		return err
	}
	if _, err := k.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": w, "height": h, "deviceScaleFactor": 1, "mobile": false}, ""); err != nil {
		return err
	}
	var rt, peerRT latency
	for i := range bo.rounds + 3 {
		t0 := time.Now()
		if _, _, err := sandholdRound(srv, pre, i+1); err != nil {
			return err
		}
		d := time.Since(t0)
		t0 = time.Now()
		if err := peerRound(ctx, k, i+1); err != nil {
			return err
		}
		if i >= 3 { // the first rounds warm the pages' caches
			rt, peerRT = append(rt, d), append(peerRT, time.Since(t0))
		}
	}
	sh.NavigateScreenshot, pe.NavigateScreenshot = fig(rt), fig(peerRT)
	// Screenshots per second: one-second bursts, alternating, o.sustain
	// in all per side.
	var n, pn int
	var spent, peerSpent time.Duration
	for spent < o.sustain {
		t0 := time.Now()
		for time.Since(t0) < time.Second {
			if _, err := srv.get(pre + "/page/screenshot"); err != nil {
				return err
			}
			n++
		}
		spent += time.Since(t0)
		t0 = time.Now()
		for time.Since(t0) < time.Second {
			if err := peerShot(ctx, k); err != nil {
				return err
			}
			pn++
		}
		peerSpent += time.Since(t0)
	}
	sh.ScreenshotsPerSec, pe.ScreenshotsPerSec = float64(n)/spent.Seconds(), float64(pn)/peerSpent.Seconds()
	if err := srv.delete(keep); err != nil {
		return err
	}

	// Headful: opening the desktop starts Xvfb, x11vnc and Chromium.
	var sb struct {
		ID string `json:"id"`
	}
	if err := srv.call("POST", "/v1/sandboxes", spec, &sb); err != nil {
		return err
	}
	time.Sleep(idleSettle)
	before, err := srv.sandboxMemory(sb.ID)
	if err != nil {
		return err
	}
	if err := srv.openDesktop(ctx, sb.ID); err != nil {
		return fmt.Errorf("headful: %w", err)
	}
	time.Sleep(idleSettle)
	after, err := srv.sandboxMemory(sb.ID)
	if err != nil {
		return err
	}
	sh.IdleHeadfulMiB = float64(after-before) / (1 << 20)
	return srv.delete(sb.ID)
}

// sandholdCold creates a sandbox and starts its browser through the
// DevTools relay: the two times, and the memory the browser added once
// idle (MiB).
func sandholdCold(srv *server, spec any) (id string, created, started time.Duration, mib float64, err error) {
	t0 := time.Now()
	var sb struct {
		ID string `json:"id"`
	}
	if err := srv.call("POST", "/v1/sandboxes", spec, &sb); err != nil {
		return "", 0, 0, 0, err
	}
	created = time.Since(t0)
	time.Sleep(idleSettle)
	before, err := srv.sandboxMemory(sb.ID)
	if err != nil {
		return "", 0, 0, 0, err
	}
	t1 := time.Now()
	if err := srv.devToolsVersion(sb.ID); err != nil {
		return "", 0, 0, 0, err
	}
	started = time.Since(t1)
	time.Sleep(idleSettle)
	after, err := srv.sandboxMemory(sb.ID)
	if err != nil {
		return "", 0, 0, 0, err
	}
	return sb.ID, created, started, float64(after-before) / (1 << 20), nil
}

// sandholdRound navigates the sandbox's browser to page i and takes a
// screenshot; it returns the screenshot's size.
func sandholdRound(srv *server, pre string, i int) (w, h int, err error) {
	if err := srv.aio("POST", pre+"/page/navigate", map[string]any{"url": benchPage(i)}); err != nil {
		return 0, 0, err
	}
	shot, err := srv.get(pre + "/page/screenshot")
	if err != nil {
		return 0, 0, err
	}
	img, err := png.DecodeConfig(strings.NewReader(string(shot)))
	if err != nil {
		return 0, 0, fmt.Errorf("screenshot is not a PNG: %w", err)
	}
	return img.Width, img.Height, nil
}

// aio calls an AIO route and fails unless its envelope says success.
func (s *server) aio(method, path string, body any) error {
	var env struct {
		Success bool   `json:"success"`
		Message string `json:"message"`
	}
	raw, err := s.rawCall(method, path, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &env); err != nil || !env.Success {
		return fmt.Errorf("%s %s: %.300s", method, path, raw)
	}
	return nil
}

// get is a GET whose body is returned as it is (images).
func (s *server) get(path string) ([]byte, error) { return s.rawCall("GET", path, nil) }

func (s *server) rawCall(method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %d %.300s", method, path, resp.StatusCode, raw)
	}
	return raw, nil
}

// devToolsVersion asks the sandbox's DevTools for its version through the
// relay, which starts the browser.
func (s *server) devToolsVersion(id string) error {
	raw, err := s.get("/sandboxes/" + id + "/cdp/json/version")
	if err != nil {
		return err
	}
	if !strings.Contains(string(raw), "webSocketDebuggerUrl") {
		return fmt.Errorf("version answer %.300s", raw)
	}
	return nil
}

// sandboxMemory is the sandbox's cgroup memory in bytes.
func (s *server) sandboxMemory(id string) (int64, error) {
	var rows []struct {
		ID     string `json:"id"`
		Cgroup struct {
			MemoryBytes int64
		} `json:"cgroup"`
	}
	if err := s.call("GET", "/v1/sandbox/resources", nil, &rows); err != nil {
		return 0, err
	}
	for _, r := range rows {
		if r.ID == id {
			if r.Cgroup.MemoryBytes == 0 {
				return 0, errors.New("the server reports no cgroup memory for the sandbox")
			}
			return r.Cgroup.MemoryBytes, nil
		}
	}
	return 0, fmt.Errorf("sandbox %s not in /v1/sandbox/resources", id)
}

// openDesktop opens the sandbox's VNC relay with a ticket until the VNC
// server greets, which starts a headful browser.
func (s *server) openDesktop(ctx context.Context, id string) error {
	var tk struct {
		Ticket string `json:"ticket"`
	}
	if err := s.call("POST", "/v1/tickets", map[string]string{"scope": "vnc"}, &tk); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*startLimit)
	defer cancel()
	u := strings.Replace(s.base, "http://", "ws://", 1) + "/sandboxes/" + id + "/vnc/websockify?ticket=" + url.QueryEscape(tk.Ticket)
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"binary"}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return err
	}
	defer func() { _ = c.CloseNow() }()
	_, msg, err := c.Read(ctx)
	if err != nil {
		return fmt.Errorf("read the RFB greeting: %w", err)
	}
	if !strings.HasPrefix(string(msg), "RFB ") {
		return fmt.Errorf("no RFB greeting: %q", msg)
	}
	return nil
}

// peerArgs is the runtime's command line for a headless multi-process
// browser, with the DevTools port and profile of the peer; what only a
// sandbox needs (a proxy) is left out.
func peerArgs(port int, profile string) []string {
	return []string{
		"--no-sandbox",
		"--remote-debugging-address=127.0.0.1",
		"--remote-debugging-port=" + strconv.Itoa(port),
		"--user-data-dir=" + profile,
		"--disable-dev-shm-usage",
		"--disable-gpu",
		"--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider",
		"--password-store=basic", "--use-mock-keychain",
		"--mute-audio",
		"--window-size=1280,1024",
		"--headless=new",
		"--no-zygote", "--renderer-process-limit=4",
		"about:blank",
	}
}

// peer is one host Chromium in a memory cgroup of its own.
type peer struct {
	cmd     *exec.Cmd
	port    int
	profile string
	cg      string // the cgroup directory; "" when none could be made
	memFile string
}

// startPeer starts the host Chromium and returns when its DevTools
// answers, with the time that took.
func startPeer(ctx context.Context, n int) (*peer, time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	profile, err := os.MkdirTemp("", "sandhold-bench-chromium-")
	if err != nil {
		return nil, 0, err
	}
	p := &peer{port: port, profile: profile}
	p.cg, p.memFile = peerCgroup(n)
	// The shell puts itself into the cgroup and becomes Chromium, so
	// every process of the browser is charged there from its first page.
	script := `exec "$@"`
	if p.cg != "" {
		script = `echo $$ > "$0/cgroup.procs" && exec "$@"`
	}
	args := append([]string{"-c", script, p.cg, chromiumBin}, peerArgs(port, profile)...)
	p.cmd = exec.CommandContext(ctx, "/bin/sh", args...) // #nosec G204 -- a fixed script exec-ing Debian's chromium with fixed flags; the only variables are a port and directories this bench made
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, io.Discard
	// Chromium's singleton directory (TMPDIR/org.chromium.Chromium.*)
	// outlives a SIGKILL (stop): it goes in the profile, removed there.
	tmp := filepath.Join(profile, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		p.stop()
		return nil, 0, err
	}
	p.cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	t0 := time.Now()
	if err := p.cmd.Start(); err != nil {
		p.stop()
		return nil, 0, err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	for time.Since(t0) < startLimit {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/json/version", port))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, time.Since(t0), nil
			}
		}
		time.Sleep(startPoll)
	}
	p.stop()
	return nil, 0, errors.New("the host Chromium did not answer within 60 s")
}

// peerCgroup makes a memory cgroup for the peer (v1, else v2); empty
// strings when this host does not let the bench make one.
func peerCgroup(n int) (dir, memFile string) {
	name := fmt.Sprintf("sandhold-bench-peer-%d-%d", os.Getpid(), n)
	for _, c := range []struct{ base, file string }{
		{"/sys/fs/cgroup/memory", "memory.usage_in_bytes"},
		{"/sys/fs/cgroup", "memory.current"},
	} {
		if _, err := os.Stat(filepath.Join(c.base, c.file)); err != nil && c.file == "memory.current" {
			continue
		}
		d := filepath.Join(c.base, name)
		if err := os.Mkdir(d, 0o750); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, c.file)); err != nil {
			_ = os.Remove(d)
			continue
		}
		return d, filepath.Join(d, c.file)
	}
	return "", ""
}

// memory is the peer's cgroup memory in bytes.
func (p *peer) memory() (int64, error) {
	if p.memFile == "" {
		return 0, errors.New("no memory cgroup for the host Chromium (run as root on a host with cgroups)")
	}
	b, err := os.ReadFile(p.memFile)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func (p *peer) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
	if p.cg != "" {
		// The group empties as the killed processes are reaped.
		for range 100 {
			if os.Remove(p.cg) == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	_ = os.RemoveAll(p.profile)
}

// peerColdStart starts a host Chromium: the time to its first DevTools
// answer and its memory once idle (MiB).
func peerColdStart(ctx context.Context, n int) (*peer, time.Duration, float64, error) {
	p, d, err := startPeer(ctx, n)
	if err != nil {
		return nil, 0, 0, err
	}
	time.Sleep(idleSettle)
	m, err := p.memory()
	if err != nil {
		p.stop()
		return nil, 0, 0, err
	}
	return p, d, float64(m) / (1 << 20), nil
}

// peerRound navigates the peer's page to page i, waits for its load and
// takes a screenshot.
func peerRound(ctx context.Context, k *cdpPage, i int) error {
	if _, err := k.call(ctx, "Page.navigate", map[string]any{"url": benchPage(i)}, "Page.loadEventFired"); err != nil {
		return err
	}
	return peerShot(ctx, k)
}

// peerShot takes a PNG screenshot of the peer's page and decodes its
// base64, as the server does for its answer.
func peerShot(ctx context.Context, k *cdpPage) error {
	r, err := k.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, "")
	if err != nil {
		return err
	}
	var v struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(r, &v); err != nil {
		return err
	}
	_, err = base64.StdEncoding.DecodeString(v.Data)
	return err
}

// cdpPage is a DevTools connection to one page target.
type cdpPage struct {
	c  *websocket.Conn
	id int
}

// dialPage connects to the first page target of the browser on port.
func dialPage(ctx context.Context, port int) (*cdpPage, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/json/list", port)) // #nosec G107 -- the loopback DevTools port of the Chromium this bench started
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var targets []struct {
		Type string `json:"type"`
		WS   string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
		return nil, err
	}
	for _, t := range targets {
		if t.Type == "page" {
			c, resp, err := websocket.Dial(ctx, t.WS, nil)
			if resp != nil && resp.Body != nil {
				_ = resp.Body.Close()
			}
			if err != nil {
				return nil, err
			}
			c.SetReadLimit(64 << 20)
			return &cdpPage{c: c}, nil
		}
	}
	return nil, errors.New("the host Chromium has no page target")
}

// call sends method and returns its result; with event set it also waits
// for that event (after the answer or before it).
func (k *cdpPage) call(ctx context.Context, method string, params any, event string) (json.RawMessage, error) {
	k.id++
	msg, err := json.Marshal(map[string]any{"id": k.id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startLimit)
	defer cancel()
	if err := k.c.Write(ctx, websocket.MessageText, msg); err != nil {
		return nil, err
	}
	var result json.RawMessage
	answered, seen := false, event == ""
	for !answered || !seen {
		_, raw, err := k.c.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var m struct {
			ID     int             `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		switch {
		case m.ID == k.id:
			if m.Error != nil {
				return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
			}
			result, answered = m.Result, true
		case m.Method == event && event != "":
			seen = true
		}
	}
	return result, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	for i := range s { // insertion sort: a handful of samples
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

func printBrowser(r browserResult) {
	fmt.Printf("%s; sandboxes with limits.pids %d; load average %s at the start, %s at the end\n\n", r.Chromium, r.Pids, r.LoadAvg[0], r.LoadAvg[1])
	row := func(name string, f figure) {
		fmt.Printf("%-52s p50 %9.1f ms   p99 %9.1f ms   (n=%d)\n", name, f.P50ms, f.P99ms, f.N)
	}
	s, p := r.Sandhold, r.Peer
	if s.Create != nil && s.BrowserStart != nil {
		row("sandhold: sandbox create", *s.Create)
		row("sandhold: browser start to first DevTools answer", *s.BrowserStart)
	}
	row("sandhold: cold start (create + browser)", s.ColdStart)
	row("host Chromium: exec to first DevTools answer", p.ColdStart)
	row("sandhold: navigate + screenshot ("+s.Screenshot+")", s.NavigateScreenshot)
	row("host Chromium: navigate + screenshot ("+p.Screenshot+")", p.NavigateScreenshot)
	fmt.Printf("%-52s %9.1f /s\n", "sandhold: screenshots", s.ScreenshotsPerSec)
	fmt.Printf("%-52s %9.1f /s\n", "host Chromium: screenshots", p.ScreenshotsPerSec)
	fmt.Printf("%-52s %9.1f MiB\n", "sandhold: idle headless browser (cgroup)", s.IdleHeadlessMiB)
	fmt.Printf("%-52s %9.1f MiB\n", "sandhold: idle headful (Xvfb+x11vnc+Chromium)", s.IdleHeadfulMiB)
	fmt.Printf("%-52s %9.1f MiB\n", "host Chromium: idle headless (cgroup)", p.IdleHeadlessMiB)
	fmt.Printf("\nratios sandhold / host Chromium: cold start %.2fx, navigate+screenshot %.2fx, screenshots/s %.2fx, idle memory %.2fx (headful over headless peer %.2fx)\n",
		r.Ratios.ColdStart, r.Ratios.NavigateScreenshot, r.Ratios.ScreenshotsPerSec, r.Ratios.IdleHeadless, r.Ratios.IdleHeadful)
}
