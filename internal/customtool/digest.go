package customtool

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Caps on what an approval shows of a plan: it is kept with the approval
// (in memory, or the cluster's database).
const (
	maxPlanSteps = 256  // steps shown, nested ones included
	maxPlanBytes = 4096 // bytes of one step's rendered arguments or target
)

// decodeExact decodes JSON keeping numbers exact (json.Number): a custom
// tool passes 123456789012345678901234567890 on as written, not as the
// nearest float64.
func decodeExact(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value")
	}
	return nil
}

// selfDigest is the digest of what c runs, apart from the custom tools it
// calls: its name, declared risk, input schema and every step's id, tool
// and arguments template (maps encode with sorted keys, so a template
// written with other whitespace or key order digests alike).
func selfDigest(c *compiled) string {
	h := sha256.New()
	put := func(s string) {
		_, _ = io.WriteString(h, s)
		_, _ = h.Write([]byte{0})
	}
	put("customtool/v1")
	put(c.def.Name)
	put(c.risk.String())
	var schema bytes.Buffer
	if err := json.Compact(&schema, c.schema.Raw); err != nil {
		schema.Reset()
		schema.Write(c.schema.Raw)
	}
	put(schema.String())
	put(boolText(c.def.Call != nil))
	for _, s := range c.steps {
		b, _ := json.Marshal(s.tmpl) // decoded JSON: cannot fail
		put(s.id)
		put(s.tool)
		put(string(b))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func boolText(b bool) string {
	if b {
		return "call"
	}
	return "steps"
}

// digest is the digest of the definition of name in force with those of
// the custom tools it calls, as far down as they go: what an approval of a
// call of name binds. "" for a tool that is not custom.
func (r *Registry) digest(name string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.defs[name]
	if !ok {
		return ""
	}
	return r.digestLocked(c, 0)
}

// digestLocked is digest for a caller that holds mu.
func (r *Registry) digestLocked(c *compiled, depth int) string {
	if depth > dispatch.MaxDepth {
		return "too-deep"
	}
	h := sha256.New()
	_, _ = io.WriteString(h, c.self)
	for _, ref := range c.refs() {
		if sub, ok := r.defs[ref]; ok {
			_, _ = io.WriteString(h, "\x00"+ref+"\x00"+r.digestLocked(sub, depth+1))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// planStep is one step of a plan: its rendered arguments (or, for a step
// built at run time, its template) capped for the approval.
func planStep(depth int, s compiledStep, args any, target string) dispatch.PlannedStep {
	p := dispatch.PlannedStep{Depth: depth, ID: s.id, Tool: s.tool, Late: s.late}
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte("null")
	}
	if len(b) > maxPlanBytes {
		b, _ = json.Marshal(clip(string(b)))
		p.Truncated = true
	}
	p.Arguments = b
	if len(target) > maxPlanBytes {
		target, p.Truncated = clip(target), true
	}
	p.Target = target
	return p
}

// clip cuts s to maxPlanBytes on a character boundary, marked with "…".
func clip(s string) string {
	if len(s) <= maxPlanBytes {
		return s
	}
	cut := maxPlanBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "") + "…"
}

// categoryLocked is the rate-limit category of a custom tool: its
// callees' when they all count against one, else Command (a custom tool
// is a script of calls). Callers hold mu.
func (r *Registry) categoryLocked(c *compiled, depth int) ratelimit.Category {
	var cat ratelimit.Category
	for _, ref := range c.refs() {
		var sub ratelimit.Category
		if sc, ok := r.defs[ref]; ok && depth < dispatch.MaxDepth {
			sub = r.categoryLocked(sc, depth+1)
		} else if t, ok := r.d.Tool(ref); ok {
			sub = ratelimit.ForTool(t.Name, t.Category)
		}
		switch {
		case sub == 0:
			return ratelimit.Command
		case cat == 0:
			cat = sub
		case cat != sub:
			return ratelimit.Command
		}
	}
	if cat == 0 {
		return ratelimit.Command
	}
	return cat
}
