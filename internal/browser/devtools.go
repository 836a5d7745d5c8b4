package browser

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/sandhold/sandhold/internal/browser/cdp"
)

// The browser's DevTools endpoint, served by the server itself.
//
// Chromium runs with --remote-debugging-pipe: it speaks the protocol over
// two descriptors the init gave it and the server holds the other ends of,
// and listens on no port. So code in the sandbox that kills the browser
// and binds 127.0.0.1:9222 (which it may: the port is the sandbox's own)
// stands in for nothing — nobody connects there — and when the browser
// the server started ends, its pipe ends with it and every DevTools
// session with the pipe.
//
// DevTools clients (Playwright's connectOverCDP, Puppeteer's connect,
// the server's own operations) still want DevTools' HTTP endpoints and
// WebSockets, so the server serves them in its own process, over the
// pipe (cdp.Mux): /json/version, /json/list (/json), /json/new,
// /json/activate, /json/close, and the WebSockets /devtools/browser/… (a
// browser session of the client's own) and /devtools/page/{target} (a
// session attached to that target). Its answers are built here from the
// protocol's answers and are always JSON; the DevTools front-end's pages
// do not exist here. Each connection is one of the sandbox's relayed
// connections (sandbox.Relay): refused unless the sandbox runs, closed by a
// pause, HALT or stop.

// devtoolsHost is the address the endpoint calls itself in its answers
// (what Chromium's own endpoint would say); the relay rewrites it to the
// server's route.
const devtoolsHost = "127.0.0.1:9222"

// maxNewURL caps the URL of /json/new.
const maxNewURL = 8 << 10

// browserVersion is Browser.getVersion's answer.
type browserVersion struct {
	ProtocolVersion string `json:"protocolVersion"`
	Product         string `json:"product"`
	Revision        string `json:"revision"`
	UserAgent       string `json:"userAgent"`
	JSVersion       string `json:"jsVersion"`
}

// devtools serves one browser's DevTools endpoint over its pipe.
type devtools struct {
	mux       *cdp.Mux
	version   browserVersion
	browserID string
	ln        *pipeListener
	srv       *http.Server
}

// newDevTools serves mux's browser, whose version is v.
func newDevTools(mux *cdp.Mux, v browserVersion, log *slog.Logger) *devtools {
	d := &devtools{mux: mux, version: v, browserID: uuid.NewString(), ln: newPipeListener()}
	d.srv = &http.Server{Handler: d, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = d.srv.Serve(d.ln) }()
	return d
}

// dial opens a connection to the endpoint.
func (d *devtools) dial() (net.Conn, error) { return d.ln.dial() }

// close ends the endpoint and every connection to it.
func (d *devtools) close() {
	_ = d.srv.Close()
	_ = d.mux.Close()
}

func (d *devtools) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		switch {
		case strings.HasPrefix(p, "/devtools/browser/"):
			d.serveSession(w, r, "")
		case strings.HasPrefix(p, "/devtools/page/") && len(p) > len("/devtools/page/"):
			d.serveSession(w, r, strings.TrimPrefix(p, "/devtools/page/"))
		default:
			http.NotFound(w, r)
		}
		return
	}
	switch {
	case p == "/json/version" || p == "/json/version/":
		d.answer(w, map[string]string{
			"Browser": d.version.Product, "Protocol-Version": d.version.ProtocolVersion, "User-Agent": d.version.UserAgent,
			"V8-Version": d.version.JSVersion, "WebKit-Version": d.version.Revision,
			"webSocketDebuggerUrl": "ws://" + devtoolsHost + "/devtools/browser/" + d.browserID,
		}, nil)
	case p == "/json" || p == "/json/" || p == "/json/list" || p == "/json/list/":
		var res struct {
			TargetInfos []targetInfo `json:"targetInfos"`
		}
		err := d.mux.Call(r.Context(), "Target.getTargets", nil, &res)
		list := make([]map[string]string, 0, len(res.TargetInfos))
		for _, t := range res.TargetInfos {
			if t.Type != "browser" && t.Type != "tab" {
				list = append(list, t.entry())
			}
		}
		d.answer(w, list, err)
	case p == "/json/new":
		if r.Method != http.MethodPut {
			d.fail(w, http.StatusMethodNotAllowed, "use PUT for /json/new")
			return
		}
		target, err := url.QueryUnescape(r.URL.RawQuery)
		if err != nil || len(target) > maxNewURL {
			d.fail(w, http.StatusBadRequest, "the URL after ? is not a URL")
			return
		}
		if target == "" {
			target = "about:blank"
		}
		var res struct {
			TargetID string `json:"targetId"`
		}
		if err := d.mux.Call(r.Context(), "Target.createTarget", map[string]any{"url": target}, &res); err != nil {
			d.answer(w, nil, err)
			return
		}
		var info struct {
			TargetInfo targetInfo `json:"targetInfo"`
		}
		err = d.mux.Call(r.Context(), "Target.getTargetInfo", map[string]any{"targetId": res.TargetID}, &info)
		d.answer(w, info.TargetInfo.entry(), err)
	case strings.HasPrefix(p, "/json/activate/"):
		err := d.mux.Call(r.Context(), "Target.activateTarget", map[string]any{"targetId": strings.TrimPrefix(p, "/json/activate/")}, nil)
		d.answer(w, "Target activated", err)
	case strings.HasPrefix(p, "/json/close/"):
		err := d.mux.Call(r.Context(), "Target.closeTarget", map[string]any{"targetId": strings.TrimPrefix(p, "/json/close/")}, nil)
		d.answer(w, "Target is closing", err)
	default:
		d.fail(w, http.StatusNotFound, "DevTools serves /json/version, /json/list, /json/new, /json/activate, /json/close and the /devtools/ WebSockets here")
	}
}

// targetInfo is the part of Target.TargetInfo an entry of /json/list shows.
type targetInfo struct {
	TargetID string `json:"targetId"`
	Type     string `json:"type"`
	Title    string `json:"title"`
	URL      string `json:"url"`
}

func (t targetInfo) entry() map[string]string {
	return map[string]string{"description": "", "id": t.TargetID, "title": t.Title, "type": t.Type, "url": t.URL,
		"webSocketDebuggerUrl": "ws://" + devtoolsHost + "/devtools/page/" + t.TargetID}
}

// answer writes v as JSON, or the browser's refusal.
func (d *devtools) answer(w http.ResponseWriter, v any, err error) {
	var ce *cdp.Error
	switch {
	case errors.As(err, &ce):
		d.fail(w, http.StatusNotFound, ce.Message)
		return
	case err != nil:
		d.fail(w, http.StatusServiceUnavailable, "the browser did not answer")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(v)
}

func (d *devtools) fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// serveSession bridges one DevTools WebSocket to a session of its own.
func (d *devtools) serveSession(w http.ResponseWriter, r *http.Request, targetID string) {
	s, err := d.mux.Open(r.Context(), targetID)
	if err != nil {
		d.answer(w, nil, err)
		return
	}
	defer func() { _ = s.Close() }()
	// The request was authenticated by the relay, which removed Origin;
	// this endpoint is reached only through it and the server's own client.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	ws.SetReadLimit(cdp.MaxMessage)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer cancel()
		for {
			msg, err := s.Read(ctx)
			if err != nil {
				return
			}
			if err := ws.Write(ctx, websocket.MessageText, msg); err != nil {
				return
			}
		}
	})
	for {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			break
		}
		if err := s.Write(msg); err != nil {
			break
		}
	}
	cancel()
	_ = s.Close()
	wg.Wait()
	_ = ws.CloseNow()
}

// pipeListener hands in-process connections to the endpoint's server.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

var errEndpointClosed = errors.New("the browser's DevTools endpoint is closed")

func (l *pipeListener) dial() (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		_ = client.Close()
		_ = server.Close()
		return nil, errEndpointClosed
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "devtools" }
