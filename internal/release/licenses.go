package release

import (
	"fmt"
	"sort"
	"strings"
)

// LicensePolicy is the allow list the module graph's licenses are checked
// against.
type LicensePolicy struct {
	// Allowed SPDX license ids.
	Allowed map[string]bool
	// Reviewed modules (path, any version) whose license the detector
	// cannot name or names outside Allowed, each with the reviewed
	// license and why it is acceptable.
	Reviewed map[string]string
}

// DefaultLicensePolicy: permissive licenses, and MPL-2.0 (file-level
// copyleft: changes to those files are published, the rest of sandhold
// is not affected). No GPL/LGPL/AGPL: sandhold ships as one static
// binary, so a strong copyleft dependency would bind the whole program.
func DefaultLicensePolicy() LicensePolicy {
	return LicensePolicy{
		Allowed: map[string]bool{
			"Apache-2.0": true, "MIT": true, "BSD-2-Clause": true, "BSD-3-Clause": true,
			"ISC": true, "MPL-2.0": true, "Unlicense": true, "0BSD": true, "CC0-1.0": true,
			// The detector's name for the Go project's BSD-style LICENSE
			// (golang.org/x/...): permissive, attribution only.
			"BSD-Source-Code": true,
		},
		Reviewed: map[string]string{
			// Dual-licensed ("SPDX-License-Identifier: BSD-3-Clause OR
			// GPL-2.0-only" in its License file); the detector reports the
			// GPL side too. sandhold uses it under BSD-3-Clause.
			"kernel.org/pub/linux/libs/security/libcap/psx": "BSD-3-Clause OR GPL-2.0-only, used as BSD-3-Clause",
			// Code under Apache-2.0 (older parts MIT); CC-BY-4.0 covers
			// the project's documentation, which is not linked in.
			"github.com/modelcontextprotocol/go-sdk": "Apache-2.0 AND MIT code; CC-BY-4.0 documentation",
			// Code under Apache-2.0 (LICENSE); CC-BY-SA-4.0 (LICENSE.docs)
			// covers its documentation, which is not linked in.
			"github.com/opencontainers/go-digest": "Apache-2.0 code; CC-BY-SA-4.0 documentation",
		},
	}
}

// allowedExpr reports whether an SPDX expression is acceptable: an OR
// needs one acceptable side (the licensee chooses), an AND needs all.
// Parentheses are not parsed: such an expression must be reviewed.
func (p LicensePolicy) allowedExpr(expr string) bool {
	expr = strings.TrimSpace(expr)
	if strings.ContainsAny(expr, "()") || expr == "" {
		return false
	}
	for _, alt := range strings.Split(expr, " OR ") {
		ok := true
		for _, id := range strings.Split(alt, " AND ") {
			ok = ok && p.Allowed[strings.TrimSpace(id)]
		}
		if ok {
			return true
		}
	}
	return false
}

// CheckLicenses returns one line per module of an SBOM whose licenses are
// not on the allow list and not reviewed (nil: all acceptable). A module
// with no license detected fails: unknown is not allowed.
func (p LicensePolicy) CheckLicenses(c *CycloneDX) []string {
	var bad []string
	for _, m := range c.Modules {
		if _, ok := p.Reviewed[m.Path]; ok {
			continue
		}
		ls := c.Licenses[m.String()]
		if len(ls) == 0 {
			bad = append(bad, fmt.Sprintf("%s: no license detected", m))
			continue
		}
		// Several entries: the module carries several license files,
		// all of which apply.
		for _, l := range ls {
			if !p.allowedExpr(l) {
				bad = append(bad, fmt.Sprintf("%s: %s is not on the allow list", m, l))
			}
		}
	}
	sort.Strings(bad)
	return bad
}
