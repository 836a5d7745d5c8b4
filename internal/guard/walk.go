package guard

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// span is a range of indices into Verdict.Commands.
type span struct{ start, end int }

// ctx is what the walker knows about the statement it is in.
type ctx struct {
	depth      int              // re-parse depth
	pipe       *span            // stdin is a pipe fed by these commands (an empty span: an unknown producer)
	stdin      *syntax.Redirect // a here-document, here-string or < file feeding stdin
	inPipe     bool             // the statement is a stage of a pipeline
	background bool             // the statement runs with &
	nested     span             // commands found in substitutions of the current simple command
	redirs     span             // commands found in the current statement's redirections
	writes     []string         // files the current simple command's stdout truncates (> f)
	xargs      bool             // argv came through xargs: more arguments arrive from stdin
	repl       string           // xargs -I / find -exec placeholder replaced at run time
	aliases    []string         // aliases being expanded (bash never expands one inside itself)
}

// walker carries the state of one Classify call.
type walker struct {
	g           *Guard
	v           *Verdict
	rulesSeen   map[string]bool
	reasonsSeen map[string]bool
	funcs       map[string]*syntax.Stmt // bodies of the functions declared so far
	funcStack   []string                // functions whose bodies are being walked
	aliases     map[string]string       // aliases defined so far
	downloads   map[string]bool         // files written by curl -o / wget -O
	anyDownload bool                    // a download whose file name the guard cannot know
	written     map[string]*string      // files this line writes: their content when known (cat <<EOF > f, echo … > f)
	k           known                   // parameter values known so far (hints for rules)
	steps       int
	reparsed    int
	stopped     bool
	printer     *syntax.Printer
}

// --- findings ---

func (w *walker) flag(id string, risk Risk, reason string) {
	if w.rulesSeen == nil {
		w.rulesSeen = map[string]bool{}
	}
	if id != "" && !w.rulesSeen[id] {
		w.rulesSeen[id] = true
		w.v.Rules = append(w.v.Rules, id)
	}
	w.bump(risk, reason)
}

func (w *walker) bump(risk Risk, reason string) {
	if risk > w.v.Risk {
		w.v.Risk = risk
	}
	if reason == "" {
		return
	}
	if w.reasonsSeen == nil {
		w.reasonsSeen = map[string]bool{}
	}
	if w.reasonsSeen[reason] {
		return
	}
	w.reasonsSeen[reason] = true
	switch n := len(w.v.Reasons); {
	case n < maxReasons:
		w.v.Reasons = append(w.v.Reasons, reason)
	case n == maxReasons:
		w.v.Reasons = append(w.v.Reasons, "… further findings omitted")
	}
}

// dynamic records a run-time construct, and where its text comes from when
// that is visible (curl, base64 -d …) in the given spans.
func (w *walker) dynamic(id, reason string, from ...span) {
	w.v.Dynamic = true
	w.flag(id, Dangerous, reason)
	for _, s := range from {
		for i := s.start; i < s.end && i < len(w.v.Commands); i++ {
			c := &w.v.Commands[i]
			switch {
			case fetchers[c.Name] && (c.Name != "openssl" || slices.Contains(c.Args, "s_client")):
				w.flag(RuleDownloadExec, Dangerous, "runs code fetched by "+c.Name)
			case isDecoder(c):
				w.flag(RuleDecodeExec, Dangerous, "runs code decoded by "+c.Name)
			}
		}
	}
}

// tick counts one step and stops the walk beyond maxSteps.
func (w *walker) tick() bool { return w.tickN(1) }

// tickN counts n steps.
func (w *walker) tickN(n int) bool {
	if w.stopped {
		return false
	}
	w.steps += n
	if w.steps > maxSteps {
		w.flag(RuleTooComplex, Dangerous, fmt.Sprintf("more than %d steps to analyse", maxSteps))
		w.stopped = true
		return false
	}
	return true
}

// --- parsing ---

// parse parses src as a shell program at c.depth and walks it.
func (w *walker) parse(src string, c ctx, what string) {
	if f := w.parseFile(src, c, what); f != nil {
		w.stmts(f.Stmts, c)
	}
}

// parseQuiet parses text that may or may not be shell code (a string in a
// program): a syntax error is not a finding.
func (w *walker) parseQuiet(src string) *syntax.File {
	if w.stopped {
		return nil
	}
	w.reparsed += len(src)
	if w.reparsed > maxReparseBytes {
		w.flag(RuleTooComplex, Dangerous, fmt.Sprintf("more than %d bytes of nested code", maxReparseBytes))
		w.stopped = true
		return nil
	}
	p := w.g.getParser()
	f, err := p.Parse(strings.NewReader(src), "")
	w.g.putParser(p)
	if err != nil {
		return nil
	}
	return f
}

func (w *walker) parseFile(src string, c ctx, what string) *syntax.File {
	if w.stopped {
		return nil
	}
	if c.depth > w.g.maxDepth {
		w.flag(RuleDepthExceeded, Dangerous, fmt.Sprintf("%s nested more than %d levels deep", what, w.g.maxDepth))
		return nil
	}
	w.reparsed += len(src)
	if w.reparsed > maxReparseBytes {
		w.flag(RuleTooComplex, Dangerous, fmt.Sprintf("more than %d bytes of nested code", maxReparseBytes))
		w.stopped = true
		return nil
	}
	p := w.g.getParser()
	f, err := p.Parse(strings.NewReader(src), "")
	w.g.putParser(p)
	if err != nil {
		w.flag(RuleUnparseable, Dangerous, what+" is not valid shell syntax")
		return nil
	}
	return f
}

// --- statements ---

func (w *walker) stmts(list []*syntax.Stmt, c ctx) {
	for _, s := range list {
		w.stmt(s, c)
	}
}

func (w *walker) stmt(s *syntax.Stmt, c ctx) {
	if s == nil || !w.tick() {
		return
	}
	c.background = c.background || s.Background || s.Coprocess || s.Disown
	start := len(w.v.Commands)
	for _, r := range s.Redirs {
		w.redirect(r, &c)
	}
	c.redirs = span{start, len(w.v.Commands)}
	w.command(s.Cmd, c)
}

func (w *walker) command(cmd syntax.Command, c ctx) {
	if _, simple := cmd.(*syntax.CallExpr); !simple {
		c.writes = nil // { echo a; echo b; } > f: no single command's text
	}
	switch x := cmd.(type) {
	case *syntax.CallExpr:
		w.call(x, c)
	case *syntax.BinaryCmd:
		if x.Op != syntax.Pipe && x.Op != syntax.PipeAll {
			w.stmt(x.X, c)
			w.stmt(x.Y, c)
			return
		}
		// Walk the stages of a | b | c in order, without recursing once per
		// stage: a long pipeline must not cost a deep stack.
		stages := pipeStages(x)
		start := len(w.v.Commands)
		if c.pipe != nil && c.pipe.end > c.pipe.start {
			start = c.pipe.start // everything upstream feeds every later stage
		}
		for i, st := range stages {
			cs := c
			cs.inPipe = true
			if i > 0 {
				cs.pipe, cs.stdin = &span{start, len(w.v.Commands)}, nil
			}
			w.stmt(st, cs)
			if w.stopped {
				return
			}
		}
	case *syntax.Subshell:
		w.stmts(x.Stmts, c)
	case *syntax.Block:
		w.stmts(x.Stmts, c)
	case *syntax.IfClause:
		for ic := x; ic != nil; ic = ic.Else {
			w.stmts(ic.Cond, c)
			w.stmts(ic.Then, c)
		}
	case *syntax.WhileClause:
		w.stmts(x.Cond, c)
		w.stmts(x.Do, c)
	case *syntax.ForClause:
		if x.Loop != nil {
			w.nested(x.Loop, c)
		}
		w.stmts(x.Do, c)
	case *syntax.CaseClause:
		w.nestedWord(x.Word, c)
		for _, it := range x.Items {
			for _, p := range it.Patterns {
				w.nestedWord(p, c)
			}
			w.stmts(it.Stmts, c)
		}
	case *syntax.FuncDecl:
		w.funcDecl(x, c)
	case *syntax.ArithmCmd:
		w.nested(x, c)
	case *syntax.TestClause:
		w.nested(x, c)
	case *syntax.LetClause:
		w.nested(x, c)
	case *syntax.DeclClause:
		w.decl(x, c)
	case *syntax.TimeClause:
		w.stmt(x.Stmt, c)
	case *syntax.CoprocClause:
		w.nestedWord(x.Name, c)
		c.background = true
		w.stmt(x.Stmt, c)
	case *syntax.TestDecl:
		w.nestedWord(x.Description, c)
		w.stmt(x.Body, c)
	}
}

// pipeStages flattens nested pipe BinaryCmds (left- or right-leaning) into
// their stages, in order.
func pipeStages(x *syntax.BinaryCmd) []*syntax.Stmt {
	var out []*syntax.Stmt
	todo := []*syntax.Stmt{x.Y, x.X} // a stack: last in, walked first
	for len(todo) > 0 {
		st := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) &&
			len(st.Redirs) == 0 && !st.Negated && !st.Background && !st.Coprocess && !st.Disown {
			todo = append(todo, b.Y, b.X)
			continue
		}
		out = append(out, st)
	}
	return out
}

// nested walks the command and process substitutions inside a node that is
// not itself a statement list (words, arithmetic, [[ tests ]], loops).
func (w *walker) nested(n syntax.Node, c ctx) {
	syntax.Walk(n, func(n syntax.Node) bool {
		if w.stopped {
			return false
		}
		switch x := n.(type) {
		case *syntax.CmdSubst:
			cc := c
			cc.inPipe, cc.background, cc.writes = false, false, nil
			w.stmts(x.Stmts, cc)
			return false
		case *syntax.ProcSubst:
			cc := c
			cc.inPipe, cc.background, cc.writes = false, true, nil
			if x.Op == syntax.CmdOut {
				// >(cmd): cmd reads what the outer command writes.
				cc.pipe, cc.stdin = &span{}, nil
			}
			w.stmts(x.Stmts, cc)
			return false
		}
		return true
	})
}

func (w *walker) nestedWord(wd *syntax.Word, c ctx) {
	if wd != nil {
		w.nested(wd, c)
	}
}

// redirect checks one redirection and records what feeds stdin.
func (w *walker) redirect(r *syntax.Redirect, c *ctx) {
	w.nestedWord(r.Word, *c)
	w.nestedWord(r.Hdoc, *c)
	fd0 := r.N == nil || r.N.Value == "0"
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		if fd0 {
			c.stdin, c.pipe = r, nil
		}
		return
	}
	if r.Word == nil {
		return
	}
	t := resolve(r.Word, &w.k)
	read, write := false, false
	switch r.Op {
	case syntax.RdrIn:
		read = true
		if fd0 {
			c.stdin, c.pipe = r, nil
		}
	case syntax.RdrInOut:
		read, write = true, true
	case syntax.DplIn, syntax.DplOut:
		if t.val == "-" || isNumber(t.val) {
			return // duplicating or closing a file descriptor
		}
		read, write = r.Op == syntax.DplIn, r.Op == syntax.DplOut
	default: // > >> >| &> &>> …
		write = true
	}
	switch {
	case isNetDevice(t.val):
		w.flag(RuleReverseShell, Dangerous, "redirection to "+printable(t.val)+" opens a network connection")
	case write && (isRawDevice(t.val) || isKernelKnob(t.val)):
		w.flag(RuleDeviceWrite, Dangerous, "redirection writes to device "+printable(t.val))
	case read && !write && isCredentialPath(t.val):
		w.flag(RuleCredentialRead, Dangerous, "redirection reads secret "+printable(t.val))
	case write && !harmlessDevices[t.val] && !strings.HasPrefix(t.val, "/dev/fd/"):
		w.bump(Medium, "writes "+w.show(field{val: t.val, lit: t.lit, src: r.Word}))
		w.wrote(t.val, nil)
		if t.lit && fd1(r) && (r.Op == syntax.RdrOut || r.Op == syntax.RdrClob || r.Op == syntax.RdrAll) {
			c.writes = append(slices.Clip(c.writes), t.val)
		}
	}
}

// fd1 reports a redirection of standard output.
func fd1(r *syntax.Redirect) bool {
	return r.N == nil || r.N.Value == "1"
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// loaderVars change what a later command loads or runs.
var loaderVars = map[string]bool{
	"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true, "BASH_ENV": true, "ENV": true,
	"PROMPT_COMMAND": true, "PATH": true, "IFS": true, "SHELLOPTS": true, "PS4": true,
	"PYTHONPATH": true, "PYTHONSTARTUP": true, "PERL5OPT": true, "PERL5LIB": true, "NODE_OPTIONS": true,
	"RUBYOPT": true, "GIT_SSH_COMMAND": true, "GIT_EXEC_PATH": true, "GIT_CONFIG_GLOBAL": true,
}

func (w *walker) assign(name string) {
	if loaderVars[name] {
		w.flag(RuleLoaderEnv, Medium, "sets "+name+", which changes what later commands load or run")
	}
}

func (w *walker) call(ce *syntax.CallExpr, c ctx) {
	for _, a := range ce.Assigns {
		w.nestedWord(a.Value, c)
		if a.Array != nil {
			w.nested(a.Array, c)
		}
		if a.Index != nil {
			w.nested(a.Index, c)
		}
		if a.Name != nil {
			w.assign(a.Name.Value)
		}
	}
	if len(ce.Args) == 0 {
		for _, a := range ce.Assigns { // x=/; … rm -rf "$x"
			w.remember(a)
		}
		return
	}
	start := len(w.v.Commands)
	if c.redirs.end > c.redirs.start {
		start = c.redirs.start // bash < <(curl …): the redirection's commands count too
	}
	for _, wd := range ce.Args {
		w.nestedWord(wd, c)
	}
	c.nested = span{start, len(w.v.Commands)}
	w.argv(fields(ce.Args, &w.k), c)
}

// remember records a shell variable assignment's value as a hint, or
// forgets the variable when its value is not literal.
func (w *walker) remember(a *syntax.Assign) {
	if a.Name == nil {
		return
	}
	name := a.Name.Value
	delete(w.k.vars, name)
	delete(w.k.arrays, name)
	switch {
	case a.Append || a.Index != nil:
	case a.Array != nil:
		var vals []field
		for _, e := range a.Array.Elems {
			if e.Index != nil || e.Value == nil {
				return
			}
			f := resolve(e.Value, &w.k)
			if !f.lit {
				return
			}
			vals = append(vals, field{val: f.val})
		}
		if w.k.arrays == nil {
			w.k.arrays = map[string][]field{}
		}
		w.k.arrays[name] = vals
	case a.Value != nil:
		if f := resolve(a.Value, &w.k); !strings.Contains(f.val, runtimeMark) {
			if w.k.vars == nil {
				w.k.vars = map[string]field{}
			}
			w.k.vars[name] = field{val: f.val}
		}
	}
}

func (w *walker) decl(d *syntax.DeclClause, c ctx) {
	args := make([]string, 0, len(d.Args))
	lit := true
	for _, a := range d.Args {
		w.nestedWord(a.Value, c)
		if a.Array != nil {
			w.nested(a.Array, c)
		}
		var s string
		if a.Name != nil {
			s = a.Name.Value
			if !a.Naked {
				w.assign(a.Name.Value)
				w.remember(a)
				s += "="
			}
		}
		if a.Value != nil {
			f := resolve(a.Value, &w.k)
			f.src = a.Value
			lit = lit && f.lit
			s += w.show(f)
		}
		args = append(args, s)
	}
	w.record(Command{Name: d.Variant.Value, Args: args, Literal: lit, Depth: c.depth})
}

func (w *walker) funcDecl(f *syntax.FuncDecl, c ctx) {
	names := f.Names
	if f.Name != nil {
		names = append([]*syntax.Lit{f.Name}, names...)
	}
	if w.funcs == nil {
		w.funcs = map[string]*syntax.Stmt{}
	}
	for _, n := range names {
		w.funcs[n.Value] = f.Body
		w.funcStack = append(w.funcStack, n.Value)
	}
	c.inPipe, c.background, c.pipe, c.stdin = false, false, nil, nil
	w.stmt(f.Body, c)
	w.funcStack = w.funcStack[:len(w.funcStack)-len(names)]
}

// record appends a command to the verdict, within maxCommands.
func (w *walker) record(cmd Command) bool {
	if len(w.v.Commands) >= maxCommands {
		w.flag(RuleTooComplex, Dangerous, fmt.Sprintf("more than %d commands", maxCommands))
		w.stopped = true
		return false
	}
	w.v.Commands = append(w.v.Commands, cmd)
	return true
}

// maxShowBytes caps the source text shown for one non-literal word.
const maxShowBytes = 512

// show renders a field for Command.Args and reasons: the value when literal,
// the source text otherwise.
func (w *walker) show(f field) string {
	if f.lit || f.src == nil || len(f.src.Parts) == 0 {
		return printable(f.val)
	}
	if n := f.src.End().Offset() - f.src.Pos().Offset(); n > maxShowBytes {
		// Printing a huge nested word at every level of its nesting would
		// make the walk quadratic; its value shape is enough.
		return printable(f.val)
	}
	if w.printer == nil {
		w.printer = syntax.NewPrinter(syntax.Minify(true))
	}
	var b strings.Builder
	if err := w.printer.Print(&b, f.src); err != nil {
		return printable(f.val)
	}
	return b.String()
}

// commandName is the base name of a literal command word, or the shown
// source of a non-literal one (with a literal ${x:-rm} default, that default).
func (w *walker) commandName(f field) string {
	if f.lit || !strings.Contains(f.val, runtimeMark) {
		if f.val == "" {
			return ""
		}
		if strings.Contains(f.val, "/") {
			return path.Base(f.val)
		}
		return f.val
	}
	return w.show(f)
}

// argv classifies one simple command, peeling wrappers off in a loop.
func (w *walker) argv(args []field, c ctx) {
	for hop := 0; len(args) > 0; hop++ {
		if hop >= maxWrapperChain {
			w.flag(RuleTooComplex, Dangerous, fmt.Sprintf("more than %d nested wrapper commands", maxWrapperChain))
			return
		}
		if !w.tickN(len(args)) {
			return
		}
		first := args[0]
		cl := &call{name: w.commandName(first), args: args[1:]}
		cmd := Command{Name: cl.name, Args: make([]string, len(cl.args)), Literal: first.lit, Depth: c.depth}
		for i, a := range cl.args {
			cmd.Args[i] = w.show(a)
			cmd.Literal = cmd.Literal && a.lit
		}
		if !w.record(cmd) {
			return
		}
		if !first.lit {
			w.dynamic(RuleDynamicCommand, "the command name "+cl.name+" is decided at run time", c.nested)
		}
		var ok bool
		args, c, ok = w.classify(cl, first, c)
		if !ok {
			return
		}
	}
}

// classify applies tiers and rules to one command and handles commands that
// run other code. It returns the wrapped command's argv when cl is a wrapper.
func (w *walker) classify(cl *call, first field, c ctx) ([]field, ctx, bool) {
	name := cl.name
	if w.g.dangerous[name] {
		w.flag(RuleConfigured, Dangerous, name+" is configured as dangerous")
	}
	for i := range argvRules {
		if reason, ok := argvRules[i].match(cl); ok {
			w.flag(argvRules[i].id, argvRules[i].risk, reason)
		}
	}
	if v, ok := w.aliases[name]; ok && first.lit && !slices.Contains(c.aliases, name) {
		w.expandAlias(name, v, cl.args, c)
		return nil, c, false
	}
	if body, ok := w.funcs[name]; ok && first.lit {
		recursive := slices.Contains(w.funcStack, name)
		if recursive && (c.inPipe || c.background) {
			w.flag(RuleForkBomb, Dangerous, "function "+name+" starts copies of itself in a pipeline or in the background")
		}
		if !recursive && len(cl.args) > 0 {
			// The body was classified where it was declared; walk it again
			// with this call's arguments as $1 … (f() { rm -rf "$1"; }; f /).
			saved := w.k.pos
			w.k.pos = append([]field{first}, cl.args...)
			w.funcStack = append(w.funcStack, name)
			cc := c
			cc.writes = nil
			w.stmt(body, cc)
			w.funcStack = w.funcStack[:len(w.funcStack)-1]
			w.k.pos = saved
		}
		return nil, c, false
	}
	if first.lit && strings.Contains(first.val, "/") {
		if w.isDownloaded(first.val) {
			w.dynamic(RuleDownloadExec, "runs "+first.val+", which this command line downloads")
		} else {
			w.ranWritten(first.val, "", c)
		}
	}
	tier, why := w.g.tierOf(cl)
	if tier > Safe && why == "" {
		why = name + " is not known to be read-only"
	}
	w.bump(tier, why)
	if c.xargs && tier > Safe {
		w.bump(Medium, name+" gets more arguments from xargs' standard input")
	}

	if len(c.writes) > 0 && !c.xargs && c.repl == "" {
		if text, ok := w.producedText(cl, c); ok {
			for _, f := range c.writes {
				w.wrote(f, &text)
			}
		}
	}
	if wr, ok := wrappers[name]; ok {
		return w.unwrap(cl, wr, c)
	}
	switch {
	case shells[name]:
		w.shell(cl, c)
	case name == "eval":
		w.eval(cl, c)
	case name == "source" || name == ".":
		if len(cl.args) > 0 {
			w.scriptFile(cl.args[0], name, c)
		}
	case name == "alias":
		w.alias(cl, c)
	case name == "find":
		w.findExec(cl, c)
	case name == "curl" || name == "wget":
		w.download(cl)
	case name == "tee":
		text, known := w.stdinText(c)
		for _, a := range cl.args {
			if !strings.HasPrefix(a.val, "-") && known {
				w.wrote(a.val, &text)
			} else if !strings.HasPrefix(a.val, "-") {
				w.wrote(a.val, nil)
			}
		}
	case name == "set":
		// set -- a b / set a b replaces the positional parameters.
		args := cl.args
		if len(args) > 0 && args[0].val == "--" {
			args = args[1:]
		} else if len(args) == 0 || strings.HasPrefix(args[0].val, "-") || strings.HasPrefix(args[0].val, "+") {
			break
		}
		pos0 := field{val: "sh"}
		if len(w.k.pos) > 0 {
			pos0 = w.k.pos[0]
		}
		w.k.pos = append([]field{pos0}, args...)
	case name == "unset":
		for _, a := range cl.args {
			delete(w.k.vars, a.val)
			delete(w.k.arrays, a.val)
		}
	case name == "trap":
		args := cl.args
		if len(args) > 0 && args[0].val == "--" {
			args = args[1:]
		}
		if len(args) >= 2 && args[0].val != "-" && !strings.HasPrefix(args[0].val, "-") {
			w.code(args[0], "trap", c)
		}
	case awks[name]:
		w.awk(cl, c)
	default:
		if codeFlags, long, ok := interpreter(name); ok {
			w.interp(cl, codeFlags, long, c)
		}
	}
	return nil, c, false
}

// --- wrappers ---

// wrapper describes a command that runs another command given as its
// remaining arguments.
type wrapper struct {
	shortArg string   // short options that take a value (-u root, -uroot)
	longArg  []string // long options that take a value as the next word (--user root)
	skip     int      // operands before the command (timeout DURATION, chroot DIR); noCommand: none
	assigns  bool     // NAME=VALUE operands before the command (env)
	code     byte     // short option whose value is a shell command string (su -c, flock -c)
	longCode string   // its long form (--command)
	noRun    string   // short options that mean no command is run (command -v, ionice -p)
	allCode  bool     // the remaining words are joined and run by sh -c (watch)
}

// noCommand marks a wrapper whose command only comes as a -c string, which
// may stand anywhere (su root -c '…', script -qc '…' /dev/null).
const noCommand = -1

// wrappers is the wrapper table. Options that take an optional value only
// when attached (nsenter -m[file], xargs -i[R]) need no entry.
var wrappers = map[string]wrapper{
	"env":     {shortArg: "uCS", longArg: []string{"unset", "chdir", "split-string"}, assigns: true, code: 'S', longCode: "split-string"},
	"nohup":   {},
	"timeout": {shortArg: "sk", longArg: []string{"signal", "kill-after"}, skip: 1},
	"nice":    {shortArg: "n", longArg: []string{"adjustment"}},
	"ionice":  {shortArg: "cn", longArg: []string{"class", "classdata"}, noRun: "p"},
	"xargs":   {shortArg: "adEILnPs", longArg: []string{"arg-file", "delimiter", "max-lines", "max-args", "max-procs", "max-chars", "process-slot-var"}},
	"sudo":    {shortArg: "CDghpRrTtUu", longArg: []string{"close-from", "chdir", "group", "host", "prompt", "role", "type", "command-timeout", "other-user", "user", "chroot"}, noRun: "lVvKk"},
	"doas":    {shortArg: "uC"},
	"setsid":  {},
	"stdbuf":  {shortArg: "ioe", longArg: []string{"input", "output", "error"}},
	"time":    {shortArg: "fo", longArg: []string{"format", "output"}},
	"command": {noRun: "vV"},
	"builtin": {},
	"exec":    {shortArg: "a"},
	"chroot":  {longArg: []string{"userspec", "groups"}, skip: 1},
	"nsenter": {shortArg: "tSG", longArg: []string{"target", "setuid", "setgid"}},
	"unshare": {shortArg: "RwSG", longArg: []string{"root", "wd", "setuid", "setgid", "propagation", "setgroups", "map-user", "map-group", "map-users", "map-groups"}},
	"busybox": {},
	"toybox":  {},
	"flock":   {shortArg: "wEc", longArg: []string{"timeout", "conflict-exit-code", "command"}, skip: 1, code: 'c', longCode: "command"},
	"watch":   {shortArg: "nqd", longArg: []string{"interval", "equexit", "differences"}, allCode: true},
	"taskset": {skip: 1, noRun: "p"},
	"chrt":    {skip: 1, noRun: "p"},
	"su":      {shortArg: "cgGsw", longArg: []string{"command", "group", "supp-group", "shell", "whitelist-environment"}, code: 'c', longCode: "command", skip: noCommand},
	"runuser": {shortArg: "cgGsuw", longArg: []string{"command", "group", "supp-group", "shell", "user", "whitelist-environment"}, code: 'c', longCode: "command", skip: noCommand},
	"script":  {shortArg: "cEIOBTm", longArg: []string{"command", "echo", "log-in", "log-out", "log-io", "log-timing", "logging-format"}, code: 'c', longCode: "command", skip: noCommand},
	"strace":  {shortArg: "abeEIoOpPsSuX", longArg: []string{"output", "signal", "trace", "user"}},
	"ltrace":  {shortArg: "aAbDeEfFlnoOpsSuwX", longArg: []string{"output", "user"}},
}

// unwrap parses a wrapper's options and returns the command it runs.
func (w *walker) unwrap(cl *call, wr wrapper, c ctx) ([]field, ctx, bool) {
	args := cl.args
	if cl.name == "runuser" && slices.ContainsFunc(args, func(f field) bool { return f.val == "-u" || strings.HasPrefix(f.val, "--user") }) {
		wr.skip = 0 // runuser -u user [--] cmd args: a plain wrapper
	}
	if wr.skip == noCommand {
		w.codeOptions(cl, wr, c)
		return nil, c, false
	}
	i := 0
	for i < len(args) {
		a := args[i].val
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' || !args[i].lit {
			break
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasEq := strings.Cut(a[2:], "=")
			if !hasEq && slices.Contains(wr.longArg, name) && i+1 < len(args) {
				i++
				val = args[i].val
				if wr.longCode != "" && name == wr.longCode {
					w.shellCode(args[i], cl.name+" --"+name, c, nil)
				}
			} else if hasEq && wr.longCode != "" && name == wr.longCode {
				w.shellCode(field{val: val, lit: args[i].lit, src: args[i].src}, cl.name+" --"+name, c, nil)
			}
			if cl.name == "xargs" && (name == "replace" || name == "i") {
				c.repl = "{}"
				if hasEq {
					c.repl = val
				}
			}
			i++
			continue
		}
		for j := 1; j < len(a); j++ {
			ch := a[j]
			if strings.IndexByte(wr.noRun, ch) >= 0 {
				return nil, c, false
			}
			if cl.name == "xargs" && ch == 'i' {
				c.repl = "{}"
				if j+1 < len(a) {
					c.repl = a[j+1:]
				}
				break
			}
			if strings.IndexByte(wr.shortArg, ch) < 0 {
				continue
			}
			var val field
			if j+1 < len(a) {
				val = field{val: a[j+1:], lit: args[i].lit, src: args[i].src}
			} else if i+1 < len(args) {
				i++
				val = args[i]
			}
			if wr.code != 0 && ch == wr.code {
				w.shellCode(val, cl.name+" -"+string(ch), c, nil)
			}
			if cl.name == "xargs" && ch == 'I' {
				c.repl = val.val
			}
			break
		}
		i++
	}
	if wr.assigns {
		for i < len(args) {
			name, _, ok := strings.Cut(args[i].val, "=")
			if !ok || !isName(name) {
				break
			}
			w.assign(name)
			i++
		}
	}
	if wr.skip > len(args)-i {
		return nil, c, false // su user / script file: no command operand
	}
	i += wr.skip
	rest := args[i:]
	if cl.name == "flock" && len(rest) >= 2 && (rest[0].val == "-c" || rest[0].val == "--command") {
		w.shellCode(rest[1], cl.name+" -c", c, nil) // flock [opts] file -c cmd
		return nil, c, false
	}
	if wr.allCode && len(rest) > 0 {
		w.shellCode(joinFields(rest), cl.name, c, nil)
		return nil, c, false
	}
	if cl.name == "xargs" {
		c.xargs = true
		if len(rest) == 0 {
			return nil, c, false // xargs runs echo
		}
	}
	return rest, c, len(rest) > 0
}

// codeOptions finds a wrapper's -c / --command strings anywhere in its
// arguments.
func (w *walker) codeOptions(cl *call, wr wrapper, c ctx) {
	args := cl.args
	for i := 0; i < len(args); i++ {
		a := args[i].val
		switch {
		case a == "--":
			return
		case strings.HasPrefix(a, "--"+wr.longCode+"="):
			v := args[i]
			v.val = strings.TrimPrefix(a, "--"+wr.longCode+"=")
			w.shellCode(v, cl.name+" --"+wr.longCode, c, nil)
		case a == "--"+wr.longCode && i+1 < len(args):
			i++
			w.shellCode(args[i], cl.name+" --"+wr.longCode, c, nil)
		case len(a) > 1 && a[0] == '-' && a[1] != '-':
			for j := 1; j < len(a); j++ {
				if a[j] == wr.code {
					if j+1 < len(a) {
						v := args[i]
						v.val = a[j+1:]
						w.shellCode(v, cl.name+" -"+string(wr.code), c, nil)
					} else if i+1 < len(args) {
						i++
						w.shellCode(args[i], cl.name+" -"+string(wr.code), c, nil)
					}
					break
				}
				if strings.IndexByte(wr.shortArg, a[j]) >= 0 {
					if j+1 == len(a) {
						i++
					}
					break
				}
			}
		}
	}
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		ok := ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// joinFields joins words with spaces, as eval and sh -c of several words do.
func joinFields(fs []field) field {
	out := field{lit: true}
	vals := make([]string, len(fs))
	for i, f := range fs {
		vals[i] = f.val
		out.lit = out.lit && f.lit
	}
	out.val = strings.Join(vals, " ")
	if len(fs) == 1 {
		out.src = fs[0].src
	}
	return out
}

// shellCode handles code a new shell runs, with its positional parameters.
func (w *walker) shellCode(f field, what string, c ctx, pos []field) {
	saved := w.k.pos
	w.k.pos = pos
	w.code(f, what, c)
	w.k.pos = saved
}

// code handles a string that a command runs as shell code.
func (w *walker) code(f field, what string, c ctx) {
	switch {
	case !f.lit:
		w.dynamic(RuleDynamicCode, what+" runs code built at run time", c.nested)
	case c.repl != "" && strings.Contains(f.val, c.repl):
		w.dynamic(RuleDynamicCode, what+" runs code that contains run-time input ("+c.repl+")")
	default:
		cc := c
		cc.depth++
		cc.nested, cc.xargs, cc.repl = span{}, false, ""
		w.parse(f.val, cc, what)
	}
}

// --- shells and interpreters ---

// shells run their -c operand, their script operand, or their stdin.
var shells = map[string]bool{
	"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "ash": true,
	"yash": true, "rbash": true, "csh": true, "tcsh": true, "fish": true, "busybox-sh": true,
}

func (w *walker) shell(cl *call, c ctx) {
	hasC, stdinFlag := false, false
	var operand *field
	var rest []field // the operands after the -c string: $0, $1 …
	args := cl.args
	for i := 0; i < len(args); i++ {
		a := args[i].val
		if !args[i].lit {
			operand, rest = &args[i], args[i+1:]
			break
		}
		if a == "--" || a == "-" {
			if i+1 < len(args) {
				operand, rest = &args[i+1], args[i+2:]
			}
			break
		}
		if strings.HasPrefix(a, "--") {
			if a == "--rcfile" || a == "--init-file" {
				i++
			}
			continue
		}
		if len(a) > 1 && (a[0] == '-' || a[0] == '+') {
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'c':
					hasC = true
				case 's':
					stdinFlag = true
				case 'o', 'O':
					i++
				}
			}
			continue
		}
		operand, rest = &args[i], args[i+1:]
		break
	}
	switch {
	case hasC && operand != nil:
		w.shellCode(*operand, cl.name+" -c", c, rest)
	case hasC && c.xargs:
		w.dynamic(RuleDynamicCode, cl.name+" -c runs code read by xargs at run time")
	case hasC:
		// bash -c without an operand is an error.
	case operand != nil && !stdinFlag:
		w.scriptFile(*operand, cl.name, c)
	case c.xargs:
		w.dynamic(RuleSourceDynamic, cl.name+" runs a script named by xargs' standard input")
	default:
		w.stdinProgram(cl.name, true, c)
	}
}

// stdinProgram handles a shell or interpreter that reads its program from
// standard input.
func (w *walker) stdinProgram(name string, isShell bool, c ctx) {
	switch {
	case c.stdin != nil:
		var t field
		switch c.stdin.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			t = heredocText(c.stdin, &w.k)
			t.src = c.stdin.Hdoc
		case syntax.WordHdoc:
			t = resolve(c.stdin.Word, &w.k)
			t.src = c.stdin.Word
		default: // < file
			f := resolve(c.stdin.Word, &w.k)
			f.src = c.stdin.Word
			cc := c
			cc.stdin = nil
			w.scriptFile(f, name, cc)
			return
		}
		if isShell {
			w.code(t, name+" here-document", c)
		} else {
			w.inlineProgram(name, t, c)
		}
	case c.pipe != nil:
		w.dynamic(RulePipeToShell, name+" runs a program read from a pipe", *c.pipe, c.nested)
	default:
		w.bump(Medium, name+" reads commands from standard input")
	}
}

// scriptFile handles a file that a shell, interpreter or source runs.
func (w *walker) scriptFile(f field, who string, c ctx) {
	switch v := f.val; {
	case !f.lit:
		w.dynamic(RuleSourceDynamic, who+" runs "+w.show(f)+", which only exists at run time", c.nested)
	case v == "-" || v == "/dev/stdin" || v == "/proc/self/fd/0" || v == "/dev/fd/0":
		_, _, interp := interpreter(who)
		w.stdinProgram(who, !interp && !awks[who], c)
	case strings.HasPrefix(v, "/dev/fd/") || strings.HasPrefix(v, "/proc/self/fd/"):
		w.dynamic(RuleSourceDynamic, who+" runs "+v+", an open file whose content only exists at run time")
	case w.isDownloaded(v):
		w.dynamic(RuleDownloadExec, who+" runs "+v+", which this command line downloads")
	case w.ranWritten(v, who, c):
	default:
		w.flag(RuleScriptFile, Medium, who+" runs "+v+", whose content the guard cannot see")
	}
}

func (w *walker) eval(cl *call, c ctx) {
	if len(cl.args) > 0 {
		w.code(joinFields(cl.args), "eval", c)
	}
}

func (w *walker) alias(cl *call, c ctx) {
	for _, a := range cl.args {
		if !a.lit {
			w.dynamic(RuleDynamicCode, "alias defined from a run-time value: "+w.show(a), c.nested)
			continue
		}
		name, val, ok := strings.Cut(a.val, "=")
		if !ok || strings.HasPrefix(name, "-") {
			continue // alias x prints; alias -p lists
		}
		if w.aliases == nil {
			w.aliases = map[string]string{}
		}
		w.aliases[name] = val
		cc := c
		cc.depth++
		cc.aliases = append(slices.Clip(c.aliases), name)
		w.parse(val, cc, "alias "+name)
	}
}

// expandAlias classifies a call of an alias: its value followed by the
// call's arguments.
func (w *walker) expandAlias(name, val string, args []field, c ctx) {
	c.depth++
	c.aliases = append(slices.Clip(c.aliases), name)
	f := w.parseFile(val, c, "alias "+name)
	if f == nil || len(f.Stmts) == 0 {
		return
	}
	w.stmts(f.Stmts[:len(f.Stmts)-1], c)
	last := f.Stmts[len(f.Stmts)-1]
	ce, ok := last.Cmd.(*syntax.CallExpr)
	if !ok || len(ce.Args) == 0 || len(last.Redirs) > 0 || last.Background {
		w.stmt(last, c)
		return
	}
	start := len(w.v.Commands)
	for _, wd := range ce.Args {
		w.nestedWord(wd, c)
	}
	c.nested = span{start, len(w.v.Commands)}
	w.argv(append(fields(ce.Args, &w.k), args...), c)
}

// findExec classifies the commands of find -exec/-execdir/-ok/-okdir.
func (w *walker) findExec(cl *call, c ctx) {
	args := cl.args
	for i := 0; i < len(args); i++ {
		switch args[i].val {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		j := i + 1
		for j < len(args) && args[j].val != ";" && args[j].val != "+" {
			j++
		}
		if j > i+1 {
			cc := c
			cc.repl = "{}"
			w.argv(args[i+1:j], cc)
		}
		i = j
	}
}

// interpreters run a program given with a code flag, a script operand, or
// stdin. codeFlags are short flags whose value is the program.
var interpreters = [...]struct {
	prefix    string
	codeFlags string
	long      []string
}{
	{"python", "c", nil},
	{"pypy", "c", nil},
	{"perl", "eE", nil},
	{"ruby", "e", nil},
	{"node", "ep", []string{"eval", "print"}},
	{"nodejs", "ep", []string{"eval", "print"}},
	{"deno", "", nil},
	{"bun", "e", []string{"eval", "print"}},
	{"php", "r", nil},
	{"lua", "e", nil},
	{"luajit", "e", nil},
	{"tclsh", "", nil},
	{"Rscript", "e", nil},
	{"osascript", "e", nil},
}

// interpreter reports whether name is an interpreter (python, python3,
// python3.12, perl5.36 …) and its code flags.
func interpreter(name string) (string, []string, bool) {
	for _, it := range interpreters {
		rest, ok := strings.CutPrefix(name, it.prefix)
		if !ok {
			continue
		}
		if rest == "" || rest[0] >= '0' && rest[0] <= '9' || rest[0] == '.' || rest[0] == '-' {
			return it.codeFlags, it.long, true
		}
	}
	return "", nil, false
}

// interpValueFlags are interpreter options that take the next word as value
// without it being a program (python -W arg, -X opt, node -r module).
const interpValueFlags = "WXrIM"

func (w *walker) interp(cl *call, codeFlags string, long []string, c ctx) {
	var codes []field
	args := cl.args
	for i := 0; i < len(args); i++ {
		a := args[i].val
		if !args[i].lit && len(codes) == 0 {
			w.scriptFile(args[i], cl.name, c)
			return
		}
		if a == "-" {
			break
		}
		if a == "--" {
			if i+1 < len(args) && len(codes) == 0 {
				w.scriptFile(args[i+1], cl.name, c)
				return
			}
			break
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasEq := strings.Cut(a[2:], "=")
			if slices.Contains(long, name) {
				if hasEq {
					codes = append(codes, field{val: val, lit: args[i].lit, src: args[i].src})
				} else if i+1 < len(args) {
					i++
					codes = append(codes, args[i])
				}
			}
			continue
		}
		if len(a) > 1 && a[0] == '-' {
			if strings.HasPrefix(a, "-m") && strings.HasPrefix(cl.name, "py") {
				w.bump(Medium, cl.name+" runs a module, whose content the guard cannot see")
				return
			}
			for j := 1; j < len(a); j++ {
				ch := a[j]
				if strings.IndexByte(codeFlags, ch) >= 0 {
					if j+1 < len(a) {
						codes = append(codes, field{val: a[j+1:], lit: args[i].lit, src: args[i].src})
					} else if i+1 < len(args) {
						i++
						codes = append(codes, args[i])
					}
					break
				}
				if strings.IndexByte(interpValueFlags, ch) >= 0 {
					if j+1 == len(a) {
						i++
					}
					break
				}
			}
			continue
		}
		if len(codes) == 0 {
			w.scriptFile(args[i], cl.name, c)
			return
		}
		break // the rest are the program's arguments
	}
	if len(codes) == 0 {
		w.stdinProgram(cl.name, false, c)
		return
	}
	for _, code := range codes {
		w.inlineProgram(cl.name, code, c)
	}
}

// socketWords and execWords mark a program that connects a socket to a
// shell: the shape of every reverse-shell one-liner.
var (
	socketWords = [...]string{"socket", "fsockopen", "TCPSocket", "net.connect", "net.Socket", "require('net')", "require(\"net\")", "/dev/tcp/", "IO::Socket"}
	execWords   = [...]string{"dup2", "subprocess", "pty.spawn", "/bin/sh", "/bin/bash", "exec", "spawn", "system", "popen", "child_process", "proc_open", "shell_exec", "pty"}
)

// inlineProgram skims a program given to an interpreter inline. It is only
// pattern matching; the program's behaviour is decided when it runs.
func (w *walker) inlineProgram(name string, code field, c ctx) {
	if !code.lit {
		w.dynamic(RuleDynamicCode, name+" runs a program built at run time", c.nested)
		return
	}
	w.flag(RuleInlineProgram, Medium, name+" runs an inline program; the guard only checks it for a few patterns")
	sock, exe := false, false
	for _, s := range socketWords {
		if strings.Contains(code.val, s) {
			sock = true
			break
		}
	}
	for _, s := range execWords {
		if strings.Contains(code.val, s) {
			exe = true
			break
		}
	}
	if sock && exe {
		w.flag(RuleReverseShell, Dangerous, name+" program connects a socket to a process")
	}
	if credentialText(code.val) {
		w.flag(RuleCredentialRead, Dangerous, name+" program mentions a secret file")
	}
	// Commands the program hands to a shell or exec, as far as they are
	// literal: os.system("rm -rf /"), subprocess.call(["rm", "-rf", "/"]).
	for _, cmd := range programCommands(code.val) {
		cc := c
		cc.depth++
		cc.nested, cc.pipe, cc.stdin = span{}, nil, nil
		if cc.depth > w.g.maxDepth {
			break
		}
		saved := w.k.pos
		w.k.pos = nil
		if f := w.parseQuiet(cmd); f != nil {
			w.stmts(f.Stmts, cc)
		}
		w.k.pos = saved
	}
}

// maxProgramCommands caps the command strings taken from one inline program.
const maxProgramCommands = 32

// execCalls are the calls through which a program runs a command string or
// argument list.
var execCalls = [...]string{
	"system(", "system ", "popen(", "Popen(", "call(", "run(", "check_output(", "check_call(",
	"exec(", "exec ", "execSync(", "spawn(", "spawnSync(", "shell_exec(", "passthru(", "proc_open(",
}

// programCommands extracts the literal command strings a program passes to
// its exec calls, joining argument lists with spaces, plus backtick strings.
func programCommands(src string) []string {
	var out []string
	for _, call := range execCalls {
		for off := 0; len(out) < maxProgramCommands; {
			i := strings.Index(src[off:], call)
			if i < 0 {
				break
			}
			off += i + len(call)
			if s, ok := literalRun(src[off:]); ok {
				out = append(out, s)
			}
		}
	}
	for off := 0; len(out) < maxProgramCommands; {
		i := strings.IndexByte(src[off:], '`')
		if i < 0 {
			break
		}
		j := strings.IndexByte(src[off+i+1:], '`')
		if j < 0 {
			break
		}
		out = append(out, src[off+i+1:off+i+1+j])
		off += i + j + 2
	}
	return out
}

// literalRun reads `"a", 'b', "c"` (optionally inside [ or (, after spaces)
// at the start of s and returns "a b c".
func literalRun(s string) (string, bool) {
	s = strings.TrimLeft(s, " \t[(")
	var parts []string
	for len(s) > 0 && (s[0] == '"' || s[0] == '\'') {
		q := s[0]
		j := 1
		var b strings.Builder
		for j < len(s) && s[j] != q {
			if s[j] == '\\' && j+1 < len(s) {
				j++
			}
			b.WriteByte(s[j])
			j++
		}
		if j >= len(s) {
			break
		}
		parts = append(parts, b.String())
		s = strings.TrimLeft(s[j+1:], " \t")
		if !strings.HasPrefix(s, ",") {
			break
		}
		s = strings.TrimLeft(s[1:], " \t")
	}
	return strings.Join(parts, " "), len(parts) > 0
}

// --- downloads ---

// fetchers bring data from the network; what they fetch is unknown.
var fetchers = map[string]bool{
	"curl": true, "wget": true, "fetch": true, "aria2c": true, "http": true, "https": true, "lwp-download": true,
	"nc": true, "ncat": true, "netcat": true, "socat": true, "telnet": true, "openssl": true, "scp": true, "rsync": true, "ftp": true, "tftp": true,
}

// isDecoder reports a command that turns opaque data into text (and so
// hides a program from anyone reading the command line).
func isDecoder(c *Command) bool {
	has := func(flags ...string) bool {
		for _, a := range c.Args {
			if slices.Contains(flags, a) {
				return true
			}
			if len(a) > 1 && a[0] == '-' && a[1] != '-' {
				for _, f := range flags {
					if len(f) == 2 && f[0] == '-' && strings.IndexByte(a[1:], f[1]) >= 0 {
						return true
					}
				}
			}
		}
		return false
	}
	switch c.Name {
	case "base64", "base32", "basenc":
		return has("-d", "--decode", "-D")
	case "xxd":
		return has("-r", "-revert")
	case "openssl":
		return has("-d", "base64", "-base64", "enc")
	case "uudecode", "gunzip", "zcat", "bunzip2", "bzcat", "unxz", "xzcat", "zstdcat", "unzstd", "rev", "tac":
		return true
	case "gzip", "bzip2", "xz", "zstd":
		return has("-d", "--decompress")
	case "printf":
		return len(c.Args) > 0 && strings.Contains(c.Args[0], "\\")
	case "echo":
		return has("-e")
	}
	return false
}

// download records the file a curl or wget call writes.
func (w *walker) download(cl *call) {
	out := func(v string) {
		if v == "-" || v == "/dev/stdout" {
			return
		}
		if w.downloads == nil {
			w.downloads = map[string]bool{}
		}
		w.downloads[path.Clean(v)] = true
		w.downloads[path.Base(v)] = true
	}
	toStdout := false
	named := false
	args := cl.args
	for i := 0; i < len(args); i++ {
		a := args[i].val
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i].val
			}
			return ""
		}
		switch {
		case cl.name == "curl" && (a == "-o" || a == "--output"):
			named = true
			out(next())
		case cl.name == "curl" && strings.HasPrefix(a, "--output="):
			named = true
			out(strings.TrimPrefix(a, "--output="))
		case cl.name == "curl" && (a == "-O" || a == "--remote-name" || a == "--remote-name-all" || a == "-J"):
			w.anyDownload = true
		case cl.name == "wget" && (a == "-O" || a == "--output-document"):
			named = true
			if v := next(); v == "-" {
				toStdout = true
			} else {
				out(v)
			}
		case cl.name == "wget" && strings.HasPrefix(a, "--output-document="):
			named = true
			out(strings.TrimPrefix(a, "--output-document="))
		case len(a) > 2 && a[0] == '-' && a[1] != '-':
			// clusters: curl -sSLo file, wget -qO- / -qO file
			flag := byte('o')
			if cl.name == "wget" {
				flag = 'O'
			}
			if k := strings.IndexByte(a, flag); k > 0 {
				named = true
				if rest := a[k+1:]; rest != "" {
					if rest == "-" {
						toStdout = true
					} else {
						out(rest)
					}
				} else if v := next(); v == "-" {
					toStdout = true
				} else {
					out(v)
				}
			} else if cl.name == "curl" && strings.IndexByte(a, 'O') > 0 {
				w.anyDownload = true
			}
		}
	}
	if cl.name == "wget" && !named && !toStdout {
		w.anyDownload = true // wget saves under the URL's file name
	}
}

// wrote records a file the line writes, with its content when known.
func (w *walker) wrote(p string, text *string) {
	if p == "" || strings.Contains(p, runtimeMark) {
		return
	}
	if w.written == nil {
		w.written = map[string]*string{}
	}
	w.written[path.Clean(p)] = text
}

// ranWritten handles running p when this line wrote it: the content is
// classified when the guard saw it written (cat <<'EOF' > x.sh), otherwise
// running it is dynamic. It reports whether p was written.
func (w *walker) ranWritten(p, who string, c ctx) bool {
	text, ok := w.written[path.Clean(p)]
	if !ok {
		return false
	}
	if text == nil {
		w.dynamic(RuleSourceDynamic, cmp.Or(who, "the command line")+" runs "+p+", which this command line writes")
		return true
	}
	prog := field{val: *text, lit: true}
	runner := who
	if who == "" { // executed directly: the #! line picks the interpreter
		runner = "sh"
		if line, ok := strings.CutPrefix(*text, "#!"); ok {
			line, _, _ = strings.Cut(line, "\n")
			words := strings.Fields(line)
			if len(words) > 1 && path.Base(words[0]) == "env" {
				words = words[1:]
			}
			if len(words) > 0 {
				runner = path.Base(words[0])
			}
		}
	}
	_, _, interp := interpreter(runner)
	switch {
	case shells[runner] || runner == "source" || runner == ".":
		w.code(prog, runner+" "+p, c)
	case interp || awks[runner]:
		w.inlineProgram(runner, prog, c)
	default:
		w.flag(RuleScriptFile, Medium, runner+" runs "+p+", whose content the guard cannot see")
	}
	return true
}

// stdinText is the text of a here-document or here-string on stdin.
func (w *walker) stdinText(c ctx) (string, bool) {
	if c.stdin == nil {
		return "", false
	}
	var t field
	switch c.stdin.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		t = heredocText(c.stdin, &w.k)
	case syntax.WordHdoc:
		t = resolve(c.stdin.Word, &w.k)
		t.val += "\n"
	default:
		return "", false
	}
	return t.val, t.lit
}

// producedText is what a command writes to stdout, when the guard can know
// it: cat of a literal here-document, echo or printf of literal words.
func (w *walker) producedText(cl *call, c ctx) (string, bool) {
	switch cl.name {
	case "cat":
		if len(cl.args) == 0 || len(cl.args) == 1 && cl.args[0].val == "-" {
			return w.stdinText(c)
		}
	case "echo":
		args, nl := cl.args, "\n"
		if len(args) > 0 && args[0].val == "-n" {
			args, nl = args[1:], ""
		}
		f := joinFields(args)
		if f.lit && (len(args) == 0 || !strings.HasPrefix(args[0].val, "-")) {
			return f.val + nl, true
		}
	case "printf":
		if len(cl.args) == 1 && cl.args[0].lit && !strings.Contains(cl.args[0].val, "%") {
			var b strings.Builder
			ansiC(&b, cl.args[0].val) // printf's escapes are $'…''s
			return b.String(), true
		}
	}
	return "", false
}

// isDownloaded reports whether p may be a file downloaded earlier in the line.
func (w *walker) isDownloaded(p string) bool {
	if w.downloads[path.Clean(p)] || w.downloads[path.Base(p)] {
		return true
	}
	return w.anyDownload && (strings.HasPrefix(p, "./") || !strings.Contains(p, "/"))
}

// awks are the awk implementations; their program is the first operand.
var awks = map[string]bool{"awk": true, "gawk": true, "mawk": true, "nawk": true}

// awk skims an awk program: system(), pipes and output redirection can run
// commands or write files.
func (w *walker) awk(cl *call, c ctx) {
	args := cl.args
	for i := 0; i < len(args); i++ {
		a := args[i].val
		switch {
		case a == "--":
			if i+1 < len(args) {
				w.awkProgram(cl.name, args[i+1], c)
			}
			return
		case a == "-f" || a == "--file" || a == "-E" || a == "--exec":
			if i+1 < len(args) {
				w.scriptFile(args[i+1], cl.name, c)
			}
			return
		case a == "-F" || a == "-v" || a == "--assign" || a == "--field-separator" || a == "-i" || a == "--include":
			i++
		case strings.HasPrefix(a, "-") && len(a) > 1:
		default:
			w.awkProgram(cl.name, args[i], c)
			return
		}
	}
}

func (w *walker) awkProgram(name string, prog field, c ctx) {
	switch {
	case !prog.lit:
		w.dynamic(RuleDynamicCode, name+" runs a program built at run time", c.nested)
	case strings.Contains(prog.val, "system") || strings.Contains(prog.val, "|"):
		w.inlineProgram(name, prog, c)
	case strings.Contains(prog.val, ">"):
		w.bump(Medium, name+" program may write files")
	}
}
