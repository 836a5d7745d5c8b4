package guard

// This file: what flows between the commands of one line — variable values,
// files written or downloaded and later run, text fed to standard input.

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

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

// maxFeedItems caps the known words xargs or find hand to a command; more
// known words than this make the line too complex (a payload must not hide
// behind a long list).
const maxFeedItems = 64

// xargsInput is how xargs reads its standard input.
type xargsInput struct {
	sep     string // the delimiter when split is set
	split   bool   // -0 / -d: split on sep instead of blanks
	argFile bool   // -a FILE: arguments from a file the guard cannot see
}

func (x *xargsInput) option(name, val string, hasVal bool) {
	switch name {
	case "null":
		x.sep, x.split = "\x00", true
	case "delimiter":
		if hasVal {
			var b strings.Builder
			ansiC(&b, val)
			x.sep, x.split = b.String(), b.Len() > 0
		}
	case "arg-file":
		x.argFile = true
	}
}

// xargsItems are the words xargs reads, when the guard knows its standard
// input: a here-string or here-document, or a pipe from one literal echo,
// printf or find that selects everything below its starting points.
func (w *walker) xargsItems(c ctx, x xargsInput) ([]string, bool) {
	if x.argFile {
		return nil, false
	}
	text, ok := w.stdinText(c)
	if !ok && c.stdin == nil && c.pipe != nil && c.pipe.end-c.pipe.start == 1 && c.pipe.end <= len(w.v.Commands) {
		if text, ok = w.produced[c.pipe.start]; !ok {
			text, ok = producedBy(&w.v.Commands[c.pipe.start])
		}
	}
	if !ok {
		return nil, false
	}
	var items []string
	if x.split {
		for _, it := range strings.Split(text, x.sep) {
			if it != "" {
				items = append(items, it)
			}
		}
		if n := len(items); n > 0 && x.sep != "\n" {
			items[n-1] = strings.TrimSuffix(items[n-1], "\n")
		}
	} else if c.repl != "" {
		// -I: one line per command, leading blanks removed.
		for _, line := range strings.Split(text, "\n") {
			if line = strings.TrimLeft(line, " \t"); line != "" {
				items = append(items, line)
			}
		}
	} else {
		items = xargsWords(text)
	}
	return items, true
}

// xargsWords splits text as xargs does by default: at blanks and newlines,
// with '…' and "…" quoting and backslash escapes.
func xargsWords(text string) []string {
	var out []string
	var b strings.Builder
	in, q := false, byte(0)
	for i := 0; i < len(text); i++ {
		ch := text[i]
		switch {
		case q != 0 && ch == q:
			q = 0
		case q != 0:
			b.WriteByte(ch)
		case ch == '\\' && i+1 < len(text):
			i++
			b.WriteByte(text[i])
			in = true
		case ch == '\'' || ch == '"':
			q, in = ch, true
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		default:
			b.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, b.String())
	}
	return out
}

// producedBy is the text a recorded command writes to stdout, when it is
// literal and the guard knows it.
func producedBy(cmd *Command) (string, bool) {
	if !cmd.Literal {
		return "", false
	}
	switch cmd.Name {
	case "echo":
		args := cmd.Args
		nl := "\n"
		if len(args) > 0 && args[0] == "-n" {
			args, nl = args[1:], ""
		}
		if len(args) > 0 && strings.HasPrefix(args[0], "-") {
			return "", false
		}
		return strings.Join(args, " ") + nl, true
	case "printf":
		if len(cmd.Args) == 0 {
			return "", false
		}
		format, args := cmd.Args[0], cmd.Args[1:]
		var b strings.Builder
		switch {
		case len(args) == 0 && !strings.Contains(format, "%"):
			ansiC(&b, format)
			return b.String(), true
		case format == `%s\n` || format == `%s\0` || format == `%s `:
			ansiC(&b, format[2:])
			return strings.Join(args, b.String()) + b.String(), true
		}
	case "find":
		starts, print0, everything := findSelects(cmd.Args)
		if !everything {
			return "", false
		}
		if print0 {
			return strings.Join(starts, "\x00") + "\x00", true
		}
		return strings.Join(starts, "\n") + "\n", true
	}
	return "", false
}

// xargsFeed classifies the command xargs runs with the words it reads: with
// -I, once per word (up to the cap) with the placeholder replaced; else once
// with every word appended. The command's own stdin is not xargs' input.
func (w *walker) xargsFeed(rest []field, items []string, c ctx) ([]field, ctx, bool) {
	if len(items) > maxFeedItems {
		w.flag(RuleTooComplex, Dangerous, fmt.Sprintf("xargs reads more than %d words", maxFeedItems))
		return nil, c, false
	}
	cc := c
	cc.stdin, cc.pipe, cc.xargs = nil, nil, false
	if repl := c.repl; repl != "" {
		cc.repl = ""
		if len(items) == 0 {
			return nil, c, false
		}
		for _, it := range items[1:] {
			w.argv(replaceFields(rest, repl, it), cc)
		}
		return replaceFields(rest, repl, items[0]), cc, true
	}
	out := append(rest[:len(rest):len(rest)], make([]field, len(items))...)
	for i, it := range items {
		out[len(rest)+i] = field{val: it, lit: true}
	}
	return out, cc, true
}
