package customtool

// This file: defining, deleting and publishing custom tools.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
)

// Define creates a tool, or replaces one the caller owns (an admin may
// replace any). Only an admin may publish; a redefinition is a new
// version, unpublished unless the admin who makes it publishes it.
func (r *Registry) Define(ctx context.Context, c auth.Caller, def Def) (Info, error) {
	if def.Published && !c.IsAdmin() {
		return Info{}, fault.New(fault.Forbidden, "only an admin may publish a custom tool")
	}
	info, replaced, err := r.define(ctx, c, def)
	if err == nil && replaced {
		r.notify(def.Name)
	}
	return info, err
}

func (r *Registry) define(ctx context.Context, c auth.Caller, def Def) (Info, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now().UTC()
	prev, exists := r.defs[def.Name]
	switch {
	case exists && prev.def.Owner != c.KeyID && !c.IsAdmin():
		return Info{}, false, unavailable(def.Name)
	case exists:
		def.Owner, def.CreatedAt = prev.def.Owner, prev.def.CreatedAt
		def.Version = prev.def.Version + 1
	default:
		if !nameRe.MatchString(def.Name) || len(def.Name) > 64 {
			break // compileLocked names the problem
		}
		if r.reservedLocked(def.Name) != "" {
			return Info{}, false, unavailable(def.Name)
		}
		if len(r.defs) >= maxTools {
			return Info{}, false, fault.New(fault.Conflict, fmt.Sprintf("the server holds %d custom tools, the most it keeps", maxTools))
		}
		owned := 0
		for _, d := range r.defs {
			if d.def.Owner == c.KeyID {
				owned++
			}
		}
		if owned >= maxToolsPerKey {
			return Info{}, false, fault.New(fault.Conflict, fmt.Sprintf("this key owns %d custom tools, the most it may", maxToolsPerKey))
		}
		def.Owner, def.CreatedAt, def.Version = c.KeyID, now, 1
	}
	// What was published is the previous version: this one is published
	// only when an admin says so now.
	def.PublishedVersion = 0
	if def.Published {
		def.PublishedVersion = def.Version
	}
	def.UpdatedAt = now
	comp, err := r.compileLocked(def)
	if err != nil {
		return Info{}, false, err
	}
	next := make(map[string]*compiled, len(r.defs)+1)
	for k, v := range r.defs {
		next[k] = v
	}
	next[def.Name] = comp
	if err := r.checkGraphLocked(next); err != nil {
		return Info{}, false, err
	}
	if err := r.saveLocked(ctx, next); err != nil {
		return Info{}, false, err
	}
	r.defs = next
	if exists {
		err = r.d.Replace(r.tool(comp))
	} else {
		err = r.d.Register(r.tool(comp))
	}
	if err != nil {
		return Info{}, false, fmt.Errorf("register custom tool: %w", err)
	}
	return r.infoLocked(comp), exists, nil
}

// Delete removes a tool the caller owns (an admin: any). A tool another
// tool still calls is not deleted.
func (r *Registry) Delete(ctx context.Context, c auth.Caller, name string) error {
	if err := r.delete(ctx, c, name); err != nil {
		return err
	}
	r.notify(name)
	return nil
}

func (r *Registry) delete(ctx context.Context, c auth.Caller, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	comp, ok := r.defs[name]
	if !ok || !seeableBy(comp, c) {
		return fault.New(fault.NotFound, "no custom tool named "+name)
	}
	if comp.def.Owner != c.KeyID && !c.IsAdmin() {
		return fault.New(fault.Forbidden, "only its owner or an admin may delete a custom tool")
	}
	for other, oc := range r.defs {
		if other != name && slices.Contains(oc.refs(), name) {
			return fault.Errorf(fault.Conflict, "custom tool %s calls %s; delete or redefine it first", other, name)
		}
	}
	next := make(map[string]*compiled, len(r.defs))
	for k, v := range r.defs {
		if k != name {
			next[k] = v
		}
	}
	if err := r.saveLocked(ctx, next); err != nil {
		return err
	}
	r.defs = next
	r.d.Unregister(name)
	return nil
}

// Publish makes the version in force of a tool visible to (and callable
// by) every key, or hides it again. Admin only (the tool's roles say so).
// A tool that calls custom tools is published only when they are: its
// steps run as the caller, who could not call unpublished ones.
func (r *Registry) Publish(ctx context.Context, name string, published bool) (Info, error) {
	info, err := r.publish(ctx, name, published)
	if err == nil && !published {
		r.notify(name)
	}
	return info, err
}

func (r *Registry) publish(ctx context.Context, name string, published bool) (Info, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	comp, ok := r.defs[name]
	if !ok {
		return Info{}, fault.New(fault.NotFound, "no custom tool named "+name)
	}
	if published {
		for _, ref := range comp.refs() {
			if sub, ok := r.defs[ref]; ok && !sub.def.Published {
				return Info{}, fault.Errorf(fault.Conflict, "%s calls the custom tool %s, which is not published; publish it first", name, ref)
			}
		}
	}
	def := comp.def
	def.Published, def.UpdatedAt = published, time.Now().UTC()
	def.PublishedVersion = 0
	if published {
		def.PublishedVersion = def.Version
	}
	nc := *comp
	nc.def = def
	next := make(map[string]*compiled, len(r.defs))
	for k, v := range r.defs {
		next[k] = v
	}
	next[name] = &nc
	if err := r.saveLocked(ctx, next); err != nil {
		return Info{}, err
	}
	r.defs = next
	if err := r.d.Replace(r.tool(&nc)); err != nil {
		return Info{}, err
	}
	return r.infoLocked(&nc), nil
}

func (r *Registry) saveLocked(ctx context.Context, defs map[string]*compiled) error {
	list := make([]Def, 0, len(defs)+len(r.pending))
	for _, c := range defs {
		list = append(list, c.def)
	}
	for _, p := range r.pending {
		if _, ok := defs[p.Name]; !ok {
			list = append(list, p)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	b, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("encode custom tools: %w", err)
	}
	if err := r.st.PutSetting(context.WithoutCancel(ctx), SettingKey, b); err != nil {
		return fmt.Errorf("store custom tools: %w", err)
	}
	return nil
}
