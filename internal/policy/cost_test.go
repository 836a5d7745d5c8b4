package policy

import (
	"context"
	"testing"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// TestSetKeepsItsOwnCopy: the policy in force does not change when the
// document handed to Set is changed afterwards (effective hands out the
// document's maps without copying them).
func TestSetKeepsItsOwnCopy(t *testing.T) {
	p, err := Load(context.Background(), &memSettings{})
	if err != nil {
		t.Fatal(err)
	}
	doc := Default()
	rules := doc.Roles["agent"]
	rules.Tools = map[string]Action{"sandbox.list": ActAllow}
	doc.Roles["agent"] = rules
	if err := p.Set(context.Background(), doc); err != nil {
		t.Fatal(err)
	}
	rules.Tools["exec.run"] = ActDeny // after Set: must not be in force
	doc.Roles["viewer"] = Rules{AllowUpTo: "dangerous", ApproveUpTo: "dangerous", Flagged: ActAllow}
	tool := &dispatch.Tool{Name: "exec.run"}
	if got, why := p.Decide(context.Background(), agent, tool, dispatch.Assessment{Risk: guard.Medium}, nil); got != dispatch.Allow {
		t.Fatalf("agent exec after the caller changed its document: %v (%s)", got, why)
	}
	if got, _ := p.Decide(context.Background(), viewer, tool, dispatch.Assessment{Risk: guard.Medium}, nil); got != dispatch.Deny {
		t.Fatalf("viewer exec after the caller changed its document: %v", got)
	}
}

// TestDecideUnderTheDefaultPolicyIsCheap: Decide runs for every call; under
// the default policy (no tool or rate-limit entries) it builds no maps.
func TestDecideUnderTheDefaultPolicyIsCheap(t *testing.T) {
	p, err := Load(context.Background(), &memSettings{})
	if err != nil {
		t.Fatal(err)
	}
	tool := &dispatch.Tool{Name: "exec.run"}
	a := dispatch.Assessment{Risk: guard.Medium, Names: []string{"true"}}
	n := testing.AllocsPerRun(100, func() {
		if got, _ := p.Decide(context.Background(), agent, tool, a, nil); got != dispatch.Allow {
			t.Fatal(got)
		}
	})
	if n > 0 {
		t.Fatalf("Decide allocates %v times per call", n)
	}
}
