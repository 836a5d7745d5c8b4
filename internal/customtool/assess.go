package customtool

// This file: a custom tool's risk and its assessment for one call.

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// potential is the highest risk a tool can run at, whatever its
// arguments: a custom tool's is the maximum over what it calls; a built-in
// that assesses its arguments (exec.run) can reach Dangerous.
func (r *Registry) potential(name string, depth int) guard.Risk {
	if depth > dispatch.MaxDepth {
		return guard.Dangerous
	}
	if c, ok := r.get(name); ok {
		risk := c.risk
		for _, ref := range c.refs() {
			risk = max(risk, r.potential(ref, depth+1))
		}
		return risk
	}
	t, ok := r.d.Tool(name)
	if !ok {
		return guard.Dangerous
	}
	return t.Ceiling()
}

// assess is a custom tool's Assessment for one call: its potential risk,
// raised and annotated by what each step's rendered arguments assess to
// (steps that use earlier results are assessed when they run), with the
// digest of the definitions that will run and the plan of what they will
// run, for an approval.
func (r *Registry) assess(name string, args map[string]any, depth int) dispatch.Assessment {
	a := dispatch.Assessment{Risk: r.potential(name, 0)}
	c, ok := r.get(name)
	if !ok || depth > dispatch.MaxDepth {
		a.Risk = guard.Dangerous
		return a
	}
	if depth == 0 {
		a.Digest = r.digest(name)
	}
	for _, s := range c.steps {
		if s.late {
			if len(a.Plan) < maxPlanSteps {
				a.Plan = append(a.Plan, planStep(depth, s, s.tmpl, ""))
			}
			// Arguments built from earlier results at run time: like the
			// guard's dynamic code, flagged when they reach a tool that
			// assesses its arguments (exec), since no one can see them now.
			if t, ok := r.d.Tool(s.tool); ok && (t.Assess != nil && !r.IsCustom(s.tool) || r.IsCustom(s.tool) && r.potential(s.tool, 0) >= guard.Dangerous) {
				a.Risk, a.Dynamic = guard.Dangerous, true
				a.Reasons = appendNew(a.Reasons, fmt.Sprintf("step %s runs %s with arguments built at run time from earlier steps", s.id, s.tool))
				a.Guard = a.Guard.Merge(&dispatch.GuardVerdict{Risk: guard.Dangerous, Dynamic: true})
			}
			continue
		}
		rendered, err := render(s.tmpl, args, nil)
		if err != nil {
			continue
		}
		var sub dispatch.Assessment
		if _, custom := r.get(s.tool); custom {
			m, _ := rendered.(map[string]any)
			sub = r.assess(s.tool, m, depth+1)
			if len(a.Plan) < maxPlanSteps {
				a.Plan = append(a.Plan, planStep(depth, s, rendered, ""))
			}
			a.Plan = append(a.Plan, sub.Plan[:min(len(sub.Plan), maxPlanSteps-len(a.Plan))]...)
		} else {
			t, ok := r.d.Tool(s.tool)
			if !ok {
				a.Risk = guard.Dangerous
				continue
			}
			raw, _ := json.Marshal(rendered)
			var targs any = json.RawMessage(raw)
			if t.Decode != nil {
				if targs, err = t.Decode(raw); err != nil {
					if len(a.Plan) < maxPlanSteps {
						a.Plan = append(a.Plan, planStep(depth, s, rendered, ""))
					}
					continue // the call will fail when it runs
				}
			}
			sub = t.AssessArgs(targs)
			if len(a.Plan) < maxPlanSteps {
				target := ""
				if t.Describe != nil {
					target = t.Describe(targs).Target
				}
				a.Plan = append(a.Plan, planStep(depth, s, rendered, target))
			}
		}
		a = a.Merge(sub)
	}
	if c.risk > a.Risk {
		a.Risk = c.risk
	}
	return a
}

func appendNew(a []string, b ...string) []string {
	for _, v := range b {
		if !slices.Contains(a, v) {
			a = append(a, v)
		}
	}
	return a
}

// potentialLocked is potential for a caller that holds mu.
func (r *Registry) potentialLocked(c *compiled) guard.Risk {
	var walk func(c *compiled, depth int) guard.Risk
	walk = func(c *compiled, depth int) guard.Risk {
		risk := c.risk
		if depth > dispatch.MaxDepth {
			return guard.Dangerous
		}
		for _, ref := range c.refs() {
			if sub, ok := r.defs[ref]; ok {
				risk = max(risk, walk(sub, depth+1))
				continue
			}
			if t, ok := r.d.Tool(ref); ok {
				risk = max(risk, t.Ceiling())
			} else {
				risk = guard.Dangerous
			}
		}
		return risk
	}
	return walk(c, 0)
}
