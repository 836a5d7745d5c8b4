package egress

import "net/netip"

// deniedRange is an address range a sandbox may reach only through an
// explicit address entry in its allowlist.
type deniedRange struct {
	prefix string
	// what is the reason, written into the refusal ("a loopback address").
	what string
}

// deniedRanges is the table of ranges that are never reached by name alone:
// everything that is not ordinary public unicast, from the IANA
// special-purpose registries. Addresses are unmapped (::ffff:a.b.c.d →
// a.b.c.d) before the lookup.
func deniedRanges() []deniedRange {
	return []deniedRange{
		// IPv4
		{"0.0.0.0/8", "an unspecified (\"this network\") address"}, // 0.0.0.0 dials the host itself on Linux
		{"10.0.0.0/8", "a private address"},
		{"100.64.0.0/10", "a carrier-grade NAT address"},
		{"127.0.0.0/8", "a loopback address"},
		{"169.254.0.0/16", "a link-local address"}, // includes 169.254.169.254, the cloud metadata service
		{"172.16.0.0/12", "a private address"},
		{"192.0.0.0/24", "an IETF protocol address"}, // includes 192.0.0.192, Oracle cloud metadata
		{"192.0.2.0/24", "a documentation address"},
		{"192.88.99.0/24", "a 6to4 relay address"},
		{"192.168.0.0/16", "a private address"},
		{"198.18.0.0/15", "a benchmarking address"},
		{"198.51.100.0/24", "a documentation address"},
		{"203.0.113.0/24", "a documentation address"},
		{"224.0.0.0/4", "a multicast address"},
		{"240.0.0.0/4", "a reserved address"}, // includes 255.255.255.255, broadcast
		// IPv6
		{"::/128", "an unspecified address"},
		{"::1/128", "a loopback address"},
		{"::/8", "a reserved IPv6 address"},              // IPv4-compatible (::a.b.c.d) and IPv4-translated (::ffff:0:a.b.c.d) forms
		{"3fff::/20", "a documentation address"},         //
		{"64:ff9b::/96", "a NAT64 address"},              // reaches IPv4 space through a translator
		{"64:ff9b:1::/48", "a NAT64 address"},            // local-use NAT64
		{"100::/64", "a discard address"},                //
		{"2001::/32", "a Teredo address"},                // embeds an IPv4 address
		{"2001:db8::/32", "a documentation address"},     //
		{"2002::/16", "a 6to4 address"},                  // embeds an IPv4 address
		{"fc00::/7", "a unique-local (private) address"}, // includes fd00::/8 (fd00:ec2::254 is AWS metadata)
		{"fe80::/10", "a link-local address"},
		{"fec0::/10", "a site-local address"}, // deprecated, still private in practice
		{"ff00::/8", "a multicast address"},
	}
}

// neverRanges can never be dialed even when an entry covers them: there is
// no remote endpoint behind them (0.0.0.0 and :: even mean "this host").
func neverRanges() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("224.0.0.0/4"),
		netip.MustParsePrefix("240.0.0.0/4"),
		netip.MustParsePrefix("::/128"),
		netip.MustParsePrefix("ff00::/8"),
	}
}

// deniedReason returns why a is in a denied range, or "" for an ordinary
// public unicast address. a must be unmapped.
func deniedReason(a netip.Addr) string {
	for _, d := range deniedRanges() {
		if netip.MustParsePrefix(d.prefix).Contains(a) {
			return d.what
		}
	}
	if !a.IsGlobalUnicast() {
		// Belt and braces: anything the standard library does not consider
		// global unicast is denied even if the table above missed it.
		return "a non-global address"
	}
	return ""
}

func neverDialable(a netip.Addr) bool {
	for _, p := range neverRanges() {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// neverBits is the smallest prefix length at which a range starting at a is
// entirely never-dialable (used to refuse entries such as 224.0.0.0/4).
func neverBits(a netip.Addr) int {
	best := a.BitLen() + 1
	for _, p := range neverRanges() {
		if p.Contains(a) && p.Bits() < best {
			best = p.Bits()
		}
	}
	return best
}

// overlapsDenied reports whether p shares any address with a denied range.
func overlapsDenied(p netip.Prefix) bool {
	for _, d := range deniedRanges() {
		if netip.MustParsePrefix(d.prefix).Overlaps(p) {
			return true
		}
	}
	return false
}
