package release

import (
	"strings"
	"testing"
)

func TestCheckLicenses(t *testing.T) {
	p := DefaultLicensePolicy()
	p.Reviewed["example.com/reviewed"] = "dual-licensed, used under MIT"
	c := &CycloneDX{
		Modules: []Module{
			{"example.com/mit", "v1.0.0"},
			{"example.com/gpl", "v1.0.0"},
			{"example.com/none", "v1.0.0"},
			{"example.com/dual", "v1.0.0"},
			{"example.com/both", "v1.0.0"},
			{"example.com/reviewed", "v1.0.0"},
			{"example.com/twofiles", "v1.0.0"},
			{"example.com/paren", "v1.0.0"},
		},
		Licenses: map[string][]string{
			"example.com/mit@v1.0.0":      {"MIT"},
			"example.com/gpl@v1.0.0":      {"GPL-3.0-only"},
			"example.com/dual@v1.0.0":     {"GPL-2.0-only OR MIT"},
			"example.com/both@v1.0.0":     {"MIT AND AGPL-3.0-only"},
			"example.com/reviewed@v1.0.0": {"GPL-2.0-only"},
			"example.com/twofiles@v1.0.0": {"Apache-2.0", "LGPL-3.0-only"},
			"example.com/paren@v1.0.0":    {"(MIT OR Apache-2.0)"},
		},
	}
	got := strings.Join(p.CheckLicenses(c), "\n")
	for _, want := range []string{
		"example.com/gpl@v1.0.0: GPL-3.0-only",
		"example.com/none@v1.0.0: no license detected",
		"example.com/both@v1.0.0: MIT AND AGPL-3.0-only",
		"example.com/twofiles@v1.0.0: LGPL-3.0-only",
		"example.com/paren@v1.0.0: (MIT OR Apache-2.0)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, ok := range []string{"example.com/mit", "example.com/dual", "example.com/reviewed", "twofiles@v1.0.0: Apache"} {
		if strings.Contains(got, ok) {
			t.Errorf("%s flagged:\n%s", ok, got)
		}
	}
}
