package customtool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sandhold/sandhold/internal/store"
)

// Reload puts the stored definitions in force (another node of a cluster
// defined, redefined or deleted a tool): tools no longer stored are
// unregistered, changed ones are registered anew, new ones are registered
// bottom-up like at start; what does not compile yet stays pending. A
// stored list that cannot be read is an error and changes nothing.
func (r *Registry) Reload(ctx context.Context) error {
	b, err := r.st.GetSetting(ctx, SettingKey)
	var defs []Def
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read custom tools: %w", err)
	default:
		if err := json.Unmarshal(b, &defs); err != nil {
			return fmt.Errorf("stored custom tools: %w", err)
		}
		defs = upgrade(defs)
	}
	want := make(map[string]Def, len(defs))
	for _, d := range defs {
		want[d.Name] = d
	}
	var changed []string
	defer func() { r.notify(changed...) }() // after the Unlock below
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[string]*compiled, len(r.defs))
	for name, c := range r.defs {
		if d, ok := want[name]; ok && sameDef(c.def, d) {
			next[name] = c
			continue
		}
		r.d.Unregister(name) // gone, or changed: registered anew below
		changed = append(changed, name)
	}
	r.defs = next
	r.pending = r.pending[:0]
	for _, d := range defs {
		if _, ok := next[d.Name]; !ok {
			r.pending = append(r.pending, d)
		}
	}
	r.loadPendingLocked()
	return nil
}

func sameDef(a, b Def) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
