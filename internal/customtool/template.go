package customtool

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandhold/sandhold/internal/fault"
)

// Caps on templates: definitions come from agents.
const (
	maxTemplateBytes = 64 << 10 // one step's arguments template
	maxTemplateNodes = 10_000   // JSON values in one template
	maxFieldPath     = 16       // segments of {steps.id.a.b…}
	maxRendered      = 4 << 20  // bytes of one rendered argument document
)

// placeholder is {name} or {steps.id.field…}. A "{" right after "$" is
// shell syntax (${HOME}), not a placeholder.
var placeholder = regexp.MustCompile(`\{(steps\.[a-z][a-z0-9_]*(?:\.[A-Za-z0-9_]+){1,16}|[A-Za-z_][A-Za-z0-9_]*)\}`)

// ref is one placeholder found in a template.
type ref struct {
	arg   string   // {arg}
	step  string   // {steps.id.…}
	field []string // …field path
}

func parseRef(inner string) ref {
	if rest, ok := strings.CutPrefix(inner, "steps."); ok {
		parts := strings.Split(rest, ".")
		return ref{step: parts[0], field: parts[1:]}
	}
	return ref{arg: inner}
}

// findRefs returns every placeholder in s that is not preceded by "$".
func findRefs(s string) [][]int {
	var out [][]int
	for _, m := range placeholder.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > 0 && s[m[0]-1] == '$' {
			continue
		}
		out = append(out, m)
	}
	return out
}

// walkTemplate calls fn for every string value of a decoded template
// (object keys are not templated).
func walkTemplate(v any, fn func(s string) error, budget *int) error {
	*budget--
	if *budget < 0 {
		return fmt.Errorf("template has more than %d values", maxTemplateNodes)
	}
	switch x := v.(type) {
	case string:
		return fn(x)
	case []any:
		for _, e := range x {
			if err := walkTemplate(e, fn, budget); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range x {
			if err := walkTemplate(e, fn, budget); err != nil {
				return err
			}
		}
	}
	return nil
}

// templateRefs lists the placeholders of a template.
func templateRefs(tmpl any) ([]ref, error) {
	var refs []ref
	budget := maxTemplateNodes
	err := walkTemplate(tmpl, func(s string) error {
		for _, m := range findRefs(s) {
			refs = append(refs, parseRef(s[m[2]:m[3]]))
		}
		return nil
	}, &budget)
	return refs, err
}

// render fills a template: a string that is exactly one placeholder
// becomes the value with its JSON type; placeholders inside a longer
// string are replaced by the value's text (strings as they are, other
// values as JSON). Missing arguments render as null (whole) or "" (inside).
func render(tmpl any, args map[string]any, steps map[string]any) (any, error) {
	budget := maxTemplateNodes
	return renderValue(tmpl, args, steps, &budget)
}

func renderValue(v any, args, steps map[string]any, budget *int) (any, error) {
	*budget--
	if *budget < 0 {
		return nil, fmt.Errorf("template has more than %d values", maxTemplateNodes)
	}
	switch x := v.(type) {
	case string:
		ms := findRefs(x)
		if len(ms) == 1 && ms[0][0] == 0 && ms[0][1] == len(x) {
			return lookup(parseRef(x[ms[0][2]:ms[0][3]]), args, steps)
		}
		var b strings.Builder
		last := 0
		for _, m := range ms {
			b.WriteString(x[last:m[0]])
			val, err := lookup(parseRef(x[m[2]:m[3]]), args, steps)
			if err != nil {
				return nil, err
			}
			b.WriteString(textOf(val))
			last = m[1]
			if b.Len() > maxRendered {
				return nil, fault.New(fault.TooLarge, "rendered arguments are too large")
			}
		}
		b.WriteString(x[last:])
		return b.String(), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderValue(e, args, steps, budget)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := renderValue(e, args, steps, budget)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	b, _ := json.Marshal(v) // decoded JSON: cannot fail
	return string(b)
}

func lookup(r ref, args, steps map[string]any) (any, error) {
	if r.arg != "" {
		return args[r.arg], nil
	}
	v, ok := steps[r.step]
	if !ok {
		return nil, fault.Errorf(fault.Invalid, "step %q has not run", r.step)
	}
	for i, f := range r.field {
		if i >= maxFieldPath {
			break
		}
		switch x := v.(type) {
		case map[string]any:
			if v, ok = x[f]; !ok {
				return nil, fault.Errorf(fault.Invalid, "the result of step %q has no field %q", r.step, strings.Join(r.field[:i+1], "."))
			}
		case []any:
			n, err := strconv.Atoi(f)
			if err != nil || n < 0 || n >= len(x) {
				return nil, fault.Errorf(fault.Invalid, "the result of step %q has no element %q", r.step, strings.Join(r.field[:i+1], "."))
			}
			v = x[n]
		default:
			return nil, fault.Errorf(fault.Invalid, "the result of step %q has no field %q", r.step, strings.Join(r.field[:i+1], "."))
		}
	}
	return v, nil
}
