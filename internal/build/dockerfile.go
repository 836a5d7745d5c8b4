// Package build makes templates from a Dockerfile subset and from running
// sandboxes (commit). Every RUN of a build runs inside a sandhold sandbox
// made from the build's template so far, as the caller, through the
// dispatcher (exec.run: HALT, policy, the command guard, rate limits,
// audit), with the build's egress; its writable layer becomes the step's
// layer. Each step's layer is cached per owner under a key of the step and
// everything before it, so a rebuild re-runs only what changed.
//
// The subset: FROM (scratch, a template, or an image from an allowed
// registry), RUN (shell and exec forms), COPY and ADD from the uploaded
// context (ADD extracts a local tar archive; no URLs), ENV, ARG, WORKDIR,
// USER, LABEL, CMD and ENTRYPOINT (the template's start command); EXPOSE,
// VOLUME, STOPSIGNAL and HEALTHCHECK are accepted and ignored. Multi-stage
// builds, SHELL, ONBUILD, heredocs and COPY --from are refused by name.
package build

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/sandhold/sandhold/internal/fault"
)

// Caps of a Dockerfile, with their reasons.
const (
	// MaxDockerfile bounds the file read.
	MaxDockerfile = 1 << 20
	// maxInstructions bounds a build's steps (each RUN is a sandbox).
	maxInstructions = 256
	// maxExpansion bounds what variable substitution may make of one
	// argument.
	maxExpansion = 64 << 10
)

// Instruction is one parsed Dockerfile instruction.
type Instruction struct {
	// Cmd is the keyword, upper case.
	Cmd string
	// Rest is the text after the keyword and its flags (continuations
	// joined with a space).
	Rest string
	// JSON is set for the exec form (["a", "b"]); Args holds its words.
	JSON bool
	Args []string
	// Flags are --name=value options before the arguments.
	Flags map[string]string
	Line  int
}

// Parse reads a Dockerfile.
func Parse(src string) ([]Instruction, error) {
	if len(src) > MaxDockerfile {
		return nil, fault.New(fault.TooLarge, fmt.Sprintf("the Dockerfile is larger than %d bytes", MaxDockerfile))
	}
	var out []Instruction
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// Continuations: a trailing backslash joins the next line;
		// comment lines inside are dropped.
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			line = strings.TrimSuffix(line, `\`)
			for i+1 < len(lines) {
				i++
				next := strings.TrimSpace(lines[i])
				if next == "" || strings.HasPrefix(next, "#") {
					continue // comment and empty lines inside a continuation
				}
				line += " " + next
				break
			}
		}
		line = strings.TrimSuffix(line, `\`)
		kw, rest, _ := strings.Cut(line, " ")
		in := Instruction{Cmd: strings.ToUpper(kw), Line: start, Flags: map[string]string{}}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			flag, after, _ := strings.Cut(rest, " ")
			k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
			in.Flags[k] = v
			rest = strings.TrimSpace(after)
		}
		in.Rest = rest
		if strings.HasPrefix(rest, "[") {
			var words []string
			if err := json.Unmarshal([]byte(rest), &words); err == nil {
				in.JSON, in.Args = true, words
			}
		}
		if strings.Contains(rest, "<<") && (in.Cmd == "RUN" || in.Cmd == "COPY") && !in.JSON && heredoc(rest) {
			return nil, lineErr(in, "heredocs are not supported")
		}
		if len(out) >= maxInstructions {
			return nil, fault.New(fault.TooLarge, fmt.Sprintf("a Dockerfile has at most %d instructions", maxInstructions))
		}
		out = append(out, in)
	}
	if len(out) == 0 {
		return nil, fault.New(fault.Invalid, "the Dockerfile has no instructions")
	}
	return out, nil
}

// heredoc says whether rest starts a heredoc (<<EOF, <<-EOF).
func heredoc(rest string) bool {
	i := strings.Index(rest, "<<")
	r := strings.TrimPrefix(rest[i+2:], "-")
	return r != "" && (unicode.IsLetter(rune(r[0])) || r[0] == '"' || r[0] == '\'')
}

func lineErr(in Instruction, msg string) error {
	return fault.New(fault.Invalid, fmt.Sprintf("Dockerfile line %d (%s): %s", in.Line, in.Cmd, msg))
}

// words splits s like a shell splits a simple command line: blanks
// separate words, single and double quotes group, a backslash escapes the
// next character (inside double quotes too). No expansion.
func words(s string) ([]string, error) {
	var out []string
	var b strings.Builder
	inWord := false
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			inWord = true
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, b.String())
				b.Reset()
				inWord = false
			}
		default:
			b.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fault.New(fault.Invalid, "an unterminated quote")
	}
	if inWord {
		out = append(out, b.String())
	}
	return out, nil
}

// expand substitutes $NAME, ${NAME}, ${NAME:-word} and ${NAME:+word} from
// vars (a missing name is empty); \$ is a literal dollar.
func expand(s string, vars map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if b.Len() > maxExpansion {
			return "", fault.New(fault.TooLarge, "a variable substitution grew too large")
		}
		c := s[i]
		if c == '\\' && i+1 < len(s) && s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		if s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fault.New(fault.Invalid, "an unterminated ${")
			}
			body := s[i+2 : i+end]
			name, word, op := body, "", ""
			if j := strings.Index(body, ":-"); j >= 0 {
				name, word, op = body[:j], body[j+2:], "-"
			} else if j := strings.Index(body, ":+"); j >= 0 {
				name, word, op = body[:j], body[j+2:], "+"
			}
			v, ok := vars[name]
			switch op {
			case "-":
				if !ok || v == "" {
					v = word
				}
			case "+":
				if ok && v != "" {
					v = word
				} else {
					v = ""
				}
			}
			b.WriteString(v)
			i += end
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || unicode.IsLetter(rune(s[j])) || (j > i+1 && unicode.IsDigit(rune(s[j])))) {
			j++
		}
		if j == i+1 {
			b.WriteByte(c)
			continue
		}
		b.WriteString(vars[s[i+1:j]])
		i = j - 1
	}
	return b.String(), nil
}

// keyValues reads ENV, LABEL and ARG arguments: k=v pairs (quoted as a
// shell would), or the legacy "ENV key value with spaces".
func keyValues(in Instruction, vars map[string]string, legacy bool) ([][2]string, error) {
	ws, err := words(in.Rest)
	if err != nil {
		return nil, lineErr(in, err.Error())
	}
	if len(ws) == 0 {
		return nil, lineErr(in, "needs arguments")
	}
	if legacy && !strings.Contains(ws[0], "=") {
		_, v, _ := strings.Cut(in.Rest, " ")
		val, err := expand(strings.TrimSpace(v), vars)
		if err != nil {
			return nil, lineErr(in, err.Error())
		}
		return [][2]string{{ws[0], val}}, nil
	}
	var out [][2]string
	for _, w := range ws {
		k, v, ok := strings.Cut(w, "=")
		if k == "" || (!ok && in.Cmd != "ARG") {
			return nil, lineErr(in, fmt.Sprintf("%q is not key=value", w))
		}
		val, err := expand(v, vars)
		if err != nil {
			return nil, lineErr(in, err.Error())
		}
		if !ok {
			val = "\x00" // an ARG without a default
		}
		out = append(out, [2]string{k, val})
	}
	return out, nil
}
