package netmode

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/egress"
	"github.com/sandhold/sandhold/internal/fault"
)

// nopEgress stands in for the proxy: Check only asks whether one
// is configured.
type nopEgress struct{}

func (nopEgress) SetPolicy(string, egress.Policy) error       { return nil }
func (nopEgress) Remove(string)                               {}
func (nopEgress) ServeConn(context.Context, string, net.Conn) {}

func netHub(withEgress, hostAllowed bool) *Hub {
	h := &Hub{}
	if withEgress {
		h.egress = nopEgress{}
	}
	h.hostAllowed = hostAllowed
	return h
}

// TestCheck: the gate on modes, per mode, caller and server offer.
func TestCheck(t *testing.T) {
	const agent, admin = false, true
	cases := []struct {
		name        string
		egress      bool
		hostAllowed bool
		admin       bool
		mode        string
		allow       []string
		want        fault.Kind // "" = accepted
		wantMode    string
	}{
		{"empty means none", true, false, agent, "", nil, "", None},
		{"none with a list", true, false, agent, "none", []string{"a.example"}, fault.Invalid, ""},
		{"unknown mode", true, false, agent, "bridge", nil, fault.Invalid, ""},
		{"proxy without a proxy", false, false, agent, "proxy", []string{"a.example"}, fault.Unsupported, ""},
		{"proxy, public names", true, false, agent, "proxy", []string{"a.example", "*.pypi.org:443"}, "", Proxy},
		{"proxy, empty list", true, false, agent, "proxy", nil, "", Proxy},
		{"proxy, bad entry", true, false, agent, "proxy", []string{"a b"}, fault.Invalid, ""},
		{"agent lists localhost", true, false, agent, "proxy", []string{"localhost:8080"}, fault.Forbidden, ""},
		{"agent lists loopback", true, false, agent, "proxy", []string{"127.0.0.1"}, fault.Forbidden, ""},
		{"agent lists metadata", true, false, agent, "proxy", []string{"169.254.169.254:80"}, fault.Forbidden, ""},
		{"agent lists a private range", true, false, agent, "proxy", []string{"10.0.0.0/8"}, fault.Forbidden, ""},
		{"admin lists localhost", true, false, admin, "proxy", []string{"localhost:8080"}, "", Proxy},
		{"agent asks for host", true, true, agent, "host", nil, fault.Forbidden, ""},
		{"admin asks for host while restricted", true, false, admin, "host", nil, fault.Forbidden, ""},
		{"admin asks for host when unrestricted", true, true, admin, "host", nil, "", Host},
		{"host with a list", true, true, admin, "host", []string{"a.example"}, fault.Invalid, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mode, _, err := netHub(tc.egress, tc.hostAllowed).Check(tc.admin, tc.mode, tc.allow)
			if fault.KindOf(err) != tc.want {
				t.Fatalf("err = %v, want kind %q", err, tc.want)
			}
			if err == nil && mode != tc.wantMode {
				t.Fatalf("mode = %q, want %q", mode, tc.wantMode)
			}
		})
	}
}

// FuzzCheck: whatever a non-admin lists, an accepted allow list
// holds no privileged entry, and nothing panics.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"a.example", "localhost:1", "127.0.0.1", "[::1]:80", "2130706433", "0177.0.0.1", "*.example.com:8443", "10.0.0.0/8", "xn--nxasmq6b.example", "LOCALHOST.:80"} {
		f.Add(s)
	}
	h := netHub(true, true)
	f.Fuzz(func(t *testing.T, entries string) {
		_, allow, err := h.Check(false, Proxy, strings.Split(entries, ","))
		if err != nil {
			return
		}
		al, err := egress.ParsePolicy(egress.Policy{Allow: allow})
		if err != nil {
			t.Fatalf("accepted list %q does not parse: %v", allow, err)
		}
		if p := al.Privileged(); len(p) > 0 {
			t.Fatalf("a non-admin got privileged entries %q accepted", p)
		}
	})
}
