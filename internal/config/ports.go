package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DefaultPreviewPorts are the ports development servers commonly use
// (Node/Vite/Next/Angular, Flask/Django/http.server, Streamlit, Jupyter).
const DefaultPreviewPorts = "3000-3010,4173,4200,5000,5173,5500,8000-8010,8080-8090,8501,8888"

// maxPreviewPorts caps the preview ports: each is one landlock rule for
// bind and one for connect, installed at every sandbox start, so a range
// like 1-65535 would cost every start ~130,000 system calls.
const maxPreviewPorts = 1024

// reservedPorts are loopback ports sandhold itself uses inside a sandbox;
// the preview proxy must never reach them. 3128: the egress proxy listener
// of network mode proxy (the init's own). 9222 and 5900: the browser's
// DevTools and VNC servers, reached only through their authenticated,
// audited relays.
var reservedPorts = []uint16{3128, 5900, 9222}

// ParsePorts parses "3000-3010,8080" into a sorted list without duplicates.
// Empty means no preview port.
func ParsePorts(v string) ([]uint16, error) {
	var out []uint16
	for _, item := range splitList(v) {
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := parsePort(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = parsePort(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("port range %q runs backwards", item)
			}
		}
		if int(b)-int(a)+1+len(out) > maxPreviewPorts {
			return nil, fmt.Errorf("more than %d ports", maxPreviewPorts)
		}
		for p := int(a); p <= int(b); p++ {
			out = append(out, uint16(p)) //nolint:gosec // G115: p lies between two uint16 values
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	for _, r := range reservedPorts {
		if slices.Contains(out, r) {
			return nil, fmt.Errorf("port %d is reserved (sandhold uses it inside every sandbox)", r)
		}
	}
	return out, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("want a port 1-65535, got %q", s)
	}
	return uint16(n), nil
}
