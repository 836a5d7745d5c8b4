package guard

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// DefaultMaxDepth is how deeply strings-run-as-code may nest: bash -c "…",
// eval "…", here-documents fed to shells, alias values. Real command lines
// use one or two levels (`ssh`-less `sudo bash -c "…"`); each level is a new
// parse of text the previous level produced, so deeper nesting is mostly an
// obfuscation signal and the cap also bounds the work. Beyond it: Dangerous.
const DefaultMaxDepth = 4

const (
	// maxInputBytes caps the command line: a parse is linear in its size, and
	// the guard sits on the exec hot path. Longer lines are Dangerous
	// (approve them, or upload a script file).
	maxInputBytes = 256 << 10
	// maxCommands caps Verdict.Commands so a verdict stays a bounded object
	// for the audit log; a line with more simple commands is too-complex.
	maxCommands = 4096
	// maxSteps caps walker steps (statements, command hops and arguments),
	// whatever the shape of the tree.
	maxSteps = 100_000
	// maxWrapperChain caps `sudo env nohup timeout 5 nice …` unwrapping.
	maxWrapperChain = 16
	// maxReparseBytes caps the text parsed again as code (bash -c, eval,
	// alias expansions, scripts written by the line): an alias called many
	// times could otherwise make the work quadratic in the input. Nested
	// text is part of the input, so real lines stay far below it.
	maxReparseBytes = maxInputBytes
	// maxReasons caps Verdict.Reasons; further reasons are summarised.
	maxReasons = 32
	// maxNesting caps bracket nesting, checked by a scan before parsing: the
	// parser and the walker recurse once per level of $( ( { `, so deep
	// nesting costs stack (memory) in proportion. Real commands nest a few
	// levels; brackets inside quotes count too, which only errs towards
	// Dangerous.
	maxNesting = 256
)

// bracketDepth is the deepest nesting of ( and { in s, ignoring quoting.
func bracketDepth(s string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '{':
			depth++
			deepest = max(deepest, depth)
		case ')', '}':
			depth = max(0, depth-1)
		}
	}
	return deepest
}

// Verdict is the guard's classification of one command line.
type Verdict struct {
	// Risk is the highest tier of any command or rule found. Always valid.
	Risk Risk `json:"risk"`
	// Dynamic reports that something is built at run time: eval of a
	// variable, `… | sh`, base64 -d | bash, source <(…), $cmd as a command
	// name. Dynamic implies Risk == Dangerous.
	Dynamic bool `json:"dynamic"`
	// Rules are the ids of matched rules (the Rule* constants), in the order
	// first found, without duplicates.
	Rules []string `json:"rules,omitempty"`
	// Reasons are human-readable, one per finding, for the approver.
	Reasons []string `json:"reasons,omitempty"`
	// Commands are every simple command found, wrappers and the commands
	// they wrap both included, in the order the walker met them (a command
	// substitution before the command that uses its output). At most 4096;
	// more make the line too-complex.
	Commands []Command `json:"commands,omitempty"`
	// Redirects are the files the line's redirections name (`< /etc/hostname`,
	// `> out.txt`, `2>>log`), in first-seen order, without duplicates; a
	// non-literal target is shown as its source text. At most maxCommands.
	Redirects []string `json:"redirects,omitempty"`
}

// Command is one simple command.
type Command struct {
	// Name is the base name of the command word (/usr/bin/rm → rm). For a
	// non-literal name it is the word's source text ($x, ${x:-rm} shows rm).
	Name string `json:"name"`
	// Args are the arguments after quote removal; a non-literal argument is
	// shown as its source text.
	Args []string `json:"args,omitempty"`
	// Literal reports that every word of the command was fully literal.
	Literal bool `json:"literal"`
	// Depth counts how many times text was re-parsed to reach the command
	// (0: the line itself; 1: inside bash -c "…" or eval; …).
	Depth int `json:"depth"`
}

// Config configures a Guard. The zero value is usable.
type Config struct {
	// MaxDepth caps nested re-parsing (see DefaultMaxDepth). 0 means
	// DefaultMaxDepth.
	MaxDepth int
	// Dangerous lists extra command base names that are Dangerous
	// (rule "configured-dangerous").
	Dangerous []string
	// Safe lists extra command base names whose tier is Safe. Rules and
	// dynamic findings still apply to them.
	Safe []string
}

// Guard classifies command lines. It is safe for concurrent use.
type Guard struct {
	maxDepth  int
	dangerous map[string]bool
	safe      map[string]bool
	parsers   sync.Pool // of *syntax.Parser; a Parser is not safe for concurrent use
}

// New returns a Guard for cfg.
func New(cfg Config) *Guard {
	g := &Guard{maxDepth: cfg.MaxDepth, dangerous: map[string]bool{}, safe: map[string]bool{}}
	if g.maxDepth <= 0 {
		g.maxDepth = DefaultMaxDepth
	}
	for _, n := range cfg.Dangerous {
		g.dangerous[n] = true
	}
	for _, n := range cfg.Safe {
		g.safe[n] = true
	}
	g.parsers.New = func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }
	return g
}

// Classify classifies cmdline. It never panics and never fails: a line it
// cannot parse or analyse within its caps is Dangerous.
func (g *Guard) Classify(cmdline string) (v Verdict) {
	defer func() {
		if r := recover(); r != nil {
			// Fail closed; the parser or walker hit a case nobody foresaw.
			v = Verdict{Risk: Dangerous, Rules: []string{RuleInternal},
				Reasons: []string{fmt.Sprintf("the guard failed to analyse the command: %v", r)}}
		}
	}()
	v.Risk = Safe
	w := &walker{g: g, v: &v}
	if len(cmdline) > maxInputBytes {
		w.flag(RuleTooComplex, Dangerous, fmt.Sprintf("command line longer than %d bytes", maxInputBytes))
		return v
	}
	if bracketDepth(cmdline) > maxNesting {
		w.flag(RuleTooComplex, Dangerous, fmt.Sprintf("brackets nested more than %d deep", maxNesting))
		return v
	}
	w.parse(cmdline, ctx{}, "command line")
	if v.Dynamic {
		v.Risk = Dangerous
	}
	return v
}

func (g *Guard) getParser() *syntax.Parser  { return g.parsers.Get().(*syntax.Parser) }
func (g *Guard) putParser(p *syntax.Parser) { g.parsers.Put(p) }

// Names returns the distinct command names of v, in first-seen order.
func Names(v Verdict) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range v.Commands {
		if !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c.Name)
		}
	}
	return out
}

// Paths returns what v's commands may name as a file, for the policy's
// path lists: every argument word that is not an option (the value of
// --opt=V options included) and every redirection target, distinct, in
// first-seen order. A word need not look like a path: `cat key.pem` names
// key.pem, which a base-name pattern (*.pem) matches. It is a heuristic
// over the words the guard sees, not a parser of every program's options;
// options that take a separate value (`-f FILE`) count because FILE is a
// word of its own.
func Paths(v Verdict) []string {
	seen := map[string]bool{}
	var out []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, c := range v.Commands {
		for _, a := range c.Args {
			if strings.HasPrefix(a, "-") {
				_, after, ok := strings.Cut(a, "=")
				if !ok {
					continue
				}
				a = after
			}
			add(a)
		}
	}
	for _, r := range v.Redirects {
		add(r)
	}
	return out
}

// InDir adds what a command run in directory cwd names: cwd itself (a
// command run in /etc touches /etc) and each relative path resolved
// against it (`cat hostname` in /etc names /etc/hostname; `../etc/x` in
// /workspace names /etc/x). The words as written stay in the list, so a
// base-name pattern still sees them. An empty or relative cwd adds nothing.
func InDir(paths []string, cwd string) []string {
	if cwd == "" || !strings.HasPrefix(cwd, "/") {
		return paths
	}
	out := slices.Clip(paths)
	add := func(p string) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	add(path.Clean(cwd))
	for _, p := range paths {
		if p == "" || p[0] == '/' || p[0] == '~' || p[0] == '$' {
			continue
		}
		add(path.Join(cwd, p))
	}
	return out
}
