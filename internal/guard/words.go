package guard

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// maxBraceFields caps the fields one command's brace expansions may produce.
// `{1..9999999}` is a one-line memory bomb for a naive expander; real command
// lines need a handful. Beyond the cap the word counts as non-literal.
const maxBraceFields = 256

// maxBraceExps caps the brace expressions in one word before expansion is
// attempted; real words have one or two.
const maxBraceExps = 8

// braceCount counts the brace expressions in a word, nested ones included,
// stopping early once past the cap.
func braceCount(w *syntax.Word, n int) int {
	for _, p := range w.Parts {
		if n > maxBraceExps {
			return n
		}
		if b, ok := p.(*syntax.BraceExp); ok {
			n++
			for _, e := range b.Elems {
				n = braceCount(e, n)
			}
		}
	}
	return n
}

// runtimeMark stands in for the part of a word that only exists at run time
// ($(…), $((…)), an unknown variable). It is a byte no literal path contains,
// so a non-literal word never matches a literal pattern by accident.
const runtimeMark = "\x00"

// field is one resolved word: its value after quote removal, and whether it
// was fully literal. For non-literal words val is a best-effort shape: $HOME
// becomes "~", ${x:-dflt} becomes dflt, everything else runtimeMark.
type field struct {
	val string
	lit bool
	src *syntax.Word // the word it came from, for showing non-literal words
}

// known holds what the walker knows about parameter values. It only
// supplies hints for rules (a non-literal word stays non-literal), so a
// wrong guess can add a finding but never remove one.
type known struct {
	pos    []field            // $0, $1 … when known (sh -c '…' a b, f a b, set -- a b)
	vars   map[string]field   // scalars last assigned a literal value in this line
	arrays map[string][]field // arrays last assigned literal elements
}

// fields resolves words into fields, performing brace expansion and the
// multi-field expansions "$@" and "${a[@]}" when their values are known.
func fields(words []*syntax.Word, k *known) []field {
	out := make([]field, 0, len(words))
	budget := maxBraceFields
	for _, w := range words {
		if vals, ok := multiField(w, k); ok {
			for _, v := range vals {
				out = append(out, field{val: v.val, src: w})
			}
			continue
		}
		if !syntax.SplitBraces(w) {
			f := resolve(w, k)
			f.src = w
			out = append(out, f)
			continue
		}
		if braceCount(w, 0) > maxBraceExps {
			// {a,b}{a,b}… expands combinatorially and even producing the
			// first few words is expensive; treat it as run-time data.
			out = append(out, field{val: runtimeMark, src: w})
			continue
		}
		for bw, err := range expand.BracesSeq(nil, w) {
			if err != nil || budget <= 0 {
				out = append(out, field{val: runtimeMark, src: w})
				break
			}
			budget--
			f := resolve(bw, k)
			f.src = bw
			out = append(out, f)
		}
	}
	return out
}

// resolve removes quotes and escapes from a word as the shell would. pos are
// the positional parameters ($0, $1 …) when they are known, as in
// sh -c 'rm -rf "$1"' _ /.
func resolve(w *syntax.Word, k *known) field {
	if w == nil {
		return field{lit: true}
	}
	if len(w.Parts) == 1 { // fast path: a plain word without escapes
		if l, ok := w.Parts[0].(*syntax.Lit); ok && !strings.ContainsRune(l.Value, '\\') {
			return field{val: l.Value, lit: true}
		}
	}
	var b strings.Builder
	lit := true
	for _, p := range w.Parts {
		if !resolvePart(&b, p, false, k) {
			lit = false
		}
	}
	return field{val: b.String(), lit: lit}
}

// resolvePart appends the value of one word part and reports whether it was
// literal. inDq is true inside double quotes, where backslash only escapes
// $ ` " \ and newline.
func resolvePart(b *strings.Builder, p syntax.WordPart, inDq bool, k *known) bool {
	switch p := p.(type) {
	case *syntax.Lit:
		if inDq {
			unescapeDq(b, p.Value)
		} else {
			unescapeLit(b, p.Value)
		}
		return true
	case *syntax.SglQuoted:
		if p.Dollar {
			ansiC(b, p.Value)
		} else {
			b.WriteString(p.Value)
		}
		return true
	case *syntax.DblQuoted:
		lit := true
		for _, q := range p.Parts {
			if !resolvePart(b, q, true, k) {
				lit = false
			}
		}
		return lit
	case *syntax.ParamExp:
		if v, ok := stableParams[plainParam(p)]; ok {
			// $HOME is what ~ is, and the guard treats ~ as literal.
			b.WriteString(v)
			return true
		}
		b.WriteString(paramHint(p, k))
		return false
	case *syntax.ExtGlob:
		// A glob is expanded against the file system at run time like any
		// `*`; its text is as literal as the user wrote it.
		b.WriteString(p.Op.String())
		b.WriteString(p.Pattern.Value)
		b.WriteString(")")
		return true
	}
	// CmdSubst, ArithmExp, ProcSubst, BraceExp left unexpanded.
	b.WriteString(runtimeMark)
	return false
}

// multiField expands a word that is exactly "$@", "$*", "${a[@]}" or
// "${a[*]}" (quoted or not) into the known values.
func multiField(w *syntax.Word, k *known) ([]field, bool) {
	if k == nil || len(w.Parts) != 1 {
		return nil, false
	}
	part := w.Parts[0]
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		part = dq.Parts[0]
	}
	p, ok := part.(*syntax.ParamExp)
	if !ok || p.Param == nil || p.Excl || p.Length || p.Slice != nil || p.Repl != nil || p.Exp != nil || p.NestedParam != nil {
		return nil, false
	}
	if p.Index == nil {
		if (p.Param.Value == "@" || p.Param.Value == "*") && len(k.pos) > 0 {
			return k.pos[1:], true
		}
		return nil, false
	}
	if idx, ok := p.Index.(*syntax.Word); ok {
		if l := idx.Lit(); l == "@" || l == "*" {
			vals, ok := k.arrays[p.Param.Value]
			return vals, ok
		}
	}
	return nil, false
}

// stableParams are parameters the guard treats as literal, with the value
// it uses for them: they are as fixed as ~ and . are (the shell sets them),
// and "$HOME/bin/tool" must not count as a command built at run time.
var stableParams = map[string]string{"HOME": "~", "PWD": "."}

// plainParam is the name of a plain $name / ${name} expansion, or "".
func plainParam(p *syntax.ParamExp) string {
	if p.Param == nil || p.Excl || p.Length || p.Width || p.Index != nil || p.Slice != nil ||
		p.Repl != nil || p.Exp != nil || p.NestedParam != nil || p.Names != 0 || len(p.Modifiers) > 0 {
		return ""
	}
	return p.Param.Value
}

// paramHint is the best static guess of a parameter expansion's value.
func paramHint(p *syntax.ParamExp, k *known) string {
	if p.Param == nil || p.Excl || p.Length || p.Index != nil || p.Slice != nil || p.Repl != nil || p.NestedParam != nil {
		return runtimeMark
	}
	if n := plainParam(p); n != "" && k != nil {
		if len(n) == 1 && n[0] >= '0' && n[0] <= '9' {
			if i := int(n[0] - '0'); i < len(k.pos) {
				return k.pos[i].val
			}
			return runtimeMark
		}
		if v, ok := k.vars[n]; ok {
			return v.val
		}
	}
	if p.Exp != nil {
		switch p.Exp.Op {
		case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull:
			if f := resolve(p.Exp.Word, k); f.lit {
				return f.val
			}
		}
		return runtimeMark
	}
	return runtimeMark
}

// unescapeLit removes backslashes outside quotes: \x is x. (Backslash-newline
// pairs never reach here; the lexer drops them.)
func unescapeLit(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
}

// unescapeDq removes the backslashes that are special inside double quotes
// and in unquoted here-documents.
func unescapeDq(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
}

// ansiC decodes the body of a $'…' string.
func ansiC(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			width := 2
			switch e {
			case 'u':
				width = 4
			case 'U':
				width = 8
			}
			j := i + 1
			for j < len(s) && j < i+1+width && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if e == 'x' {
				b.WriteByte(byte(n)) //nolint:gosec // G115: at most 2 hex digits, <= 0xff
			} else if n <= utf8.MaxRune && utf8.ValidRune(rune(n)) {
				b.WriteRune(rune(n))
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 16)
			b.WriteByte(byte(n)) //nolint:gosec // G115: up to \777; bash keeps the low 8 bits too
			i = j - 1
		default: // \\ \' \" \? and unknown escapes
			if e != '\\' && e != '\'' && e != '"' && e != '?' {
				b.WriteByte('\\')
			}
			b.WriteByte(e)
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// heredocText returns the text a here-document feeds to its command, and
// whether it is literal: a quoted delimiter (<<'EOF') disables expansion, an
// unquoted one lets $x and $(…) in.
func heredocText(r *syntax.Redirect, k *known) field {
	if r.Hdoc == nil {
		return field{lit: true}
	}
	quoted := false
	if r.Word != nil {
		for _, p := range r.Word.Parts {
			switch p := p.(type) {
			case *syntax.SglQuoted, *syntax.DblQuoted:
				quoted = true
			case *syntax.Lit:
				if strings.ContainsRune(p.Value, '\\') {
					quoted = true
				}
			}
		}
	}
	var b strings.Builder
	lit := true
	for _, p := range r.Hdoc.Parts {
		l, ok := p.(*syntax.Lit)
		switch {
		case ok && quoted:
			b.WriteString(l.Value)
		case ok:
			unescapeDq(&b, l.Value)
		default:
			lit = false
			resolvePart(&b, p, true, k)
		}
	}
	return field{val: b.String(), lit: lit}
}
