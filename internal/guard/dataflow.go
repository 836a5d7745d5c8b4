package guard

// This file: what flows between the commands of one line — variable values,
// files written or downloaded and later run, text fed to standard input.

import (
	"cmp"
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
