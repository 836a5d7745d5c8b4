package egress

// Routing: what AIO Sandbox calls its proxy namespace, on the allow-list
// proxy of a sandbox in network mode proxy.
//
//   - An upstream is a proxy (HTTP CONNECT with Basic credentials, or
//     SOCKS5 with user/password) through which the sandbox's connections
//     are chained instead of leaving the host directly.
//   - Excludes are destinations that bypass the upstream and go direct.
//   - Mappings rewrite a destination (host, optionally port) to another
//     host and port, or to a port on the sandbox's own loopback.
//
// None of them widens the allow list. A mapping's target and the upstream
// itself are checked against the sandbox's allow list on every connection
// (and when they are set, for a clear refusal), and so is the destination
// of every connection: the original one when it goes through an upstream
// (which the sandbox could otherwise use to reach anything), the mapped
// one when mapped. Only a mapping to the sandbox's own loopback skips the
// allow list: it reaches the sandbox itself, through its init, on the
// ports the server opens into sandboxes (Options.DialSandbox).

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// Upstream schemes.
const (
	SchemeHTTP   = "http"
	SchemeSOCKS5 = "socks5"
)

// Routes of a connection (Event.Route, Diagnosis.Route).
const (
	RouteDirect   = "direct"
	RouteUpstream = "upstream"
	// RouteSandbox is a mapping to the sandbox's own loopback.
	RouteSandbox = "sandbox-loopback"
	// RouteDenied is Diagnose's answer for a destination the allow list refuses.
	RouteDenied = "denied"
)

// Caps on routing entries, with their reasons.
const (
	// MaxMappings and MaxExcludes bound the per-connection scan and the
	// stored state of one sandbox.
	MaxMappings = 256
	MaxExcludes = 256
	// maxServerLen bounds an upstream as written (a URL with credentials).
	maxServerLen = 2048
	// maxCredLen is SOCKS5's limit on a user name and a password (RFC
	// 1929: one length byte); HTTP Basic gets the same.
	maxCredLen = 255
	// maxPatternLen bounds a source, target or exclude pattern.
	maxPatternLen = 1024
)

// ErrNotProxied means the sandbox has no allow-list proxy (its network
// mode is not proxy): routing has nothing to act on. Callers turn it into
// a tool-level failure that names the mode.
var ErrNotProxied = errors.New("the sandbox's egress does not go through sandhold's proxy")

// Upstream is a proxy the sandbox's connections are chained through.
type Upstream struct {
	Scheme string `json:"scheme"`
	// Host is canonical (IDNA ASCII name or address text), Port its port.
	Host     string `json:"host"`
	Port     uint16 `json:"port"`
	Username string `json:"username,omitempty"`
	// Password is never shown: Masked replaces it.
	Password string `json:"password,omitempty"`
}

// Addr is "host:port" (IPv6 in brackets).
func (u Upstream) Addr() string { return hostPort(u.Host, u.Port, 0) }

// PasswordMask replaces a password in every answer.
const PasswordMask = "********"

// Masked returns u with the password replaced by PasswordMask (when set).
func (u Upstream) Masked() Upstream {
	if u.Password != "" {
		u.Password = PasswordMask
	}
	return u
}

// String is the upstream without its password, for messages and audit.
func (u Upstream) String() string {
	s := u.Scheme + "://"
	if u.Username != "" {
		s += url.PathEscape(u.Username)
		if u.Password != "" {
			s += ":" + PasswordMask
		}
		s += "@"
	}
	return s + u.Addr()
}

// ParseUpstream reads an upstream as AIO writes it: host:port or
// user:pass@host:port, optionally after http:// or socks5:// (socks5h://
// is socks5: names are always resolved by the upstream). The user name and
// password may be percent-encoded. The port is required.
func ParseUpstream(server string) (Upstream, error) {
	s := strings.TrimSpace(server)
	if s == "" {
		return Upstream{}, errors.New("the upstream is empty")
	}
	if len(s) > maxServerLen {
		return Upstream{}, fmt.Errorf("the upstream is longer than %d bytes", maxServerLen)
	}
	if hasControl(s) {
		return Upstream{}, errors.New("the upstream holds control characters")
	}
	u := Upstream{Scheme: SchemeHTTP}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		switch strings.ToLower(scheme) {
		case "http":
			u.Scheme = SchemeHTTP
		case "socks5", "socks5h":
			u.Scheme = SchemeSOCKS5
		default:
			return Upstream{}, fmt.Errorf("upstream scheme %q is not supported (use http:// or socks5://)", sanitize(scheme))
		}
		s = rest
	}
	s = strings.TrimSuffix(s, "/")
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		userinfo := s[:i]
		s = s[i+1:]
		user, pass, _ := strings.Cut(userinfo, ":")
		var err error
		if u.Username, err = url.PathUnescape(user); err != nil {
			return Upstream{}, errors.New("the upstream's user name is not valid percent-encoding")
		}
		if u.Password, err = url.PathUnescape(pass); err != nil {
			return Upstream{}, errors.New("the upstream's password is not valid percent-encoding")
		}
		switch {
		case u.Username == "":
			return Upstream{}, errors.New("the upstream's credentials have no user name")
		case len(u.Username) > maxCredLen || len(u.Password) > maxCredLen:
			return Upstream{}, fmt.Errorf("the upstream's user name and password are limited to %d bytes each", maxCredLen)
		case hasControl(u.Username) || hasControl(u.Password):
			return Upstream{}, errors.New("the upstream's credentials hold control characters")
		}
	}
	if strings.ContainsAny(s, "/?#") {
		return Upstream{}, errors.New("the upstream must be host:port (no path)")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Upstream{}, errors.New("the upstream must be host:port (the port is required)")
	}
	p, err := parsePort(port)
	if err != nil {
		return Upstream{}, fmt.Errorf("the upstream's port: %w", err)
	}
	name, addr, err := canonicalHost(host)
	if err != nil {
		return Upstream{}, fmt.Errorf("the upstream's host: %w", err)
	}
	u.Host, u.Port = name, p
	if addr.IsValid() {
		u.Host = addr.String()
	}
	return u, nil
}

// Mapping rewrites a destination. It matches a connection to SourceHost
// (exactly, or any sub-domain for "*.example.com") on SourcePort (any port
// when 0) and sends it to TargetHost:TargetPort instead, or to
// TargetPort on the sandbox's own loopback when TargetHost is empty.
type Mapping struct {
	// Source and Target are as the client wrote them.
	Source string `json:"source"`
	Target string `json:"target"`
	// SourceHost is canonical; a wildcard keeps its "*." prefix.
	SourceHost string `json:"source_host"`
	SourcePort uint16 `json:"source_port,omitempty"`
	TargetHost string `json:"target_host,omitempty"`
	TargetPort uint16 `json:"target_port"`
}

// Loopback says whether the mapping reaches the sandbox's own loopback.
func (m Mapping) Loopback() bool { return m.TargetHost == "" }

// TargetAddr is the mapped destination as host:port ("127.0.0.1:port" for
// the sandbox's loopback).
func (m Mapping) TargetAddr() string {
	if m.Loopback() {
		return hostPort("127.0.0.1", m.TargetPort, 0)
	}
	return hostPort(m.TargetHost, m.TargetPort, 0)
}

// key identifies a mapping's source: adding one with the same key
// replaces it, removing by any spelling of the source finds it.
func (m Mapping) key() string { return fmt.Sprintf("%s|%d", m.SourceHost, m.SourcePort) }

func (m Mapping) matches(host string, port uint16) bool {
	if m.SourcePort != 0 && m.SourcePort != port {
		return false
	}
	if suffix, ok := strings.CutPrefix(m.SourceHost, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	return host == m.SourceHost
}

// ParseMapping reads AIO's source ([protocol://]host[:port][/path], with
// a leading "*." wildcard label) and target ([host:]port[/path]; no host,
// 127.0.0.1, localhost or ::1 mean the sandbox's own loopback, as AIO's
// default host 127.0.0.1 is its own container). A protocol without a port
// means its port (http 80, https 443); neither means any port. Paths are
// refused beyond "/": the proxy routes connections (CONNECT tunnels carry
// TLS it does not look into), not URL paths.
func ParseMapping(source, target string) (Mapping, error) {
	m := Mapping{Source: strings.TrimSpace(source), Target: strings.TrimSpace(target)}
	if err := m.parseSource(); err != nil {
		return Mapping{}, err
	}
	if err := m.parseTarget(); err != nil {
		return Mapping{}, err
	}
	return m, nil
}

func (m *Mapping) parseSource() error {
	s := m.Source
	if s == "" || len(s) > maxPatternLen || hasControl(s) {
		return errors.New("source must be [protocol://]host[:port], at most 1024 printable bytes")
	}
	var defPort uint16
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		switch strings.ToLower(scheme) {
		case "http", "ws":
			defPort = 80
		case "https", "wss":
			defPort = 443
		default:
			return fmt.Errorf("source protocol %q is not supported (http or https)", sanitize(scheme))
		}
		s = rest
	}
	s, err := stripRootPath(s, "source")
	if err != nil {
		return err
	}
	hostPart, portPart, err := splitEntry(s)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	m.SourcePort = defPort
	if portPart != "" {
		if m.SourcePort, err = parsePort(portPart); err != nil {
			return fmt.Errorf("source port: %w", err)
		}
	}
	wild := strings.HasPrefix(hostPart, "*.")
	if wild {
		hostPart = hostPart[2:]
	}
	if strings.Contains(hostPart, "*") {
		return errors.New("source: a wildcard is only allowed as a whole leading label (*.example.com)")
	}
	name, addr, err := canonicalHost(hostPart)
	if err != nil {
		return fmt.Errorf("source host: %w", err)
	}
	switch {
	case addr.IsValid() && wild:
		return errors.New("source: a wildcard needs a domain name, not an address")
	case addr.IsValid():
		m.SourceHost = addr.String()
	case wild && !strings.Contains(name, "."):
		return errors.New("source: a wildcard must be below a domain with at least two labels")
	case wild:
		m.SourceHost = "*." + name
	default:
		m.SourceHost = name
	}
	return nil
}

func (m *Mapping) parseTarget() error {
	s := m.Target
	if s == "" || len(s) > maxPatternLen || hasControl(s) {
		return errors.New("target must be [host:]port, at most 1024 printable bytes")
	}
	if strings.Contains(s, "://") {
		return errors.New("target must be [host:]port without a protocol")
	}
	s, err := stripRootPath(s, "target")
	if err != nil {
		return err
	}
	var hostPart, portPart string
	switch {
	case strings.HasPrefix(s, ":"):
		portPart = s[1:]
	case strings.TrimLeft(s, "0123456789") == "":
		portPart = s
	default:
		if hostPart, portPart, err = net.SplitHostPort(s); err != nil {
			return errors.New("target must be [host:]port (the port is required)")
		}
	}
	if m.TargetPort, err = parsePort(portPart); err != nil {
		return fmt.Errorf("target port: %w", err)
	}
	if hostPart == "" {
		return nil
	}
	name, addr, err := canonicalHost(hostPart)
	if err != nil {
		return fmt.Errorf("target host: %w", err)
	}
	switch {
	case name == "localhost" || (addr.IsValid() && addr.IsLoopback()):
		// The sandbox's own loopback, as in AIO (its 127.0.0.1 is the
		// container's). The host's loopback is reached, by an admin's
		// allow list only, through a localhost:PORT entry and no mapping.
		m.TargetHost = ""
	case addr.IsValid():
		m.TargetHost = addr.String()
	default:
		m.TargetHost = name
	}
	return nil
}

// stripRootPath removes a path of "/" or "/*"; any other path is refused.
func stripRootPath(s, what string) (string, error) {
	i := strings.IndexByte(s, '/')
	if i < 0 {
		return s, nil
	}
	if p := s[i:]; p != "/" && p != "/*" {
		return "", fmt.Errorf("%s path %q: sandhold's egress proxy maps hosts and ports, not URL paths (HTTPS tunnels carry paths it does not see)", what, sanitize(p))
	}
	return s[:i], nil
}

// exclude is one parsed bypass pattern.
type exclude struct {
	pattern string // canonical text, as listed
	name    string // exact name, or the domain of a wildcard
	wild    bool   // the domain and every sub-domain
	prefix  netip.Prefix
}

// parseExclude reads AIO's bypass pattern: a domain (example.com exactly;
// *.example.com or .example.com: the domain and its sub-domains), an
// address or a CIDR range (10.0.0.0/8).
func parseExclude(p string) (exclude, error) {
	s := strings.TrimSpace(p)
	if s == "" || len(s) > maxPatternLen || hasControl(s) {
		return exclude{}, errors.New("pattern must be a domain, *.domain, .domain, an address or a CIDR range")
	}
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil || pfx.Addr().Zone() != "" {
			return exclude{}, fmt.Errorf("pattern %q: not a valid CIDR range", sanitize(s))
		}
		if pfx.Addr().Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		pfx = pfx.Masked()
		return exclude{pattern: pfx.String(), prefix: pfx}, nil
	}
	wild := false
	switch {
	case strings.HasPrefix(s, "*."):
		s, wild = s[2:], true
	case strings.HasPrefix(s, "."):
		s, wild = s[1:], true
	}
	if strings.Contains(s, "*") {
		return exclude{}, errors.New("pattern: a wildcard is only allowed as a whole leading label (*.example.com)")
	}
	name, addr, err := canonicalHost(s)
	if err != nil {
		return exclude{}, fmt.Errorf("pattern %q: %w", sanitize(p), err)
	}
	if addr.IsValid() {
		if wild {
			return exclude{}, errors.New("pattern: a wildcard needs a domain name, not an address")
		}
		return exclude{pattern: addr.String(), prefix: netip.PrefixFrom(addr, addr.BitLen())}, nil
	}
	if wild {
		return exclude{pattern: "*." + name, name: name, wild: true}, nil
	}
	return exclude{pattern: name, name: name}, nil
}

// matches says whether a checked destination bypasses the upstream: by
// name, or — for address patterns — when the destination is an address in
// the range or every address its name resolved to is.
func (e exclude) matches(t target) bool {
	if e.prefix.IsValid() {
		if len(t.addrs) == 0 {
			return false
		}
		for _, a := range t.addrs {
			if !e.prefix.Contains(a) {
				return false
			}
		}
		return true
	}
	if e.wild {
		return t.host == e.name || strings.HasSuffix(t.host, "."+e.name)
	}
	return t.host == e.name
}

// Routing is a sandbox's routing as stored and shown (Password in clear:
// only the proxy and its state file hold it; answers use Masked).
type Routing struct {
	Upstream *Upstream `json:"upstream,omitempty"`
	Excludes []string  `json:"excludes"`
	Mappings []Mapping `json:"mappings"`
}

// Masked returns a copy of r whose upstream password is masked.
func (r Routing) Masked() Routing {
	out := r.clone()
	if out.Upstream != nil {
		u := out.Upstream.Masked()
		out.Upstream = &u
	}
	return out
}

func (r Routing) clone() Routing {
	out := Routing{Excludes: slices.Clone(r.Excludes), Mappings: slices.Clone(r.Mappings)}
	if out.Excludes == nil {
		out.Excludes = []string{}
	}
	if out.Mappings == nil {
		out.Mappings = []Mapping{}
	}
	if r.Upstream != nil {
		u := *r.Upstream
		out.Upstream = &u
	}
	return out
}

func (r Routing) empty() bool {
	return r.Upstream == nil && len(r.Excludes) == 0 && len(r.Mappings) == 0
}

// routes is a compiled Routing; a new one replaces it on every change, so
// a connection works on one consistent snapshot.
type routes struct {
	r        Routing
	excludes []exclude
	// broken, when set, is why the saved routing could not be restored;
	// every connection is refused until the routing is changed.
	broken string
}

func compileRouting(r Routing) (*routes, error) {
	if len(r.Mappings) > MaxMappings || len(r.Excludes) > MaxExcludes {
		return nil, fmt.Errorf("at most %d mappings and %d excludes", MaxMappings, MaxExcludes)
	}
	c := &routes{r: r.clone()}
	for _, p := range r.Excludes {
		e, err := parseExclude(p)
		if err != nil {
			return nil, err
		}
		c.excludes = append(c.excludes, e)
	}
	return c, nil
}

// mapping returns the mapping for host:port: an exact source before a
// wildcard, the longest wildcard first, a source with a port before one
// without.
func (c *routes) mapping(host string, port uint16) *Mapping {
	var best *Mapping
	score := func(m *Mapping) int {
		s := len(m.SourceHost)
		if !strings.HasPrefix(m.SourceHost, "*.") {
			s += 1 << 20
		}
		if m.SourcePort != 0 {
			s++
		}
		return s
	}
	for i := range c.r.Mappings {
		m := &c.r.Mappings[i]
		if m.matches(host, port) && (best == nil || score(m) > score(best)) {
			best = m
		}
	}
	return best
}

func (c *routes) excluded(t target) bool {
	for _, e := range c.excludes {
		if e.matches(t) {
			return true
		}
	}
	return false
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}
