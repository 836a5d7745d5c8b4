package guard

import (
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
	produced    map[int]string          // stdout of pipeline stages, by index in Verdict.Commands, when known
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
	w.redirected(t)
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

// redirected records a redirection's target file for Verdict.Redirects
// (file descriptor duplications return before it), within maxCommands.
func (w *walker) redirected(t field) {
	name := t.val
	if !t.lit && t.src != nil {
		name = w.show(t)
	}
	if name == "" || slices.Contains(w.v.Redirects, name) {
		return
	}
	if len(w.v.Redirects) >= maxCommands {
		w.flag(RuleTooComplex, Dangerous, fmt.Sprintf("more than %d redirections", maxCommands))
		w.stopped = true
		return
	}
	w.v.Redirects = append(w.v.Redirects, name)
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
	if text, ok := w.producedText(cl, c); ok && c.inPipe && !c.xargs && c.repl == "" {
		if w.produced == nil {
			w.produced = map[int]string{}
		}
		w.produced[len(w.v.Commands)-1] = text // what a later stage (xargs) reads
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
