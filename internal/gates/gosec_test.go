package gates

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite gosec-reviewed.txt from the tree (review the diff!)")

const reviewedFile = "gosec-reviewed.txt"

const reviewedHeader = `# Every comment in the tree that silences gosec (#nosec, //nolint:gosec, a
# bare //nolint), counted per file, rules and reason. TestGosecSuppressions
# fails when the tree and this list differ: a new suppression is a security
# decision and is reviewed here. After review:
#   go test ./internal/gates -run TestGosecSuppressions -update
# count<TAB>file<TAB>rules<TAB>reason
`

func readReviewed(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(reviewedFile)
	if err != nil {
		t.Fatalf("read %s: %v", reviewedFile, err)
	}
	m := map[string]int{}
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n, key, ok := strings.Cut(line, "\t")
		c, err := strconv.Atoi(n)
		if !ok || err != nil || c <= 0 {
			t.Fatalf("%s line %d: want count<TAB>file<TAB>rules<TAB>reason", reviewedFile, i+1)
		}
		m[key] += c
	}
	return m
}

// TestGosecSuppressions: every gosec suppression names its rule and gives
// a reason, and the set of them is the reviewed one.
func TestGosecSuppressions(t *testing.T) {
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	all, err := ScanSuppressions(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatal("no suppression found at all: the scanner is broken (the tree has some)")
	}
	got := map[string]int{}
	for _, s := range all {
		if p := s.Problems(); p != "" {
			t.Errorf("%s:%d: gosec suppression %s; write `// #nosec G### -- why` or `//nolint:gosec // G###: why`", s.File, s.Line, p)
		}
		got[s.Key()]++
	}
	if *update {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString(reviewedHeader)
		for _, k := range keys {
			fmt.Fprintf(&b, "%d\t%s\n", got[k], k)
		}
		if err := os.WriteFile(reviewedFile, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d suppressions", reviewedFile, len(all))
		return
	}
	want := readReviewed(t)
	var diffs []string
	for k, n := range got {
		if want[k] < n {
			diffs = append(diffs, fmt.Sprintf("new, not reviewed (%d more): %s", n-want[k], strings.ReplaceAll(k, "\t", " | ")))
		}
	}
	for k, n := range want {
		if got[k] < n {
			diffs = append(diffs, fmt.Sprintf("reviewed but gone (%d fewer): %s", n-got[k], strings.ReplaceAll(k, "\t", " | ")))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("gosec suppressions differ from %s (review them, then run with -update):\n  %s", reviewedFile, strings.Join(diffs, "\n  "))
	}
	t.Logf("%d gosec suppressions, all reviewed", len(all))
}

func TestParseSuppressions(t *testing.T) {
	src := "package x\n\n" + strings.Join([]string{
		"var a = 1 // #nosec G204 -- fixed program",
		"var b = 2 //nolint:gosec // G304: a file we made",
		"var c = 3 //nolint:errcheck,gosec // G115, G304: both bounded",
		"var d = 4 //nolint:errcheck // read-only",
		"var e = 5 //nolint",
		"var f = 6 // #nosec",
		"var g = 7 //nolint:gosec // G115: see above",
		"var h = \"// #nosec G101 -- in a string, not a comment\"",
		"// prose that mentions #nosec mid-sentence is not one",
		"var i = 9 //nolint:gosec // G115: fine",
		"",
		"",
		"",
		"",
		"",
		"",
		"var j = 10 //nolint:gosec // G115: see above",
	}, "\n") + "\n"
	got, err := ParseSuppressions("x.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		line          int
		rules, reason string
		ok            bool
	}
	want := []row{
		{3, "G204", "fixed program", true},
		{4, "G304", "a file we made", true},
		{5, "G115 G304", "both bounded", true},
		{7, "", "", false},
		{8, "", "", false},
		{9, "G115", "see above", true}, // line 8's comment is just above
		{12, "G115", "fine", false},    // one word is not a reason
		{19, "G115", "", false},        // nothing above within reach
	}
	if len(got) != len(want) {
		t.Fatalf("got %d suppressions, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Line != w.line || g.Rules != w.rules || g.Reason != w.reason || (g.Problems() == "") != w.ok {
			t.Errorf("#%d: got line %d rules %q reason %q problems %q; want %+v", i, g.Line, g.Rules, g.Reason, g.Problems(), w)
		}
	}
}
