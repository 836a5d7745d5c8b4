package guard

// This file: shells and language interpreters that run code given inline, as
// a script operand or on standard input (bash -c, python -c, perl -e, awk …).

import (
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

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

// interpreters run a program given with a code flag, a script operand, or
// stdin. codeFlags are short flags whose value is the program; valueFlags
// are short options whose value may be the next word without being a
// program (python -W arg, perl -I dir, ruby -r lib, node -r module); every
// other short option takes no value (python -I, -E, -u …).
var interpreters = [...]struct {
	prefix     string
	codeFlags  string
	long       []string
	valueFlags string
}{
	{"python", "c", nil, "WX"},
	{"pypy", "c", nil, "WX"},
	{"perl", "eE", nil, "I"},
	{"ruby", "e", nil, "IrCE"},
	{"node", "ep", []string{"eval", "print"}, "rC"},
	{"nodejs", "ep", []string{"eval", "print"}, "rC"},
	{"deno", "", nil, ""},
	{"bun", "e", []string{"eval", "print"}, "r"},
	{"php", "rBRE", nil, "dcz"},
	{"lua", "e", nil, "l"},
	{"luajit", "e", nil, "lj"},
	{"tclsh", "", nil, ""},
	{"Rscript", "e", nil, ""},
	{"osascript", "e", nil, "l"},
}

// interpreter reports whether name is an interpreter (python, python3,
// python3.12, perl5.36 …) and its code flags.
func interpreter(name string) (string, []string, bool) {
	codeFlags, long, _, ok := interpreterFlags(name)
	return codeFlags, long, ok
}

// interpreterFlags is interpreter with the value-taking options.
func interpreterFlags(name string) (codeFlags string, long []string, valueFlags string, ok bool) {
	for _, it := range interpreters {
		rest, found := strings.CutPrefix(name, it.prefix)
		if !found {
			continue
		}
		if rest == "" || rest[0] >= '0' && rest[0] <= '9' || rest[0] == '.' || rest[0] == '-' {
			return it.codeFlags, it.long, it.valueFlags, true
		}
	}
	return "", nil, "", false
}

func (w *walker) interp(cl *call, codeFlags string, long []string, c ctx) {
	_, _, valueFlags, _ := interpreterFlags(cl.name)
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
				if strings.IndexByte(valueFlags, ch) >= 0 {
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
// pattern matching (see programs.go); the program's behaviour is decided
// when it runs.
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
	l := langOf(name)
	found := programFindings(code.val, l)
	if l == langAwk {
		found = append(found, awkPipes(code.val)...)
	}
	w.programFindings(name, found, hasDecoder(code.val), c)
}

// programFindings assesses what a program runs: a literal command line like
// any other (at one more level of depth), literal code of the program's own
// language as a program again, and anything computed as dynamic.
func (w *walker) programFindings(name string, found []progFinding, decodes bool, c ctx) {
	cc := c
	cc.depth++
	cc.nested, cc.pipe, cc.stdin, cc.xargs, cc.repl = span{}, nil, nil, false, ""
	for _, f := range found {
		switch {
		case w.stopped:
			return
		case f.dynamic && f.code:
			w.dynamic(RuleDynamicCode, name+" program evaluates code built at run time ("+f.sink+")")
		case f.dynamic:
			w.dynamic(RuleDynamicCode, name+" program runs a command built at run time ("+f.sink+")")
		case cc.depth > w.g.maxDepth:
			w.flag(RuleDepthExceeded, Dangerous, fmt.Sprintf("%s program nested more than %d levels deep", name, w.g.maxDepth))
			return
		case f.code:
			w.inlineProgram(name, field{val: f.text, lit: true}, cc)
		default:
			saved := w.k.pos
			w.k.pos = nil
			if file := w.parseQuiet(f.text); file != nil {
				w.stmts(file.Stmts, cc)
			} else {
				w.bump(Medium, name+" program runs a command the guard cannot parse")
			}
			w.k.pos = saved
		}
		if f.dynamic && decodes {
			w.flag(RuleDecodeExec, Dangerous, name+" program decodes data and runs the result")
		}
	}
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
