package egress

// Forwarding: a plain-HTTP request relayed to its checked upstream, one
// request per check, with hop-by-hop headers removed.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// serveHTTP relays one absolute-form http:// request.
func (s *session) serveHTTP(req *http.Request, hostHeaders []string) bool {
	defer func() { _ = req.Body.Close() }()
	u := req.URL
	if u == nil || !u.IsAbs() || u.Host == "" {
		s.event("", 0, VerdictDenied, "not a proxy request (origin-form URL)", nil)
		s.refuse(http.StatusBadRequest, "this is an HTTP proxy: send absolute http:// URLs, or CONNECT host:port")
		return false
	}
	if !strings.EqualFold(u.Scheme, "http") {
		s.event(sanitize(u.Hostname()), 0, VerdictDenied, "unsupported scheme "+sanitize(u.Scheme), nil)
		s.refuse(http.StatusBadRequest, fmt.Sprintf("scheme %q is not supported by the proxy; use CONNECT for https", sanitize(u.Scheme)))
		return false
	}
	port := uint16(80)
	if ps := u.Port(); ps != "" {
		p, err := parsePort(ps)
		if err != nil {
			s.event(sanitize(u.Hostname()), 0, VerdictDenied, "bad port", nil)
			s.refuse(http.StatusBadRequest, "malformed request: bad port")
			return false
		}
		port = p
	}
	pl, ref := s.p.plan(s.ctx, s.sandbox, u.Hostname(), port)
	if ref == nil {
		ref = checkHostHeaders(hostHeaders, pl.asked, 80)
	}
	if ref != nil {
		s.eventFor(&pl, u.Hostname(), ref.verdict(), ref.audit, nil)
		s.refuse(ref.status, ref.client)
		return false
	}
	// Through an HTTP upstream the request goes to it in absolute form
	// with the upstream's credentials; otherwise in origin form over a
	// connection to the destination (direct, a SOCKS5 tunnel, or the
	// sandbox's loopback).
	forward := pl.via != nil && pl.via.Scheme == SchemeHTTP

	// The outgoing request: Host from the checked (mapped) destination,
	// no credentials of the client's for any proxy, no hop-by-hop headers.
	out := req
	out.URL.User = nil
	out.URL.Scheme, out.URL.Host = "http", hostPort(pl.t.host, pl.t.port, 80)
	out.Host = out.URL.Host
	out.RequestURI = ""
	removeHopByHop(out.Header)
	if forward {
		if h := proxyAuthorization(pl.via); h != "" {
			out.Header.Set("Proxy-Authorization", h)
		}
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // keep Go from adding its own
	}
	clientClose := req.Close

	key := pl.route + "|" + pl.viaAddr() + "|" + net.JoinHostPort(pl.t.host, strconv.Itoa(int(pl.t.port)))
	var (
		up       *upstream
		resp     *http.Response
		writeErr chan error
	)
	for attempt := 0; ; attempt++ {
		reused := s.up != nil && s.up.key == key && s.up.reusable
		if !reused {
			s.closeUpstream("")
			conn, ref := s.p.open(s.ctx, s.sandbox, &pl, s.act, true)
			if ref != nil {
				s.eventFor(&pl, u.Hostname(), VerdictAllowed, ref.audit, nil)
				s.refuse(ref.status, ref.client)
				return false
			}
			s.up = &upstream{key: key, pl: pl, conn: conn, br: bufio.NewReaderSize(conn, s.p.opts.MaxHeaderBytes)}
		}
		up = s.up
		up.reusable = false
		downBefore := up.conn.down.Load()

		writeErr = make(chan error, 1)
		go func() {
			bw := bufio.NewWriterSize(up.conn, 4096)
			var err error
			if forward {
				err = out.WriteProxy(bw)
			} else {
				err = out.Write(bw)
			}
			if err == nil {
				err = bw.Flush()
			}
			writeErr <- err
		}()

		var err error
		resp, err = readFinalResponse(up.br, out, s.client, s.p.opts.MaxHeaderBytes)
		if err == nil {
			break
		}
		_ = up.conn.Close()
		reason := "upstream response: " + err.Error()
		if werr := <-writeErr; werr != nil {
			reason += "; request: " + werr.Error()
		}
		// A kept-alive upstream may have closed while idle. Retry once on a
		// fresh connection when nothing came back, the request had no body
		// (nothing of the client's was consumed) and its method is safe to
		// repeat (the upstream may have seen it before closing).
		safe := req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodOptions
		retry := reused && attempt == 0 && safe && req.Body == http.NoBody && up.conn.down.Load() == downBefore
		s.closeUpstream(reason)
		if !retry {
			s.refuse(http.StatusBadGateway, fmt.Sprintf("bad response from %s", quoteHost(hostPort(pl.t.host, pl.t.port, 0))))
			return false
		}
	}
	defer func() { _ = resp.Body.Close() }()
	upstreamClose := resp.Close
	removeHopByHop(resp.Header)
	// Keep the client connection unless the response needs a close to
	// delimit its body (Response.Write then sets Close itself).
	resp.Close = clientClose
	cw := bufio.NewWriterSize(s.client, 4096)
	werr := resp.Write(cw)
	if werr == nil {
		werr = cw.Flush()
	}
	reqErr := <-writeErr
	if werr != nil || reqErr != nil {
		s.closeUpstream(firstErr("relay", werr, reqErr))
		return false
	}
	delimitedByClose := resp.ContentLength < 0 && !isChunked(resp.TransferEncoding) && resp.Request.Method != http.MethodHead && bodyAllowed(resp.StatusCode)
	up.reusable = !upstreamClose && !clientClose
	if !up.reusable {
		s.closeUpstream("")
	}
	return !clientClose && !delimitedByClose
}

// readFinalResponse reads the upstream's response, relaying interim 1xx
// responses (100 Continue) to the client.
func readFinalResponse(br *bufio.Reader, req *http.Request, client io.Writer, maxHeaderBytes int) (*http.Response, error) {
	for range 10 { // cap: a server sending endless 1xx responses
		// The same head cap as for requests: an allowed but hostile server
		// must not grow the host's memory with endless headers.
		if _, err := peekHead(br, maxHeaderBytes); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("unexpected protocol switch")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			removeHopByHop(resp.Header)
			if err := resp.Write(client); err != nil {
				return nil, err
			}
			continue
		}
		return resp, nil
	}
	return nil, errors.New("too many interim responses")
}

// hopByHop are the headers that describe one connection, not the message;
// a proxy must not forward them (RFC 9110 §7.6.1). Proxy-Authorization is
// among them: credentials for this proxy never reach an upstream.
func hopByHop() []string {
	return []string{
		"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	}
}

func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop() {
		h.Del(name)
	}
}

func isChunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

func bodyAllowed(status int) bool {
	return (status < 100 || status >= 200) && status != http.StatusNoContent && status != http.StatusNotModified
}
