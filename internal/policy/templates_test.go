package policy

import (
	"testing"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// TestTemplateRules: which templates a key may make sandboxes from (or
// build FROM).
func TestTemplateRules(t *testing.T) {
	agent := Default().Roles["agent"]
	cases := []struct {
		name      string
		lists     Lists
		templates []string
		want      dispatch.Decision
	}{
		{"no rules: any", Lists{}, []string{"python:3.12"}, dispatch.Allow},
		{"denied", Lists{Deny: []string{"python:*"}}, []string{"python:3.12"}, dispatch.Deny},
		{"host denied", Lists{Deny: []string{"host"}}, []string{"host"}, dispatch.Deny},
		{"on the allow list", Lists{Allow: []string{"python-data:*"}}, []string{"python-data:3.12"}, dispatch.Allow},
		{"off the allow list", Lists{Allow: []string{"python-data:*"}}, []string{"node:20"}, dispatch.Deny},
		{"a digest is off an allow list of names", Lists{Allow: []string{"python-data:*"}}, []string{"sha256:" + string(make([]byte, 0))}, dispatch.Deny},
		{"needs approval", Lists{Approve: []string{"gpu-*:*"}}, []string{"gpu-torch:2"}, dispatch.NeedsApproval},
		{"a call that uses none", Lists{Allow: []string{"x:*"}}, nil, dispatch.Allow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := agent
			r.Templates = c.lists
			got, why := Evaluate(r, "sandbox.create", dispatch.Assessment{Risk: guard.Medium, Templates: c.templates})
			if got != c.want {
				t.Errorf("got %v (%s), want %v", got, why, c.want)
			}
		})
	}
	doc := Default()
	rules := doc.Roles["agent"]
	rules.Templates = Lists{Deny: []string{"[bad"}}
	doc.Roles["agent"] = rules
	if err := doc.Validate(); err == nil {
		t.Error("a bad template pattern was accepted")
	}
}
