package config

import (
	"slices"
	"testing"
)

func TestParsePorts(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []uint16
		bad      bool
	}{
		{"empty", "", nil, false},
		{"list and range", "8080, 3000-3002,8080", []uint16{3000, 3001, 3002, 8080}, false},
		{"single-port range", "5-5", []uint16{5}, false},
		{"backwards", "10-5", nil, true},
		{"zero", "0", nil, true},
		{"too large", "65536", nil, true},
		{"not a number", "http", nil, true},
		{"reserved egress", "3000-3200", nil, true},
		{"reserved devtools", "9222", nil, true},
		{"reserved vnc", "5900", nil, true},
		{"too many", "10000-12000", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePorts(tc.in)
			if (err != nil) != tc.bad {
				t.Fatalf("err = %v, bad = %v", err, tc.bad)
			}
			if !tc.bad && !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	def, err := ParsePorts(DefaultPreviewPorts)
	if err != nil || !slices.Contains(def, 8000) || !slices.Contains(def, 5173) {
		t.Fatalf("default ports %v, %v", def, err)
	}
}
