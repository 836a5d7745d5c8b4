package gates

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Suppression is one comment that silences gosec.
type Suppression struct {
	File   string // repository-relative path
	Line   int
	Rules  string // "G204" or "G115 G304"; "" when none is named
	Reason string // "" when none is given

	seeAbove bool // the reason is the comment just above
}

// Key is what the reviewed list records: file, rules and reason, but not
// the line, so moving code does not churn the list.
func (s Suppression) Key() string {
	return fmt.Sprintf("%s\t%s\t%s", s.File, s.Rules, s.Reason)
}

var (
	// gosec's own form, "#nosec G304 -- reason" (golangci passes it on).
	nosecRe = regexp.MustCompile(`^#nosec\b(.*)$`)
	// golangci's form, "nolint:gosec // G304: reason", also in a list
	// ("nolint:errcheck,gosec"), and a bare "nolint" that silences every
	// linter, gosec included.
	nolintRe = regexp.MustCompile(`^nolint(:[\w,-]+)?\b(.*)$`)
	ruleRe   = regexp.MustCompile(`^G\d{3}$`)
)

// seeAboveLines: a reason "see above" counts when a comment ends at most
// this many lines above (the shared reason of a group of lines).
const seeAboveLines = 5

// ParseSuppressions finds the gosec suppressions in one Go file: only in
// comments (go/parser), so strings and prose that mention them do not
// count.
func ParseSuppressions(file string, src []byte) ([]Suppression, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []Suppression
	commentEnds := map[int]bool{} // lines on which a comment ends
	for _, g := range f.Comments {
		for _, c := range g.List {
			commentEnds[fset.Position(c.End()).Line] = true
		}
	}
	for _, g := range f.Comments {
		for _, c := range g.List {
			text := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*"))
			line := fset.Position(c.Pos()).Line
			s, ok := parseOne(text)
			if !ok {
				continue
			}
			s.File, s.Line = file, line
			if strings.EqualFold(strings.TrimSuffix(s.Reason, "."), "see above") {
				s.Reason = ""
				for l := line - 1; l >= line-seeAboveLines && l > 0; l-- {
					if commentEnds[l] {
						s.Reason = "see above"
						s.seeAbove = true
						break
					}
				}
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func parseOne(text string) (Suppression, bool) {
	if m := nosecRe.FindStringSubmatch(text); m != nil {
		rules, reason, _ := strings.Cut(m[1], "--")
		return Suppression{Rules: normRules(rules), Reason: strings.TrimSpace(reason)}, true
	}
	m := nolintRe.FindStringSubmatch(text)
	if m == nil {
		return Suppression{}, false
	}
	silencesGosec := m[1] == "" // a bare nolint silences everything
	for _, l := range strings.Split(strings.TrimPrefix(m[1], ":"), ",") {
		silencesGosec = silencesGosec || l == "gosec"
	}
	if !silencesGosec {
		return Suppression{}, false
	}
	// The explanation follows "//": "G304: reason".
	rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(m[2]), "//"))
	rules, reason, found := strings.Cut(rest, ":")
	if !found || !allRules(rules) {
		rules, reason = "", rest
	}
	return Suppression{Rules: normRules(rules), Reason: strings.TrimSpace(reason)}, true
}

func allRules(s string) bool {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
	if len(f) == 0 {
		return false
	}
	for _, r := range f {
		if !ruleRe.MatchString(r) {
			return false
		}
	}
	return true
}

func normRules(s string) string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
	return strings.Join(f, " ")
}

// Problems says what is wrong with a suppression itself ("" when fine):
// it must name the gosec rules it silences and say why.
func (s Suppression) Problems() string {
	var p []string
	if !allRules(s.Rules) {
		p = append(p, "names no gosec rule (G###)")
	}
	if !s.seeAbove && len(strings.Fields(s.Reason)) < 2 {
		p = append(p, "gives no reason")
	}
	return strings.Join(p, " and ")
}

// ScanSuppressions reads every Go file of the repository.
func ScanSuppressions(root string) ([]Suppression, error) {
	files, err := GoFiles(root)
	if err != nil {
		return nil, err
	}
	var all []Suppression
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f))) // #nosec G304 -- the repository's own Go files
		if err != nil {
			return nil, err
		}
		sup, err := ParseSuppressions(f, b)
		if err != nil {
			return nil, err
		}
		all = append(all, sup...)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].File != all[j].File {
			return all[i].File < all[j].File
		}
		return all[i].Line < all[j].Line
	})
	return all, nil
}
