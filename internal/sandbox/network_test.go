package sandbox

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/egress"
	"github.com/sandhold/sandhold/internal/fault"
)

// nopEgress stands in for the proxy: checkNetwork only asks whether one
// is configured.
type nopEgress struct{}

func (nopEgress) SetPolicy(string, egress.Policy) error       { return nil }
func (nopEgress) Remove(string)                               {}
func (nopEgress) ServeConn(context.Context, string, net.Conn) {}

func netManager(withEgress, hostAllowed bool) *Manager {
	m := &Manager{}
	if withEgress {
		m.net.egress = nopEgress{}
	}
	m.net.hostAllowed = hostAllowed
	return m
}

func TestCheckNetwork(t *testing.T) {
	agent, admin := Caller{KeyID: "k"}, Caller{KeyID: "a", Admin: true}
	cases := []struct {
		name        string
		egress      bool
		hostAllowed bool
		caller      Caller
		in          Network
		want        fault.Kind // "" = accepted
		wantMode    string
	}{
		{"empty means none", true, false, agent, Network{}, "", NetworkNone},
		{"none with a list", true, false, agent, Network{Mode: "none", Allow: []string{"a.example"}}, fault.Invalid, ""},
		{"unknown mode", true, false, agent, Network{Mode: "bridge"}, fault.Invalid, ""},
		{"proxy without a proxy", false, false, agent, Network{Mode: "proxy", Allow: []string{"a.example"}}, fault.Unsupported, ""},
		{"proxy, public names", true, false, agent, Network{Mode: "proxy", Allow: []string{"a.example", "*.pypi.org:443"}}, "", NetworkProxy},
		{"proxy, empty list", true, false, agent, Network{Mode: "proxy"}, "", NetworkProxy},
		{"proxy, bad entry", true, false, agent, Network{Mode: "proxy", Allow: []string{"a b"}}, fault.Invalid, ""},
		{"agent lists localhost", true, false, agent, Network{Mode: "proxy", Allow: []string{"localhost:8080"}}, fault.Forbidden, ""},
		{"agent lists loopback", true, false, agent, Network{Mode: "proxy", Allow: []string{"127.0.0.1"}}, fault.Forbidden, ""},
		{"agent lists metadata", true, false, agent, Network{Mode: "proxy", Allow: []string{"169.254.169.254:80"}}, fault.Forbidden, ""},
		{"agent lists a private range", true, false, agent, Network{Mode: "proxy", Allow: []string{"10.0.0.0/8"}}, fault.Forbidden, ""},
		{"admin lists localhost", true, false, admin, Network{Mode: "proxy", Allow: []string{"localhost:8080"}}, "", NetworkProxy},
		{"agent asks for host", true, true, agent, Network{Mode: "host"}, fault.Forbidden, ""},
		{"admin asks for host while restricted", true, false, admin, Network{Mode: "host"}, fault.Forbidden, ""},
		{"admin asks for host when unrestricted", true, true, admin, Network{Mode: "host"}, "", NetworkHost},
		{"host with a list", true, true, admin, Network{Mode: "host", Allow: []string{"a.example"}}, fault.Invalid, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.in
			err := netManager(tc.egress, tc.hostAllowed).checkNetwork(tc.caller, &n)
			if fault.KindOf(err) != tc.want {
				t.Fatalf("err = %v, want kind %q", err, tc.want)
			}
			if err == nil && n.Mode != tc.wantMode {
				t.Fatalf("mode = %q, want %q", n.Mode, tc.wantMode)
			}
		})
	}
}

// FuzzCheckNetwork: whatever a non-admin lists, an accepted allow list
// holds no privileged entry, and nothing panics.
func FuzzCheckNetwork(f *testing.F) {
	for _, s := range []string{"a.example", "localhost:1", "127.0.0.1", "[::1]:80", "2130706433", "0177.0.0.1", "*.example.com:8443", "10.0.0.0/8", "xn--nxasmq6b.example", "LOCALHOST.:80"} {
		f.Add(s)
	}
	m := netManager(true, true)
	f.Fuzz(func(t *testing.T, entries string) {
		n := Network{Mode: NetworkProxy, Allow: strings.Split(entries, ",")}
		if err := m.checkNetwork(Caller{KeyID: "k"}, &n); err != nil {
			return
		}
		al, err := egress.ParsePolicy(egress.Policy{Allow: n.Allow})
		if err != nil {
			t.Fatalf("accepted list %q does not parse: %v", n.Allow, err)
		}
		if p := al.Privileged(); len(p) > 0 {
			t.Fatalf("a non-admin got privileged entries %q accepted", p)
		}
	})
}

func TestNetEnv(t *testing.T) {
	s := &Sandbox{rec: Record{Spec: Spec{Network: Network{Mode: NetworkProxy}}}}
	env := s.netEnv(map[string]string{"HTTPS_PROXY": "http://mine:1"})
	if env["HTTP_PROXY"] != "http://127.0.0.1:3128" || env["https_proxy"] != "http://127.0.0.1:3128" ||
		env["HTTPS_PROXY"] != "http://mine:1" || env["NO_PROXY"] != "localhost,127.0.0.1,::1" {
		t.Fatalf("proxy env: %v", env)
	}
	none := &Sandbox{rec: Record{Spec: Spec{Network: Network{Mode: NetworkNone}}}}
	if env := none.netEnv(map[string]string{"A": "b"}); len(env) != 1 {
		t.Fatalf("none sandbox env: %v", env)
	}
}
