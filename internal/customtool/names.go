package customtool

// This file: which names a custom tool may take, who may see and call one,
// and who hears of a redefinition.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
)

// OnRedefine sets fn to be told, after every change, the custom tools
// whose definition in force changed — redefined, deleted, unpublished, or
// calling one that was (the daemon voids their approvals). Set it once at
// start.
func (r *Registry) OnRedefine(fn func(names []string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.redefined = fn
}

// notify tells OnRedefine's fn about names and every tool that calls them.
// Callers do not hold mu.
func (r *Registry) notify(names ...string) {
	r.mu.RLock()
	fn := r.redefined
	all := r.dependentsLocked(names)
	r.mu.RUnlock()
	if fn != nil && len(all) > 0 {
		fn(all)
	}
}

// dependentsLocked is names and every custom tool that calls one of them,
// directly or through others. Callers hold mu.
func (r *Registry) dependentsLocked(names []string) []string {
	out := slices.Clone(names)
	for i := 0; i < len(out) && i < maxTools+len(names); i++ {
		for n, c := range r.defs {
			if !slices.Contains(out, n) && slices.Contains(c.refs(), out[i]) {
				out = append(out, n)
			}
		}
	}
	return out
}

// reservedLocked says whose name name is when a built-in has it in its
// dotted or flat (MCP) form, or another custom tool has its flat form;
// "" when it is free for def.Name's owner to take. Callers hold mu.
func (r *Registry) reservedLocked(name string) string {
	flat := dispatch.FlatName(name)
	for _, t := range r.d.Tools() {
		if t.Custom {
			continue
		}
		if t.Name == name || dispatch.FlatName(t.Name) == flat {
			return "built-in " + t.Name
		}
	}
	for other := range r.defs {
		if other != name && dispatch.FlatName(other) == flat {
			return "custom " + other
		}
	}
	for _, p := range r.pending {
		if p.Name != name && dispatch.FlatName(p.Name) == flat {
			return "custom " + p.Name
		}
	}
	return ""
}

// dropShadowingLocked takes out of service every custom tool whose name a
// built-in registered since has (in either form); the definitions stay
// stored, pending. Callers hold mu.
func (r *Registry) dropShadowingLocked() []string {
	var dropped []string
	for name, c := range r.defs {
		if !strings.HasPrefix(r.reservedLocked(name), "built-in ") {
			continue
		}
		if t, ok := r.d.Tool(name); ok && t.Custom {
			r.d.Unregister(name)
		}
		delete(r.defs, name)
		r.pending = append(r.pending, c.def)
		dropped = append(dropped, name)
	}
	return dropped
}

// unavailable is the one answer for a name a caller may not take: the same
// whether a built-in, a tool the caller can see or one it cannot holds it
// (or its flat form), so the answer does not tell that another key's
// unpublished tool exists.
func unavailable(name string) error {
	return fault.InvalidField("name", fmt.Sprintf("the name %q is not available (a built-in's or another tool's, in its dotted or MCP form); choose another", name))
}

// visibleTo reports whether caller may call c: its owner, or anyone once
// it is published. An admin is no exception: an unpublished tool of
// another key is code the admin has not vetted, and a call of it would
// run with the admin's rights (the admin reviews it in the list, and
// publishes it to call it).
func visibleTo(c *compiled, caller auth.Caller) bool {
	return c.def.Published || c.def.Owner == caller.KeyID
}

// seeableBy reports whether caller may see c's definition: who may call
// it, and admins (to review and publish it).
func seeableBy(c *compiled, caller auth.Caller) bool {
	return caller.IsAdmin() || visibleTo(c, caller)
}
