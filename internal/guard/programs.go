package guard

// This file: what an inline program (python -c, perl -e, ruby -e, node -e,
// php -r, awk '…') hands to a shell or to its own eval. It is pattern
// matching over the program's text, not a parser of six languages: it finds
// the calls that run a command (system, popen, subprocess.*, execSync,
// backticks, qx{} …) or evaluate code (eval, exec, Function …), reads their
// first argument, and either assesses the literal command it names like any
// other command line, or — when that argument is computed (a variable, a
// concatenation, a decoded string) — calls the program dynamic.

import (
	"path"
	"strings"
)

// lang is an interpreter's language family: it picks the exec calls to look
// for and how strings are written.
type lang int

const (
	langOther lang = iota
	langPython
	langPerl
	langRuby
	langJS
	langPHP
	langAwk
	langLua
)

func langOf(name string) lang {
	switch {
	case awks[name]:
		return langAwk
	case strings.HasPrefix(name, "python"), strings.HasPrefix(name, "pypy"):
		return langPython
	case strings.HasPrefix(name, "perl"):
		return langPerl
	case strings.HasPrefix(name, "ruby"):
		return langRuby
	case strings.HasPrefix(name, "node"), strings.HasPrefix(name, "deno"), strings.HasPrefix(name, "bun"):
		return langJS
	case strings.HasPrefix(name, "php"):
		return langPHP
	case strings.HasPrefix(name, "lua"):
		return langLua
	}
	return langOther
}

// sink is a call through which a program runs something.
type sink struct {
	word string // the call's name; a dotted name must appear qualified (subprocess.run)
	code bool   // evaluates code of the program's own language (eval), not a command
}

// sinks per language. Generic names that other libraries use too (run,
// call, exec in JavaScript) only count qualified or where the module that
// runs commands is named (child_process).
var sinks = map[lang][]sink{
	langPython: {
		{word: "system"}, {word: "popen"}, {word: "Popen"}, {word: "check_output"}, {word: "check_call"},
		{word: "getoutput"}, {word: "getstatusoutput"}, {word: "subprocess.run"}, {word: "subprocess.call"},
		{word: "execv"}, {word: "execve"}, {word: "execl"}, {word: "execle"}, {word: "execlp"}, {word: "execlpe"},
		{word: "execvp"}, {word: "execvpe"}, {word: "spawnl"}, {word: "spawnlp"}, {word: "spawnv"}, {word: "spawnvp"},
		{word: "posix_spawn"}, {word: "posix_spawnp"}, {word: "pty.spawn"},
		{word: "exec", code: true}, {word: "eval", code: true},
	},
	langPerl: {
		{word: "system"}, {word: "exec"}, {word: "eval", code: true},
	},
	langRuby: {
		{word: "system"}, {word: "exec"}, {word: "spawn"}, {word: "popen"}, {word: "capture2"}, {word: "capture2e"},
		{word: "capture3"}, {word: "popen2"}, {word: "popen3"}, {word: "pipeline"},
		{word: "eval", code: true}, {word: "instance_eval", code: true}, {word: "class_eval", code: true}, {word: "module_eval", code: true},
	},
	langJS: {
		{word: "execSync"}, {word: "execFileSync"}, {word: "spawnSync"}, {word: "spawn"}, {word: "execFile"},
		{word: "eval", code: true}, {word: "Function", code: true},
	},
	langPHP: {
		{word: "system"}, {word: "exec"}, {word: "shell_exec"}, {word: "passthru"}, {word: "popen"}, {word: "proc_open"},
		{word: "pcntl_exec"}, {word: "eval", code: true}, {word: "assert", code: true}, {word: "create_function", code: true},
	},
	langAwk: {
		{word: "system"},
	},
	langLua: {
		{word: "os.execute"}, {word: "io.popen"}, {word: "loadstring", code: true}, {word: "load", code: true},
	},
	langOther: {
		{word: "system"}, {word: "system2"}, {word: "popen"}, {word: "exec"}, {word: "do shell script"},
		{word: "eval", code: true},
	},
}

// jsExec is child_process.exec, counted only in programs that load
// child_process (RegExp.prototype.exec is everywhere else).
var jsExec = sink{word: "exec"}

// decodeWords mark a program that decodes data: with a computed command,
// the command is hidden in the data (os.system(bytes.fromhex('…').decode())).
var decodeWords = [...]string{
	"b64decode", "fromhex", "unhexlify", "decode(", "decodestring", "base64", "atob(", "Buffer.from", "unpack",
	"pack(", "chr(", "fromCharCode", "rot13", "rot_13", "codecs", "[::-1]", "reverse", "hex2bin", "gzinflate",
	"gzuncompress", "zlib", "marshal", "pickle", "MIME::Base64", "decode_base64",
}

// maxProgramFindings caps the calls taken from one inline program.
const maxProgramFindings = 32

// runtimeArg stands for an element of an argument list that is computed at
// run time: a shell word whose value the guard does not know.
const runtimeArg = `"${RUNTIME_VALUE}"`

// progFinding is one call found in a program.
type progFinding struct {
	sink    string
	code    bool   // evaluates program code (text is that code)
	dynamic bool   // the argument is computed at run time
	text    string // the command line (or code) when literal
}

// programFindings lists the calls of src that run commands or code.
func programFindings(src string, l lang) []progFinding {
	// Calls are looked for everywhere, strings and comments included: a
	// lexer for six languages could be confused on purpose (a quote in a
	// regular expression) into hiding a call, while a call named inside a
	// string only costs a needless finding.
	var out []progFinding
	list := sinks[l]
	if l == langJS && strings.Contains(src, "child_process") {
		list = append(list[:len(list):len(list)], jsExec)
	}
	for _, s := range list {
		for off := 0; len(out) < maxProgramFindings; {
			i := strings.Index(src[off:], s.word)
			if i < 0 {
				break
			}
			at := off + i
			off = at + len(s.word)
			if !wordStart(src, at) {
				continue
			}
			rest, ok := callArgs(src[off:], l)
			if !ok {
				continue
			}
			f := progFinding{sink: s.word, code: s.code}
			switch text, state := readArgs(rest, l, s.code); state {
			case argNone:
				continue
			case argDynamic:
				f.dynamic = true
			default:
				f.text = text
			}
			out = append(out, f)
		}
	}
	if l == langPerl || l == langRuby || l == langPHP || l == langOther {
		out = append(out, backticks(src, maxProgramFindings-len(out))...)
	}
	if l == langPerl || l == langRuby {
		out = append(out, quotedCommands(src, l, maxProgramFindings-len(out))...)
	}
	return out
}

// wordStart reports whether a match at i starts a name: the byte before it
// is not part of an identifier or a perl/php variable sigil.
func wordStart(src string, i int) bool {
	if i == 0 {
		return true
	}
	c := src[i-1]
	return !isIdent(c) && c != '$' && c != '@' && c != '%'
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// callArgs returns the text after a sink's name when the name is called
// there: `(` in every language; in perl and ruby also an argument after a
// space or directly a string or variable (system "ls", system$_).
func callArgs(s string, l lang) (string, bool) {
	if s != "" && isIdent(s[0]) {
		return "", false // a longer name (systemd, exec_time)
	}
	t := strings.TrimLeft(s, " \t")
	if strings.HasPrefix(t, "(") {
		return t, true
	}
	if l != langPerl && l != langRuby && l != langOther {
		return "", false
	}
	if t == "" || strings.ContainsRune("=;,)}].:?|&<>!~*+-/\n#", rune(t[0])) {
		return "", false // assigned, compared, a hash key …
	}
	if len(t) == len(s) && !strings.ContainsRune(`"'$@{[`+"`", rune(t[0])) {
		return "", false
	}
	return t, true
}

type argState int

const (
	argNone argState = iota
	argLiteral
	argDynamic
)

// readArgs reads a call's arguments at the start of s: a string is a
// command line (system("ls -l")), several strings or a list are an argv
// (system("ls", "-l"), ["ls", "-l"]). Computed elements of an argv after the
// first become runtimeArg; a computed command string or program name makes
// the call dynamic. Trailing arguments that are not strings (options,
// output variables) are ignored.
func readArgs(s string, l lang, code bool) (string, argState) {
	s = strings.TrimLeft(s, " \t")
	if strings.HasPrefix(s, "(") {
		s = strings.TrimLeft(s[1:], " \t")
	}
	if s == "" || strings.ContainsRune(");\n", rune(s[0])) {
		return "", argNone
	}
	if code && s[0] == '{' {
		return "", argNone // perl eval { … } is a block, not a string
	}
	var words []string
	argv := false
	for i := 0; ; i++ {
		val, list, isList, rest, ok := readItem(s, l)
		switch {
		case !ok && i == 0:
			return "", argDynamic
		case !ok:
			return render(words, argv), argLiteral
		case isList:
			if len(list) == 0 || i == 0 && list[0] == runtimeArg {
				return "", argDynamic
			}
			words = append(words, list...)
			argv = true
		default:
			words = append(words, val)
			argv = argv || i > 0 // system("ls", "-l"): an argv
		}
		s = strings.TrimLeft(rest, " \t")
		if !strings.HasPrefix(s, ",") || code {
			break
		}
		s = strings.TrimLeft(s[1:], " \t\n")
	}
	return render(words, argv), argLiteral
}

func render(words []string, argv bool) string {
	if !argv {
		return strings.Join(words, " ")
	}
	q := make([]string, len(words))
	for i, w := range words {
		if w == runtimeArg {
			q[i] = w
		} else {
			q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// readItem reads one argument: a string literal, or a list of them ([…],
// qw(…), %w(…)). ok is false when the argument is an expression.
func readItem(s string, l lang) (val string, list []string, isList bool, rest string, ok bool) {
	switch {
	case strings.HasPrefix(s, "["):
		list, rest, ok = readList(s[1:], ']', l)
		return "", list, true, rest, ok
	case l == langPerl && strings.HasPrefix(s, "qw") && len(s) > 2 && !isIdent(s[2]):
		body, r, ok := delimited(s[2:])
		return "", strings.Fields(body), true, r, ok && notContinued(r, l)
	case l == langRuby && (strings.HasPrefix(s, "%w") || strings.HasPrefix(s, "%W")) && len(s) > 2:
		body, r, ok := delimited(s[2:])
		return "", strings.Fields(body), true, r, ok && notContinued(r, l)
	}
	val, rest, ok = readString(s, l)
	if !ok || !notContinued(rest, l) {
		return "", nil, false, "", false
	}
	return val, nil, false, rest, true
}

// readList reads string elements up to end; a computed element becomes
// runtimeArg.
func readList(s string, end byte, l lang) ([]string, string, bool) {
	var out []string
	for {
		s = strings.TrimLeft(s, " \t\n")
		if s == "" {
			return nil, "", false
		}
		if s[0] == end {
			return out, s[1:], true
		}
		if v, rest, ok := readString(s, l); ok && notContinued(rest, l) {
			out = append(out, v)
			s = rest
		} else {
			out = append(out, runtimeArg)
			s = skipExpr(s, end)
		}
		s = strings.TrimLeft(s, " \t\n")
		if strings.HasPrefix(s, ",") {
			s = s[1:]
		} else if s == "" || s[0] != end {
			return nil, "", false
		}
		if len(out) > maxProgramFindings {
			return nil, "", false
		}
	}
}

// skipExpr skips one list element that is an expression, up to the next
// comma or end at its own bracket level.
func skipExpr(s string, end byte) string {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '(' || c == '[' || c == '{':
			depth++
		case (c == ')' || c == ']' || c == '}') && depth > 0:
			depth--
		case depth == 0 && (c == ',' || c == end):
			return s[i:]
		case c == '"' || c == '\'':
			if j := strings.IndexByte(s[i+1:], c); j >= 0 {
				i += j + 1
			}
		}
	}
	return ""
}

// notContinued reports that nothing after a string makes it part of a
// larger expression ("rm " + x, "rm %s" % x, "{}".format(x), "rm " . $x,
// awk's juxtaposition "rm " x).
func notContinued(rest string, l lang) bool {
	t := strings.TrimLeft(rest, " \t")
	if t == "" {
		return true
	}
	switch t[0] {
	case '.', '+', '%', '*', '[':
		return false
	case ',', ')', ']', ';', '}', '\n', '|', '>', '#':
		return true
	}
	if l == langAwk {
		return false // "rm " dir concatenates
	}
	return true // perl's `or die`, python's `if …`
}

// readString reads a string literal at the start of s. Interpolating forms
// whose value is computed (f"{x}", `${x}`) are not literal.
func readString(s string, l lang) (string, string, bool) {
	if s == "" {
		return "", "", false
	}
	if l == langPython {
		p := 0
		fstr := false
		for p < len(s) && p < 2 && strings.IndexByte("rRbBuUfF", s[p]) >= 0 {
			fstr = fstr || s[p] == 'f' || s[p] == 'F'
			p++
		}
		if p > 0 && p < len(s) && (s[p] == '"' || s[p] == '\'') {
			v, rest, ok := quoted(s[p:], l)
			if fstr && strings.Contains(v, "{") {
				return "", "", false
			}
			return v, rest, ok
		}
	}
	switch {
	case s[0] == '"' || s[0] == '\'':
		return quoted(s, l)
	case s[0] == '\\' && len(s) > 1 && (s[1] == '"' || s[1] == '\''):
		// A string inside a string (exec("os.system(\"ls\")")): the
		// outer program's text shows its quotes escaped.
		end := strings.Index(s[2:], s[:2])
		if end < 0 {
			return "", "", false
		}
		return s[2 : 2+end], s[4+end:], true
	case s[0] == '`' && l == langJS:
		v, rest, ok := quoted(s, l)
		if strings.Contains(v, "${") {
			return "", "", false
		}
		return v, rest, ok
	case l == langPerl && (strings.HasPrefix(s, "qq") && len(s) > 2 && !isIdent(s[2]) ||
		s[0] == 'q' && len(s) > 1 && !isIdent(s[1]) && s[1] != ' ' && s[1] != ','):
		if strings.HasPrefix(s, "qq") {
			s = s[1:]
		}
		return delimited(s[1:])
	case l == langRuby && s[0] == '%' && len(s) > 2 && (s[1] == 'q' || s[1] == 'Q'):
		return delimited(s[2:])
	case l == langRuby && s[0] == '%' && len(s) > 1 && strings.IndexByte("({[<|!", s[1]) >= 0:
		return delimited(s[1:])
	}
	return "", "", false
}

// quoted reads a quoted string (triple quotes in python) with backslash
// escapes.
func quoted(s string, l lang) (string, string, bool) {
	q := s[0]
	if l == langPython && len(s) >= 6 && (strings.HasPrefix(s, `"""`) || strings.HasPrefix(s, `'''`)) {
		if j := strings.Index(s[3:], s[:3]); j >= 0 {
			return s[3 : 3+j], s[6+j:], true
		}
		return "", "", false
	}
	var b strings.Builder
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '\\' && j+1 < len(s):
			j++
			b.WriteByte(s[j])
		case c == q:
			return b.String(), s[j+1:], true
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

// delimited reads a perl/ruby quote-like body: q{…}, qx(…), %x[…], q|…|.
// Bracket delimiters nest.
func delimited(s string) (string, string, bool) {
	if s == "" {
		return "", "", false
	}
	open := s[0]
	closing := map[byte]byte{'{': '}', '(': ')', '[': ']', '<': '>'}[open]
	if closing == 0 {
		if isIdent(open) || open == ' ' || open == '\n' {
			return "", "", false
		}
		j := strings.IndexByte(s[1:], open)
		if j < 0 {
			return "", "", false
		}
		return s[1 : 1+j], s[2+j:], true
	}
	depth := 0
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case open:
			depth++
		case closing:
			depth--
			if depth == 0 {
				return s[1:j], s[j+1:], true
			}
		}
	}
	return "", "", false
}

// backticks are `cmd` strings outside other strings (perl, ruby, php).
func backticks(src string, max int) []progFinding {
	var out []progFinding
	for off := 0; len(out) < max; {
		i := strings.IndexByte(src[off:], '`')
		if i < 0 {
			break
		}
		at := off + i
		j := strings.IndexByte(src[at+1:], '`')
		if j < 0 {
			break
		}
		off = at + j + 2
		out = append(out, progFinding{sink: "backticks", text: src[at+1 : at+1+j]})
	}
	return out
}

// quotedCommands are perl's qx{…} and ruby's %x(…).
func quotedCommands(src string, l lang, max int) []progFinding {
	marker := "qx"
	if l == langRuby {
		marker = "%x"
	}
	var out []progFinding
	for off := 0; len(out) < max; {
		i := strings.Index(src[off:], marker)
		if i < 0 {
			break
		}
		at := off + i
		off = at + 2
		if l == langPerl && !wordStart(src, at) {
			continue
		}
		body, _, ok := delimited(src[off:])
		if !ok {
			continue
		}
		out = append(out, progFinding{sink: marker, text: body})
	}
	return out
}

// awkStringMask marks the bytes of an awk program inside "…" strings and
// /…/ regular expressions, so a | inside them ("|" as a field separator) is
// not taken for a pipe. A / starts a regular expression where an operand is
// expected (after an operator, a bracket or at a statement's start).
func awkStringMask(src string) []bool {
	mask := make([]bool, len(src)+1)
	var q byte
	prev := byte('{') // the last non-space byte outside strings
	for i := 0; i < len(src); i++ {
		c := src[i]
		if q != 0 {
			mask[i] = true
			if c == '\\' && i+1 < len(src) {
				i++
				mask[i] = true
			} else if c == q {
				q = 0
				prev = c
			}
			continue
		}
		switch {
		case c == '"':
			q = c
		case c == '/' && strings.IndexByte("({[,;!~&|=\n", prev) >= 0:
			q = c
		}
		if c != ' ' && c != '\t' {
			prev = c
		}
	}
	return mask
}

// hasDecoder reports a program that decodes data.
func hasDecoder(src string) bool {
	for _, w := range decodeWords {
		if strings.Contains(src, w) {
			return true
		}
	}
	return false
}

// awkPipes finds awk's command pipes: `"cmd" | getline`, `print … | "cmd"`.
// Text printed into a shell is that shell's program.
func awkPipes(src string) []progFinding {
	mask := awkStringMask(src)
	var out []progFinding
	for i := 0; i < len(src) && len(out) < maxProgramFindings; i++ {
		if src[i] != '|' || mask[i] || i+1 < len(src) && src[i+1] == '|' || i > 0 && src[i-1] == '|' {
			continue
		}
		after := strings.TrimLeft(src[i+1:], " \t")
		if strings.HasPrefix(after, "&") {
			after = strings.TrimLeft(after[1:], " \t") // gawk's |& coprocess
		}
		if strings.HasPrefix(after, "getline") {
			// The command is the expression before the pipe: one literal
			// string ("date" | getline d), or something computed.
			before := strings.TrimRight(src[:i], " \t")
			if strings.HasSuffix(before, `"`) {
				start := strings.LastIndexByte(before[:len(before)-1], '"')
				lead := strings.TrimRight(before[:max(start, 0)], " \t")
				if start >= 0 && (lead == "" || strings.IndexByte("({;\n=,!&|", lead[len(lead)-1]) >= 0) {
					out = append(out, progFinding{sink: "| getline", text: before[start+1 : len(before)-1]})
					continue
				}
			}
			out = append(out, progFinding{sink: "| getline", dynamic: true})
			continue
		}
		target, rest, ok := readString(after, langAwk)
		if !ok || !notContinued(rest, langAwk) {
			out = append(out, progFinding{sink: "|", dynamic: true})
			continue
		}
		if words := strings.Fields(target); len(words) > 0 && shells[path.Base(words[0])] && !strings.Contains(target, "-c") {
			// print … | "sh": what is printed is the program.
			printed, ok := awkPrinted(src[:i])
			if !ok {
				out = append(out, progFinding{sink: "| " + words[0], dynamic: true})
				continue
			}
			out = append(out, progFinding{sink: "| " + words[0], text: printed})
			continue
		}
		out = append(out, progFinding{sink: "|", text: target})
	}
	return out
}

// awkPrinted is the literal text of the print statement that ends at the
// end of s, when it prints one literal string.
func awkPrinted(s string) (string, bool) {
	stmt := s
	if k := strings.LastIndexAny(s, ";{}\n"); k >= 0 {
		stmt = s[k+1:]
	}
	stmt = strings.TrimSpace(stmt)
	for _, kw := range [...]string{"printf", "print"} {
		if rest, ok := strings.CutPrefix(stmt, kw); ok {
			rest = strings.TrimSpace(rest)
			if strings.HasPrefix(rest, "(") && strings.HasSuffix(rest, ")") {
				rest = strings.TrimSpace(rest[1 : len(rest)-1])
			}
			v, after, ok := readString(rest, langAwk)
			if ok && strings.TrimSpace(after) == "" {
				if kw == "print" {
					v += "\n"
				}
				return v, true
			}
			return "", false
		}
	}
	return "", false
}
