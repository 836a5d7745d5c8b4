package proto

import (
	"path"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/archive/deny"
)

// Caps of the workspace ops, each with its reason. The init serves these
// ops for sandboxed (hostile) trees, so every loop is bounded.
const (
	// MaxWalkVisit bounds the entries one walk or grep looks at: a tree
	// of a million files must not keep the init busy without end; the
	// reply says Truncated.
	MaxWalkVisit = 100_000
	// MaxWalkDepth bounds recursion (one open directory per level).
	MaxWalkDepth = 64
	// MaxWalkResults bounds the entries or matches one reply carries.
	MaxWalkResults = 50_000
	// MaxReplyBytes keeps a reply well below MaxMessage: results stop
	// (Truncated) when their encoded size estimate passes it.
	MaxReplyBytes = MaxMessage - 64<<10
	// MaxPatterns bounds the include, exclude and deny lists of a request.
	MaxPatterns = 256
	// MaxPatternLen bounds one glob or regular expression.
	MaxPatternLen = 4096
	// MaxGrepBytes bounds the bytes one grep reads, over all files.
	MaxGrepBytes = 512 << 20
	// MaxGrepLine is the longest line a match reports; longer lines are
	// cut (the line still matches on its whole content up to
	// MaxGrepScanLine).
	MaxGrepLine = 2000
	// MaxGrepScanLine is the longest line grep scans; a file with a longer
	// line is searched up to that line and then skipped.
	MaxGrepScanLine = 1 << 20
	// MaxGrepContext bounds the context lines before and after a match.
	MaxGrepContext = 20
	// maxGlobSegments bounds the segments of a glob pattern, so matching
	// "**" stays cheap (the matcher is O(segments × path components)).
	maxGlobSegments = 64
	// MaxWalkTime bounds the wall time one walk, grep or pack check spends
	// in the init: a tree built to be slow (a 3,000-level chain, a
	// directory of a million names, a slow file system) must not hold an
	// init goroutine, and the client waiting on it, without end. A walk or
	// grep that runs out replies Truncated with what it found; a pack
	// check that runs out refuses the archive.
	MaxWalkTime = 10 * time.Second
	// WalkClockEvery is how many entries a walk visits between two looks
	// at the clock (a clock read per entry would cost more than the visit).
	WalkClockEvery = 64
)

// The sensitive-path policy and the writable trees live in package deny
// (the extractor program applies them too); these are the same.
type Deny = deny.Deny

// WritableTrees are where the sandbox user can create files.
var WritableTrees = deny.WritableTrees

// WritableTree names the writable tree holding the absolute, clean path
// p, or "".
func WritableTree(p string) string { return deny.WritableTree(p) }

// HardLinked: see deny.HardLinked.
func HardLinked(p string, mode uint32, nlink uint64) bool { return deny.HardLinked(p, mode, nlink) }

// WalkReq asks for the entries below FileReq.Path.
type WalkReq struct {
	// MaxDepth: 1 lists the directory's own entries; 0 means MaxWalkDepth.
	MaxDepth int `json:"max_depth,omitempty"`
	// Hidden includes (and descends into) entries whose name starts with
	// a dot.
	Hidden bool `json:"hidden,omitempty"`
	// Pattern, when set, is a glob over the path relative to the root
	// ("**" matches any number of directories); Names, when set, are globs
	// over the base name (any may match). An entry is reported only if it
	// passes both.
	Pattern string   `json:"pattern,omitempty"`
	Names   []string `json:"names,omitempty"`
	// Extensions, when set, keep only files whose name ends with one of
	// them (".py").
	Extensions []string `json:"extensions,omitempty"`
	// Exclude are globs over the base name or the relative path; an
	// excluded directory is not descended into.
	Exclude []string `json:"exclude,omitempty"`
	// FilesOnly drops directories from the results (they are still
	// walked).
	FilesOnly bool `json:"files_only,omitempty"`
	// Sort orders the results before Limit applies: "path" (default),
	// "name", "size", "modified", "type" (directories first).
	Sort string `json:"sort,omitempty"`
	Desc bool   `json:"desc,omitempty"`
	// Limit caps the entries returned (at most MaxWalkResults).
	Limit int  `json:"limit,omitempty"`
	Deny  Deny `json:"deny"`
}

// WalkEntry is one entry of a walk: Stat with Name set to the path
// relative to the root.
type WalkEntry = Stat

// WalkResp is the reply to OpWalk.
type WalkResp struct {
	// Root is the kernel-resolved path of the walk's root.
	Root    string      `json:"root"`
	Entries []WalkEntry `json:"entries"`
	// Total counts the matching entries seen (Entries holds at most Limit
	// of them).
	Total int `json:"total"`
	// Truncated is set when Limit, the reply size or a visit cap stopped
	// the walk or cut the results.
	Truncated bool `json:"truncated,omitempty"`
}

// GrepReq asks for the lines matching a regular expression in the regular
// files below (or at) FileReq.Path.
type GrepReq struct {
	Pattern         string   `json:"pattern"`
	Fixed           bool     `json:"fixed,omitempty"`
	CaseInsensitive bool     `json:"case_insensitive,omitempty"`
	Multiline       bool     `json:"multiline,omitempty"`
	Include         []string `json:"include,omitempty"`
	Exclude         []string `json:"exclude,omitempty"`
	Before          int      `json:"before,omitempty"`
	After           int      `json:"after,omitempty"`
	// MaxResults and Offset page the matches.
	MaxResults int `json:"max_results,omitempty"`
	Offset     int `json:"offset,omitempty"`
	// MaxFileSize skips larger files (0: no per-file limit beyond
	// MaxGrepBytes).
	MaxFileSize int64 `json:"max_file_size,omitempty"`
	// MaxFiles, when set, ends the search (Truncated) once matches from
	// that many files were found and another file matches.
	MaxFiles  int  `json:"max_files,omitempty"`
	Recursive bool `json:"recursive,omitempty"`
	Deny      Deny `json:"deny"`
}

// GrepMatch is one matching line (or, multiline, the first line of a match
// spanning several).
type GrepMatch struct {
	File   string   `json:"file"`
	Line   int      `json:"line"`
	Text   string   `json:"text"`
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// GrepResp is the reply to OpGrep.
type GrepResp struct {
	Matches       []GrepMatch `json:"matches"`
	MatchCount    int         `json:"match_count"`
	FilesSearched int         `json:"files_searched"`
	FilesMatched  int         `json:"files_matched"`
	Truncated     bool        `json:"truncated,omitempty"`
}

// MatchGlob reports whether the slash-separated relative path rel matches
// pattern, where a "**" segment matches zero or more path segments and the
// other segments follow path.Match. A malformed pattern matches nothing.
func MatchGlob(pattern, rel string) bool {
	pat := strings.Split(strings.Trim(pattern, "/"), "/")
	if len(pat) > maxGlobSegments {
		return false
	}
	var segs []string
	if rel != "" {
		segs = strings.Split(rel, "/")
	}
	// Dynamic programming over (pattern segment, path segment): at most
	// maxGlobSegments × (path segments) cells, so "**/**/**/…" cannot
	// blow up the way naive backtracking does.
	prev := make([]bool, len(segs)+1)
	prev[0] = true
	for _, p := range pat {
		cur := make([]bool, len(segs)+1)
		if p == "**" {
			acc := false
			for j := 0; j <= len(segs); j++ {
				acc = acc || prev[j]
				cur[j] = acc
			}
		} else {
			for j := 1; j <= len(segs); j++ {
				if prev[j-1] {
					ok, err := path.Match(p, segs[j-1])
					cur[j] = ok && err == nil
				}
			}
		}
		prev = cur
	}
	return prev[len(segs)]
}

// MatchName reports whether name (a base name) or rel (the relative path)
// matches any of the globs.
func MatchName(globs []string, name, rel string) bool {
	for _, g := range globs {
		if ok, err := path.Match(g, name); ok && err == nil {
			return true
		}
		if strings.Contains(g, "/") && MatchGlob(g, rel) {
			return true
		}
	}
	return false
}

// CheckPatterns validates the pattern lists of a walk or grep request
// against the caps.
func CheckPatterns(lists ...[]string) error {
	for _, l := range lists {
		if len(l) > MaxPatterns {
			return Invalidf("more than %d patterns", MaxPatterns)
		}
		for _, p := range l {
			if len(p) > MaxPatternLen || strings.IndexByte(p, 0) >= 0 {
				return Invalidf("pattern too long or holds a NUL byte")
			}
			if _, err := path.Match(p, ""); err != nil {
				return Invalidf("malformed glob %q", p)
			}
		}
	}
	return nil
}
