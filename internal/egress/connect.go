package egress

// CONNECT: a checked tunnel relayed byte for byte (TLS is not looked into).

import (
	"io"
	"net"
	"net/http"
	"strings"
)

func (s *session) serveConnect(req *http.Request, hostHeaders []string) {
	authority := req.RequestURI
	if req.URL == nil || req.URL.Host == "" || strings.HasPrefix(authority, "/") || req.URL.User != nil || strings.Contains(authority, "@") {
		s.event(sanitize(authority), 0, VerdictDenied, "malformed CONNECT target", nil)
		s.refuse(http.StatusBadRequest, "malformed CONNECT target: expected host:port")
		return
	}
	rawHost, rawPort, err := net.SplitHostPort(req.URL.Host)
	if err != nil {
		s.event(sanitize(authority), 0, VerdictDenied, "malformed CONNECT target", nil)
		s.refuse(http.StatusBadRequest, "malformed CONNECT target: expected host:port")
		return
	}
	port, err := parsePort(rawPort)
	if err != nil {
		s.event(sanitize(rawHost), 0, VerdictDenied, "malformed CONNECT port", nil)
		s.refuse(http.StatusBadRequest, "malformed CONNECT target: bad port")
		return
	}
	pl, ref := s.p.plan(s.ctx, s.sandbox, rawHost, port)
	if ref == nil {
		ref = checkHostHeaders(hostHeaders, pl.asked, 0)
	}
	if ref != nil {
		s.eventFor(&pl, rawHost, ref.verdict(), ref.audit, nil)
		s.refuse(ref.status, ref.client)
		return
	}
	conn, ref := s.p.open(s.ctx, s.sandbox, &pl, s.act, false)
	if ref != nil {
		s.eventFor(&pl, rawHost, VerdictAllowed, ref.audit, nil)
		s.refuse(ref.status, ref.client)
		return
	}
	defer func() { _ = conn.Close() }()
	if _, err := io.WriteString(s.client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		s.eventFor(&pl, rawHost, VerdictAllowed, "client went away", conn)
		return
	}
	reason := tunnel(s.client, s.br, conn)
	s.eventFor(&pl, rawHost, VerdictAllowed, reason, conn)
}

// tunnel copies both ways until both directions end, with fixed buffers;
// clientR is the client's buffered reader (it may hold bytes sent right
// after the CONNECT head).
func tunnel(client *idleConn, clientR io.Reader, up *countConn) string {
	errc := make(chan error, 2)
	go func() {
		err := copyFixed(up, clientR)
		closeWrite(up)
		errc <- err
	}()
	go func() {
		err := copyFixed(client, up)
		closeWrite(client)
		errc <- err
	}()
	var first error
	for range 2 {
		if err := <-errc; err != nil && first == nil {
			first = err
			// One side failed (not a clean EOF): end the other direction.
			_ = client.Close()
			_ = up.Close()
		}
	}
	if first != nil {
		return "tunnel ended: " + first.Error()
	}
	return ""
}

func copyFixed(dst io.Writer, src io.Reader) error {
	buf := make([]byte, copyBufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func closeWrite(c net.Conn) {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := c.(closeWriter); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
