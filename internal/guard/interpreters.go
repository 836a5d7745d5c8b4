package guard

// This file: shells and language interpreters that run code given inline, as
// a script operand or on standard input (bash -c, python -c, perl -e, awk …).

import (
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
