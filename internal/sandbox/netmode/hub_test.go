package netmode

import (
	"context"
	"errors"
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

// recEgress records the policies the hub puts in force; a policy with
// "bad" in its list is refused.
type recEgress struct {
	nopEgress
	set     map[string][]string
	removed []string
}

func (e *recEgress) SetPolicy(id string, p egress.Policy) error {
	for _, a := range p.Allow {
		if a == "bad" {
			return errors.New("bad entry")
		}
	}
	e.set[id] = p.Allow
	return nil
}

func (e *recEgress) Remove(id string) { e.removed = append(e.removed, id) }

// TestPolicyFollowsTheMode: a recorded or changed proxy-mode sandbox's
// list is put in force, other modes' are not; a refused list is the
// caller's invalid field on a change and names the sandbox on a restore;
// leaving proxy mode drops the policy, staying in it does not; without a
// proxy all of it is nothing.
func TestPolicyFollowsTheMode(t *testing.T) {
	e := &recEgress{set: map[string][]string{}}
	h := &Hub{egress: e}
	if err := h.Restore("s1", Proxy, []string{"pypi.org"}); err != nil || len(e.set["s1"]) != 1 {
		t.Fatalf("restore: %v, %v", err, e.set)
	}
	if err := h.Restore("s2", None, nil); err != nil || e.set["s2"] != nil {
		t.Fatalf("restore of mode none set a policy: %v, %v", err, e.set)
	}
	if err := h.Restore("s3", Proxy, []string{"bad"}); err == nil || !strings.Contains(err.Error(), "sandbox s3") {
		t.Fatalf("a refused restore: %v, want the sandbox named", err)
	}
	if err := h.Change("s1", Proxy, []string{"bad"}); fault.KindOf(err) != fault.Invalid {
		t.Fatalf("a refused change: %v, want invalid network.allow", err)
	}
	if err := h.Change("s1", Proxy, []string{"a.org", "b.org"}); err != nil || len(e.set["s1"]) != 2 {
		t.Fatalf("change: %v, %v", err, e.set)
	}
	h.Leave("s1", Proxy, Proxy)
	h.Leave("s2", None, Host)
	h.Leave("s1", Proxy, None)
	if len(e.removed) != 1 || e.removed[0] != "s1" {
		t.Fatalf("removed %v, want s1 once", e.removed)
	}
	var off Hub
	if off.Restore("s1", Proxy, []string{"bad"}) != nil || off.Change("s1", Proxy, []string{"bad"}) != nil {
		t.Fatal("without a proxy a policy was checked")
	}
	off.Leave("s1", Proxy, None)
}

// TestPostureSaysWhatIsOffered: none always, first; proxy with where it
// listens only with a proxy; host only where allowed; the host-mode
// sandboxes as given, an empty list rather than none.
func TestPostureSaysWhatIsOffered(t *testing.T) {
	p := netHub(false, false).Posture(nil)
	if p.DefaultMode != None || len(p.Modes) != 1 || p.Modes[0] != None || p.ProxyListen != "" || p.HostAllowed || p.HostSandboxes == nil {
		t.Fatalf("nothing offered: %+v", p)
	}
	p = netHub(true, true).Posture([]string{"s1"})
	if len(p.Modes) != 3 || p.Modes[1] != Proxy || p.Modes[2] != Host || p.ProxyListen != ProxyListen() || !p.HostAllowed || len(p.HostSandboxes) != 1 {
		t.Fatalf("all offered: %+v", p)
	}
}
