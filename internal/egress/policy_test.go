package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// fakeResolver maps names to addresses and records what it was asked.
// It never touches the network.
type fakeResolver struct {
	mu    sync.Mutex
	names map[string][]string
	asked []string
}

func newFakeResolver(names map[string][]string) *fakeResolver {
	return &fakeResolver{names: names}
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	addrs, ok := r.names[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

func (r *fakeResolver) wasAsked(host string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.asked {
		if h == host {
			return true
		}
	}
	return false
}

func (r *fakeResolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[host] = addrs
}

func TestParsePolicy(t *testing.T) {
	cases := []struct {
		name    string
		entry   string
		wantErr string // substring; "" means valid
		priv    bool   // reported by Privileged
	}{
		{"exact", "api.example.com", "", false},
		{"exact with port", "api.example.com:8443", "", false},
		{"upper case and trailing dot", "API.Example.COM.", "", false},
		{"wildcard", "*.example.com", "", false},
		{"wildcard with port", "*.example.com:8443", "", false},
		{"unicode name", "bücher.example", "", false},
		{"punycode name", "xn--bcher-kva.example", "", false},
		{"ipv4", "203.0.113.7", "", true},
		{"public ipv4", "93.184.216.34:443", "", false},
		{"ipv6 bracketed with port", "[2606:2800:220:1::1]:443", "", false},
		{"ipv6 bare", "2606:2800:220:1::1", "", false},
		{"cidr", "10.0.0.0/8", "", true},
		{"cidr with port", "10.0.0.0/8:5432", "", true},
		{"ipv6 cidr bracketed with port", "[fd00::/8]:443", "", true},
		{"mapped cidr", "::ffff:10.0.0.0/104", "", true},
		{"localhost", "localhost:8080", "", true},
		{"sub.localhost", "app.localhost", "", true},
		{"metadata ip listed explicitly", "169.254.169.254", "", true},
		{"obfuscated ip normalised", "2130706433:80", "", true},
		{"empty", "", "empty", false},
		{"bare star", "*", "wildcard", false},
		{"star in the middle", "api.*.example.com", "wildcard", false},
		{"star suffix", "example.*", "wildcard", false},
		{"partial star", "*api.example.com", "wildcard", false},
		{"wildcard on tld", "*.com", "two labels", false},
		{"wildcard on ip", "*.10.0.0.1", "", false}, // "10.0.0.1" is an address
		{"port zero", "example.com:0", "out of range", false},
		{"port too big", "example.com:65536", "out of range", false},
		{"port not numeric", "example.com:http", "bad port", false},
		{"port signed", "example.com:+80", "bad port", false},
		{"userinfo", "user@example.com", "forbidden character", false},
		{"path", "example.com/x", "bad address range", false},
		{"underscore", "my_host.example.com", "invalid host name", false},
		{"empty label", "a..example.com", "invalid host name", false},
		{"two trailing dots", "example.com..", "invalid host name", false},
		{"label too long", strings.Repeat("a", 64) + ".example.com", "invalid host name", false},
		{"bad ipv4 number", "256.1.1.1", "invalid IPv4", false},
		{"too many parts", "1.2.3.4.5", "invalid IPv4", false},
		{"zoned ipv6", "fe80::1%eth0", "forbidden character", false},
		{"unspecified", "0.0.0.0", "never", false},
		{"multicast range", "224.0.0.0/4", "never", false},
		{"broadcast", "255.255.255.255", "never", false},
		{"unbalanced bracket", "[::1", "missing", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParsePolicy(Policy{Allow: []string{tc.entry}})
			if tc.name == "wildcard on ip" {
				if err == nil {
					t.Fatal("wildcard over an address accepted")
				}
				return
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ParsePolicy(%q): %v", tc.entry, err)
				}
				if got := len(a.Privileged()) > 0; got != tc.priv {
					t.Fatalf("Privileged() = %v, want privileged=%v", a.Privileged(), tc.priv)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParsePolicy(%q) accepted, want error containing %q", tc.entry, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
			if tc.entry != "" && !strings.Contains(err.Error(), tc.entry) && len(tc.entry) < 60 {
				t.Fatalf("error %q does not name the entry %q", err, tc.entry)
			}
		})
	}
}

func TestParsePolicyNamesEveryBadEntry(t *testing.T) {
	_, err := ParsePolicy(Policy{Allow: []string{"good.example", "bad_one.example", "*", "ok.example:443", "x.example:99999"}})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, e := range []string{"bad_one.example", `"*"`, "x.example:99999"} {
		if !strings.Contains(err.Error(), e) {
			t.Errorf("error %q does not name %s", err, e)
		}
	}
	if strings.Contains(err.Error(), "good.example") {
		t.Errorf("error names a good entry: %q", err)
	}
	many := make([]string, maxPolicyEntries+1)
	for i := range many {
		many[i] = "a.example"
	}
	if _, err := ParsePolicy(Policy{Allow: many}); err == nil {
		t.Fatal("policy above the entry cap accepted")
	}
}

func TestCanonicalHost(t *testing.T) {
	cases := []struct {
		in       string
		wantName string
		wantAddr string
		wantErr  bool
	}{
		{in: "Example.COM", wantName: "example.com"},
		{in: "example.com.", wantName: "example.com"},
		{in: "example.com..", wantErr: true},
		{in: "bücher.example", wantName: "xn--bcher-kva.example"},
		{in: "XN--BCHER-KVA.example", wantName: "xn--bcher-kva.example"},
		{in: "ｅｘａｍｐｌｅ.com", wantName: "example.com"}, // full-width letters map
		{in: "127.0.0.1", wantAddr: "127.0.0.1"},
		{in: "2130706433", wantAddr: "127.0.0.1"},
		{in: "0177.0.0.1", wantAddr: "127.0.0.1"},
		{in: "0x7f000001", wantAddr: "127.0.0.1"},
		{in: "0X7F.0.0.1", wantAddr: "127.0.0.1"},
		{in: "0x7f.1", wantAddr: "127.0.0.1"},
		{in: "127.1", wantAddr: "127.0.0.1"},
		{in: "127.0.1", wantAddr: "127.0.0.1"},
		{in: "017700000001", wantAddr: "127.0.0.1"},
		{in: "169.254.43518", wantAddr: "169.254.169.254"},
		{in: "127.0.0.1.", wantAddr: "127.0.0.1"},
		{in: "１２７.０.０.１", wantAddr: "127.0.0.1"}, // full-width digits
		{in: "127。0。0。1", wantAddr: "127.0.0.1"}, // ideographic full stops
		{in: "[::1]", wantAddr: "::1"},
		{in: "::ffff:127.0.0.1", wantAddr: "127.0.0.1"},
		{in: "[::ffff:7f00:1]", wantAddr: "127.0.0.1"},
		{in: "[fe80::1%25eth0]", wantErr: true},
		{in: "08.0.0.1", wantErr: true}, // 08 is not octal
		{in: "0x", wantErr: true},
		{in: "4294967296", wantErr: true},
		{in: "1.2.3.4.5", wantErr: true},
		{in: "1.2.3.256", wantErr: true},
		{in: "a.b.c.1", wantErr: true}, // ends in a number but is not an address
		{in: "user@example.com", wantErr: true},
		{in: "exa mple.com", wantErr: true},
		{in: "example.com\x00", wantErr: true},
		{in: "", wantErr: true},
		{in: ".", wantErr: true},
		{in: "1.example", wantName: "1.example"},
		{in: "example.0x7g", wantName: "example.0x7g"}, // not hex: a name
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			name, addr, err := canonicalHost(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("canonicalHost(%q) = %q %v, want error", tc.in, name, addr)
				}
				return
			}
			if err != nil {
				t.Fatalf("canonicalHost(%q): %v", tc.in, err)
			}
			if tc.wantAddr != "" {
				if !addr.IsValid() || addr.String() != tc.wantAddr {
					t.Fatalf("canonicalHost(%q) = name %q addr %v, want addr %s", tc.in, name, addr, tc.wantAddr)
				}
				return
			}
			if addr.IsValid() || name != tc.wantName {
				t.Fatalf("canonicalHost(%q) = name %q addr %v, want name %s", tc.in, name, addr, tc.wantName)
			}
		})
	}
}

// testPolicy is the allowlist the check table runs against.
var testPolicyEntries = []string{
	"allowed.example",
	"*.wild.example",
	"bücher.example",
	"api.port.example:8443",
	"rebind-listed.example",
	"10.0.0.0/8:5432",
	"internal.example:5432",
	"localhost:8080",
	"93.184.216.34:443",
}

func testResolver() *fakeResolver {
	return newFakeResolver(map[string][]string{
		"allowed.example":        {"93.184.216.34"},
		"api.wild.example":       {"93.184.216.35"},
		"a.b.wild.example":       {"93.184.216.36"},
		"xn--bcher-kva.example":  {"93.184.216.37"},
		"api.port.example":       {"93.184.216.38"},
		"rebind-listed.example":  {"127.0.0.1"},
		"internal.example":       {"10.1.2.3"},
		"evilallowed.example":    {"93.184.216.39"},
		"localhost":              {"93.184.216.40"}, // must never be asked
		"allowed.example.evil.t": {"93.184.216.41"},
	})
}

func TestCheck(t *testing.T) {
	a, err := ParsePolicy(Policy{Allow: testPolicyEntries})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		host   string
		port   uint16
		status int // 0 = allowed
		dial   []string
		msg    string // substring of the client message
	}{
		{name: "exact name", host: "allowed.example", port: 443, dial: []string{"93.184.216.34"}},
		{name: "exact name port 80", host: "allowed.example", port: 80, dial: []string{"93.184.216.34"}},
		{name: "case and trailing dot", host: "ALLOWED.Example.", port: 80, dial: []string{"93.184.216.34"}},
		{name: "other port", host: "allowed.example", port: 8080, status: 403, msg: `entry "allowed.example" permits ports 80 and 443 only`},
		{name: "suffix trick", host: "allowed.example.evil.t", port: 443, status: 403, msg: "not in this sandbox's egress allowlist"},
		{name: "prefix trick", host: "evilallowed.example", port: 443, status: 403},
		{name: "wildcard sub-domain", host: "api.wild.example", port: 443, dial: []string{"93.184.216.35"}},
		{name: "wildcard deeper", host: "a.b.wild.example", port: 443, dial: []string{"93.184.216.36"}},
		{name: "wildcard apex not included", host: "wild.example", port: 443, status: 403},
		{name: "wildcard look-alike", host: "evilwild.example", port: 443, status: 403},
		{name: "unicode host matches punycode entry", host: "BÜCHER.example", port: 443, dial: []string{"93.184.216.37"}},
		{name: "punycode host", host: "xn--bcher-kva.example", port: 443, dial: []string{"93.184.216.37"}},
		{name: "explicit port", host: "api.port.example", port: 8443, dial: []string{"93.184.216.38"}},
		{name: "explicit port excludes 443", host: "api.port.example", port: 443, status: 403, msg: "port 8443 only"},
		{name: "rebinding to loopback", host: "rebind-listed.example", port: 443, status: 403, msg: "a loopback address"},
		{name: "internal name with its range listed", host: "internal.example", port: 5432, dial: []string{"10.1.2.3"}},
		{name: "localhost entry needs no DNS", host: "localhost", port: 8080, dial: []string{"127.0.0.1", "::1"}},
		{name: "localhost other port", host: "localhost", port: 8081, status: 403},
		{name: "ip literal listed", host: "93.184.216.34", port: 443, dial: []string{"93.184.216.34"}},
		{name: "ip literal listed other port", host: "93.184.216.34", port: 80, status: 403, msg: "listed explicitly"},
		{name: "ip literal of an allowed name", host: "93.184.216.35", port: 443, status: 403, msg: "IP addresses are reachable only when listed"},
		{name: "loopback literal", host: "127.0.0.1", port: 8080, status: 403},
		{name: "decimal loopback", host: "2130706433", port: 8080, status: 403},
		{name: "octal loopback", host: "0177.0.0.1", port: 8080, status: 403},
		{name: "hex loopback", host: "0x7f000001", port: 8080, status: 403},
		{name: "short loopback", host: "127.1", port: 8080, status: 403},
		{name: "mapped loopback", host: "::ffff:127.0.0.1", port: 8080, status: 403},
		{name: "ipv6 loopback", host: "::1", port: 8080, status: 403},
		{name: "metadata", host: "169.254.169.254", port: 80, status: 403},
		{name: "metadata decimal", host: "2852039166", port: 80, status: 403},
		{name: "aws ipv6 metadata", host: "fd00:ec2::254", port: 80, status: 403},
		{name: "link-local v6", host: "fe80::1", port: 80, status: 403},
		{name: "private range listed for another port", host: "10.0.0.1", port: 80, status: 403},
		{name: "private range listed", host: "10.9.9.9", port: 5432, dial: []string{"10.9.9.9"}},
		{name: "cgnat", host: "100.64.0.1", port: 443, status: 403},
		{name: "unspecified", host: "0.0.0.0", port: 8080, status: 403, msg: "never reachable"},
		{name: "zero decimal", host: "0", port: 8080, status: 403},
		{name: "broadcast", host: "255.255.255.255", port: 80, status: 403},
		{name: "multicast", host: "224.0.0.1", port: 80, status: 403},
		{name: "unknown name", host: "nope.example", port: 443, status: 403},
		{name: "listed name that does not resolve", host: "x.wild.example", port: 443, status: 502},
		{name: "userinfo", host: "allowed.example@evil.t", port: 443, status: 400},
		{name: "garbage", host: "a b", port: 443, status: 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := testResolver()
			p := New(Options{Resolver: res})
			tg, ref := p.check(context.Background(), a, tc.host, tc.port)
			if res.wasAsked("localhost") {
				t.Fatal("localhost was sent to the resolver")
			}
			if tc.status == 0 {
				if ref != nil {
					t.Fatalf("refused (%d %s / %s), want allowed", ref.status, ref.client, ref.audit)
				}
				var got []string
				for _, a := range tg.addrs {
					got = append(got, a.String())
				}
				if strings.Join(got, ",") != strings.Join(tc.dial, ",") {
					t.Fatalf("addresses to dial %v, want %v", got, tc.dial)
				}
				return
			}
			if ref == nil {
				t.Fatalf("allowed (dial %v), want %d", tg.addrs, tc.status)
			}
			if ref.status != tc.status {
				t.Fatalf("status %d (%s), want %d", ref.status, ref.client, tc.status)
			}
			if !strings.Contains(ref.client, tc.msg) {
				t.Fatalf("message %q does not contain %q", ref.client, tc.msg)
			}
			if ref.status == http.StatusForbidden && !strings.Contains(ref.client, "denied") {
				t.Fatalf("403 message does not say denied: %q", ref.client)
			}
		})
	}
}

func TestCheckEveryResolvedAddress(t *testing.T) {
	a, err := ParsePolicy(Policy{Allow: []string{"mixed.example", "listed.example", "10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		addrs []string
		ok    bool
	}{
		{"public only", []string{"93.184.216.34", "2606:2800:220:1::1"}, true},
		{"public then loopback", []string{"93.184.216.34", "127.0.0.1"}, false},
		{"loopback then public", []string{"127.0.0.1", "93.184.216.34"}, false},
		{"public then metadata", []string{"93.184.216.34", "169.254.169.254"}, false},
		{"mapped private", []string{"::ffff:192.168.1.1"}, false},
		{"nat64 of loopback", []string{"64:ff9b::7f00:1"}, false},
		{"6to4 of private", []string{"2002:c0a8:0101::1"}, false},
		{"ula", []string{"fd12:3456::1"}, false},
		{"listed private", []string{"10.1.1.1"}, true},
		{"unspecified", []string{"0.0.0.0"}, false},
		{"unspecified v6", []string{"::"}, false},
		{"ipv4-translated loopback", []string{"::ffff:0:7f00:1"}, false},
		{"ipv4-compatible loopback", []string{"::7f00:1"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Options{Resolver: newFakeResolver(map[string][]string{"mixed.example": tc.addrs})})
			_, ref := p.check(context.Background(), a, "mixed.example", 443)
			if (ref == nil) != tc.ok {
				t.Fatalf("allowed=%v (%+v), want %v", ref == nil, ref, tc.ok)
			}
		})
	}
}

func TestNoPolicyDeniesEverything(t *testing.T) {
	p := New(Options{Resolver: testResolver()})
	_, ref := p.check(context.Background(), nil, "allowed.example", 443)
	if ref == nil || ref.status != http.StatusForbidden {
		t.Fatalf("no policy: %+v", ref)
	}
}

func TestDeniedRangesTable(t *testing.T) {
	for _, d := range deniedRanges() {
		pfx, err := netip.ParsePrefix(d.prefix)
		if err != nil || pfx != pfx.Masked() {
			t.Errorf("table entry %q: %v (masked %v)", d.prefix, err, pfx.Masked())
		}
		if d.what == "" {
			t.Errorf("table entry %q has no reason", d.prefix)
		}
		if deniedReason(pfx.Addr()) == "" {
			t.Errorf("first address of %s not denied", d.prefix)
		}
	}
	for _, s := range []string{"93.184.216.34", "1.1.1.1", "2606:2800:220:1::1", "2a00:1450::1"} {
		if why := deniedReason(netip.MustParseAddr(s)); why != "" {
			t.Errorf("public %s denied as %s", s, why)
		}
	}
}

func FuzzCanonicalHost(f *testing.F) {
	for _, s := range []string{
		"example.com", "EXAMPLE.com.", "2130706433", "0177.0.0.1", "0x7f.1", "[::ffff:127.0.0.1]",
		"bücher.example", "xn--bcher-kva.example", "allowed.example.evil.t", "１２７.０.０.１",
		"a..b", "user@host", "*.wild.example", "1.2.3.4.5", "0x", "::1",
	} {
		f.Add(s)
	}
	a, err := ParsePolicy(Policy{Allow: []string{"allowed.example", "*.wild.example"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string) {
		name, addr, err := canonicalHost(host)
		if err == nil {
			if addr.IsValid() == (name != "") {
				t.Fatalf("canonicalHost(%q) = %q, %v: want exactly one of name and address", host, name, addr)
			}
			if name != "" {
				if len(name) > 253 || endsInNumber(name[strings.LastIndexByte(name, '.')+1:]) {
					t.Fatalf("canonicalHost(%q) = %q: not a valid name", host, name)
				}
				for i := 0; i < len(name); i++ {
					c := name[i]
					if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789-.", rune(c)) {
						t.Fatalf("canonicalHost(%q) = %q: non-LDH byte", host, name)
					}
				}
				n2, a2, err := canonicalHost(name)
				if err != nil || n2 != name || a2.IsValid() {
					t.Fatalf("not idempotent: %q -> %q -> %q %v %v", host, name, n2, a2, err)
				}
			}
		}
		// Whatever the host, an allowed target is a listed name, resolving to
		// the fake public address.
		p := New(Options{Resolver: constResolver("93.184.216.34")})
		tg, ref := p.check(context.Background(), a, host, 443)
		if ref == nil {
			if tg.host != "allowed.example" && !strings.HasSuffix(tg.host, ".wild.example") {
				t.Fatalf("check(%q) allowed %q", host, tg.host)
			}
			if len(tg.addrs) != 1 || tg.addrs[0].String() != "93.184.216.34" {
				t.Fatalf("check(%q) dials %v", host, tg.addrs)
			}
		}
	})
}

type constResolver string

func (c constResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	ip := net.ParseIP(string(c))
	if ip == nil {
		return nil, errors.New("bad const")
	}
	return []net.IPAddr{{IP: ip}}, nil
}
