package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Policy is a sandbox's egress allowlist as configured. Each entry is one of:
//
//	api.example.com         exact host, ports 80 and 443
//	api.example.com:8443    exact host, that port only
//	*.example.com           any sub-domain (not example.com itself), 80 and 443
//	*.example.com:8443      any sub-domain, that port only
//	203.0.113.7 / [2001:db8::7]:443 / 10.0.0.0/8 / 10.0.0.0/8:5432 / [fd00::/8]:443
//	                        explicit addresses; the only way to reach an IP
//	                        literal or a denied range (loopback, private, link-local …)
//	localhost:PORT          the host's loopback at that port (127.0.0.1, ::1),
//	                        without asking DNS (RFC 6761)
//
// Everything not listed is denied.
type Policy struct {
	Allow []string
}

// Caps on hostile or mistaken input.
const (
	// maxPolicyEntries bounds the work of one check (a linear scan).
	maxPolicyEntries = 1024
	// maxHostLen bounds a host before IDNA mapping (DNS names are <= 253
	// octets; mapping may shrink input, so allow some slack).
	maxHostLen = 1024
	// maxIPv4PartLen bounds one part of an obfuscated IPv4 literal
	// ("0x000…07f"); longer parts are refused instead of parsed.
	maxIPv4PartLen = 64
)

// rule is one parsed policy entry.
type rule struct {
	// entry is the entry as configured, for messages.
	entry string
	// name is the canonical ASCII host for name rules ("" for IP rules);
	// for wildcards it is the suffix without "*.".
	name     string
	wildcard bool
	// localhost marks "localhost" and "*.localhost": names that mean the
	// host's loopback and are never sent to DNS.
	localhost bool
	// prefix is set for IP and CIDR rules.
	prefix netip.Prefix
	// port is 0 for "80 and 443".
	port uint16
}

func (r *rule) isIP() bool { return r.prefix.IsValid() }

func (r *rule) portOK(port uint16) bool {
	if r.port != 0 {
		return r.port == port
	}
	// An entry without ":port" allows HTTP and HTTPS only.
	return port == 80 || port == 443
}

func (r *rule) matchName(name string) bool {
	if r.isIP() {
		return false
	}
	if r.wildcard {
		return strings.HasSuffix(name, "."+r.name)
	}
	return name == r.name
}

// Allowlist is a validated Policy, ready to check targets against.
type Allowlist struct {
	rules []rule
}

// ParsePolicy validates every entry of p; the error names each bad entry.
func ParsePolicy(p Policy) (*Allowlist, error) {
	if len(p.Allow) > maxPolicyEntries {
		return nil, fmt.Errorf("egress policy has %d entries, more than the %d allowed", len(p.Allow), maxPolicyEntries)
	}
	a := &Allowlist{rules: make([]rule, 0, len(p.Allow))}
	var bad []string
	for _, e := range p.Allow {
		r, err := parseEntry(e)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		a.rules = append(a.rules, r)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("invalid egress policy: %s", strings.Join(bad, "; "))
	}
	return a, nil
}

// Privileged returns the entries that open something beyond public
// addresses by name: explicit addresses or ranges overlapping a denied range
// (loopback, private, link-local/metadata …) and localhost entries. The API
// should accept these only from an admin, since they can reach the host and
// its network.
func (a *Allowlist) Privileged() []string {
	var out []string
	for i := range a.rules {
		r := &a.rules[i]
		if r.localhost || (r.isIP() && overlapsDenied(r.prefix)) {
			out = append(out, r.entry)
		}
	}
	return out
}

// Entries returns the entries as configured.
func (a *Allowlist) Entries() []string {
	out := make([]string, len(a.rules))
	for i := range a.rules {
		out[i] = a.rules[i].entry
	}
	return out
}

func parseEntry(e string) (rule, error) {
	r := rule{entry: e}
	s := strings.TrimSpace(e)
	if s == "" {
		return r, fmt.Errorf("entry %q: empty", e)
	}
	if len(s) > maxHostLen {
		return r, fmt.Errorf("entry %q: too long", truncate(e))
	}
	hostPart, portPart, err := splitEntry(s)
	if err != nil {
		return r, fmt.Errorf("entry %q: %w", e, err)
	}
	if portPart != "" {
		p, err := parsePort(portPart)
		if err != nil {
			return r, fmt.Errorf("entry %q: %w", e, err)
		}
		r.port = p
	}
	if strings.Contains(hostPart, "/") {
		pfx, err := netip.ParsePrefix(hostPart)
		if err != nil {
			return r, fmt.Errorf("entry %q: bad address range: %w", e, err)
		}
		if pfx.Addr().Zone() != "" {
			return r, fmt.Errorf("entry %q: zoned addresses are not allowed", e)
		}
		if pfx.Addr().Is4In6() {
			if pfx.Bits() < 96 {
				return r, fmt.Errorf("entry %q: an IPv4-mapped range must be /96 or longer", e)
			}
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		r.prefix = pfx.Masked()
		if neverDialable(r.prefix.Addr()) && r.prefix.Bits() >= neverBits(r.prefix.Addr()) {
			return r, fmt.Errorf("entry %q: unspecified, multicast and reserved addresses can never be reached", e)
		}
		return r, nil
	}
	if strings.HasPrefix(hostPart, "*.") {
		name, addr, err := canonicalHost(hostPart[2:])
		if err != nil {
			return r, fmt.Errorf("entry %q: %w", e, err)
		}
		if addr.IsValid() {
			return r, fmt.Errorf("entry %q: a wildcard needs a domain name, not an address", e)
		}
		if !strings.Contains(name, ".") && name != "localhost" {
			return r, fmt.Errorf("entry %q: a wildcard must be below a domain with at least two labels", e)
		}
		r.name, r.wildcard, r.localhost = name, true, name == "localhost"
		return r, nil
	}
	if strings.Contains(hostPart, "*") {
		return r, fmt.Errorf("entry %q: a wildcard is only allowed as a whole leading label (*.example.com)", e)
	}
	name, addr, err := canonicalHost(hostPart)
	if err != nil {
		return r, fmt.Errorf("entry %q: %w", e, err)
	}
	if addr.IsValid() {
		if neverDialable(addr) {
			return r, fmt.Errorf("entry %q: unspecified, multicast and reserved addresses can never be reached", e)
		}
		r.prefix = netip.PrefixFrom(addr, addr.BitLen())
		return r, nil
	}
	r.name = name
	r.localhost = name == "localhost" || strings.HasSuffix(name, ".localhost")
	return r, nil
}

// splitEntry separates "host[:port]" where host may be a bracketed IPv6
// address or range, or an unbracketed IPv6 address or range (no port then).
func splitEntry(s string) (host, port string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", fmt.Errorf("missing ']'")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, "", nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", "", fmt.Errorf("unexpected %q after ']'", rest)
		}
		return host, rest[1:], nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", nil
	case 1:
		i := strings.IndexByte(s, ':')
		return s[:i], s[i+1:], nil
	default: // bare IPv6 address or range
		return s, "", nil
	}
}

func parsePort(s string) (uint16, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("bad port %q", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q out of range 1-65535", s)
	}
	return uint16(n), nil
}

// canonicalHost turns a host as written by a client or an operator into
// either a canonical ASCII domain name (lower case, IDNA/punycode, no
// trailing dot) or an address (IPv4-mapped IPv6 unmapped). Any host that
// ends in a number is an IPv4 literal in one of the forms inet_aton and
// browsers accept (2130706433, 0177.0.0.1, 0x7f.1, 127.1) or is refused,
// so an obfuscated address can never pass as a name.
func canonicalHost(h string) (name string, addr netip.Addr, err error) {
	if h == "" {
		return "", netip.Addr{}, fmt.Errorf("empty host")
	}
	if len(h) > maxHostLen {
		return "", netip.Addr{}, fmt.Errorf("host too long")
	}
	if !utf8.ValidString(h) {
		return "", netip.Addr{}, fmt.Errorf("host is not valid UTF-8")
	}
	if strings.ContainsAny(h, "@/\\?#%") {
		return "", netip.Addr{}, fmt.Errorf("host contains a forbidden character")
	}
	if strings.HasPrefix(h, "[") {
		if !strings.HasSuffix(h, "]") {
			return "", netip.Addr{}, fmt.Errorf("bad IPv6 literal")
		}
		h = h[1 : len(h)-1]
		if !strings.Contains(h, ":") {
			return "", netip.Addr{}, fmt.Errorf("bad IPv6 literal")
		}
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil {
			return "", netip.Addr{}, fmt.Errorf("bad IPv6 literal")
		}
		if a.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("zoned IPv6 literal")
		}
		return "", a.Unmap(), nil
	}
	// Map first (full-width digits and dots, upper case, punycode), then
	// decide whether it is a number: "１２７。０。０。１" is 127.0.0.1.
	ascii, err := idna.Lookup.ToASCII(strings.TrimSuffix(h, "."))
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("invalid host name")
	}
	// The result must itself be a valid, stable lookup name (punycode that
	// decodes to something IDNA would not produce is refused).
	if again, err := idna.Lookup.ToASCII(ascii); err != nil || again != ascii {
		return "", netip.Addr{}, fmt.Errorf("invalid host name")
	}
	// One trailing dot (FQDN form) was removed above; another one, also
	// one produced by mapping, means an empty label.
	if ascii == "" || len(ascii) > 253 || strings.HasSuffix(ascii, ".") {
		return "", netip.Addr{}, fmt.Errorf("invalid host name")
	}
	labels := strings.Split(ascii, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || !isLDH(l) {
			return "", netip.Addr{}, fmt.Errorf("invalid host name")
		}
	}
	if endsInNumber(labels[len(labels)-1]) {
		a, ok := parseIPv4Loose(labels)
		if !ok {
			return "", netip.Addr{}, fmt.Errorf("invalid IPv4 literal")
		}
		return "", a, nil
	}
	return ascii, netip.Addr{}, nil
}

func isLDH(l string) bool {
	for i := 0; i < len(l); i++ {
		c := l[i]
		isLower, isDigit := c >= 'a' && c <= 'z', c >= '0' && c <= '9'
		if !isLower && !isDigit && c != '-' {
			return false
		}
	}
	return true
}

// endsInNumber follows the WHATWG URL rule: a last label of only digits, or
// "0x" followed by only hex digits, makes the host an IPv4 literal.
func endsInNumber(l string) bool {
	if strings.HasPrefix(l, "0x") {
		return strings.TrimLeft(l[2:], "0123456789abcdef") == ""
	}
	return strings.TrimLeft(l, "0123456789") == ""
}

// parseIPv4Loose parses 1 to 4 dot-separated numbers in decimal, octal
// (leading 0) or hex (0x), the last filling the remaining bytes, as
// inet_aton does. labels are already lower case.
func parseIPv4Loose(labels []string) (netip.Addr, bool) {
	if len(labels) > 4 {
		return netip.Addr{}, false
	}
	var parts [4]uint64
	for i, l := range labels {
		if len(l) > maxIPv4PartLen {
			return netip.Addr{}, false
		}
		base, digits := 10, l
		switch {
		case strings.HasPrefix(l, "0x"):
			base, digits = 16, l[2:]
		case len(l) > 1 && l[0] == '0':
			base, digits = 8, l[1:]
		}
		if digits == "" {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(digits, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		parts[i] = v
	}
	n := len(labels)
	var v uint64
	for i := 0; i < n-1; i++ {
		if parts[i] > 255 {
			return netip.Addr{}, false
		}
		v |= parts[i] << (8 * (3 - i))
	}
	last := parts[n-1]
	if last >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	v |= last
	//nolint:gosec // G115: v < 1<<32 (parts checked above); each byte is v's octet
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
