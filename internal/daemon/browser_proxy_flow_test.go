package daemon_test

import (
	"bytes"
	"fmt"
	"html"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// hostIPv4 is a non-loopback IPv4 address of this host, or "" (the
// sandbox's 127.0.0.1 is its own, so a host server needs another address).
func hostIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// TestBrowserFormFlowThroughTheAllowListProxy: a server on the host, put
// on a proxy-mode sandbox's allow list by an admin (an address in a
// private range is an admin's entry), is driven with AIO's routes on the
// sandbox's own Chromium: navigate, fill a form, click, read the server's
// answer with page/text, and a screenshot that decodes as a PNG of the
// configured size. A proxy-mode sandbox has no route but the allow-list
// proxy, so the page loaded through it (the proxy records a connection
// when it closes, which a browser's kept-alive connection has not done by
// the end of the test; the refusal side is
// TestBrowserInProxyModeGoesThroughTheAllowList).
func TestBrowserFormFlowThroughTheAllowListProxy(t *testing.T) {
	requireChromium(t)
	ip := hostIPv4()
	if ip == "" {
		t.Skip("this host has no non-loopback IPv4 address for a test server the sandbox may reach")
	}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skip("cannot listen on the host's address:", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/form", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `<!doctype html><title>Form</title><form action="/greet"><input id="name" name="name"><button id="go">Go</button></form>`)
	})
	mux.HandleFunc("/greet", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, `<!doctype html><title>Greeting</title><p id="out">hello, %s</p>`, html.EscapeString(r.URL.Query().Get("name")))
	})
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	srv.Start()
	defer srv.Close()
	hostPort := strings.TrimPrefix(srv.URL, "http://")

	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	id := admin.NewSandbox(map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{hostPort}}})
	pre := "/sandboxes/" + id + "/v1/browser"
	step := func(method, path string, body any) daemontest.Reply {
		t.Helper()
		r := admin.Do(method, pre+path, body)
		if r.Status != http.StatusOK || !r.Success {
			t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
		}
		return r
	}
	step("POST", "/config", map[string]any{"resolution": map[string]any{"width": 800, "height": 600}})
	step("POST", "/page/navigate", map[string]any{"url": srv.URL + "/form"})
	step("POST", "/page/fill", map[string]any{"selector": "#name", "text": "Ada"})
	step("POST", "/page/click", map[string]any{"selector": "#go"})
	step("POST", "/page/wait", map[string]any{"type": "url", "url": "*greet*"})
	if r := step("GET", "/page/text", nil); !strings.Contains(string(r.Data), "hello, Ada") {
		t.Fatalf("page text after the form: %s", r.Data)
	}
	r := admin.Do("GET", pre+"/screenshot", nil)
	img, err := png.Decode(bytes.NewReader(r.Raw))
	if r.Status != http.StatusOK || err != nil {
		t.Fatalf("screenshot: %d %v", r.Status, err)
	}
	if b := img.Bounds(); b.Dx() != 800 || b.Dy() != 600 {
		t.Fatalf("screenshot is %v, want the configured 800x600", b)
	}
}
