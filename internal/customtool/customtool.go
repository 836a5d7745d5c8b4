// Package customtool lets callers compose the built-in tools into named
// tools of their own: one call with templated arguments, or steps whose
// arguments may use earlier steps' results.
//
// What it stops: a composite that launders risk or escapes the dispatcher.
// Every nested call re-enters Dispatcher.Call, so HALT, roles, rate limits,
// the policy, approvals and audit apply at every level, and the nesting
// depth is capped there (dispatch.MaxDepth). A tool's risk is derived at
// every call from the definitions in force then — the maximum over the
// reference tree (a tool whose arguments are assessed, such as exec.run,
// counts as Dangerous), raised by what the rendered arguments of each step
// assess to — so redefining a referenced tool changes the risk of every
// tool that uses it, and a declared risk below the derived one is ignored.
// References must exist when a tool is defined (bottom-up), may not name
// the tool itself or a management tool, and may not form a cycle or a
// chain deeper than the dispatcher allows. A tool belongs to its creator:
// others neither see nor call it until an admin publishes it — admins
// included, who see it only to review it.
//
// It also stops a custom tool passing for something it is not:
//   - names: a custom tool may not take a built-in's name in its dotted or
//     its flat (MCP) form, nor another custom tool's flat form, and it is
//     marked Custom (MCP lists it as custom_<name>);
//   - approvals: each call's assessment carries the digest of the
//     definition that will run (its steps, templates and the definitions
//     of the custom tools it calls) and the rendered plan; an approval
//     binds the digest, and a redefinition voids the approvals of the tool
//     and of every tool that calls it (Registry.OnRedefine);
//   - publishing: what an admin publishes is one version; a redefinition
//     by the owner is unpublished until an admin publishes it again, and
//     every call's audit record names the version and digest it ran.
package customtool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/store"
)

// SettingKey is where the definitions are stored (one JSON document,
// replaced atomically on every change).
const SettingKey = "custom_tools"

// Caps, with their reasons.
const (
	maxTools       = 1000 // definitions on the server (each is a dispatcher tool)
	maxToolsPerKey = 100  // definitions one key may own
	maxSteps       = 32   // steps in one tool
	maxDescription = 1024 // bytes of a description
	// maxHeight is the longest chain of custom tools above a built-in:
	// a built-in reached through h custom tools runs at nesting depth h,
	// and the dispatcher refuses depth MaxDepth.
	maxHeight = dispatch.MaxDepth - 1
)

// Management are tool-name prefixes a custom tool may not call: tools that
// change who may do what (keys, tickets, policy, HALT, approvals, custom
// tools themselves).
var Management = []string{"tools.", "policy.", "control.", "approvals.", "keys.", "tickets."}

// IsManagement reports whether name is a management tool.
func IsManagement(name string) bool {
	for _, p := range Management {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Step is one call of a composite tool.
type Step struct {
	// ID names the step for {steps.ID.field} (steps only).
	ID   string `json:"id,omitempty"`
	Tool string `json:"tool"`
	// Arguments are the tool's JSON arguments with placeholders.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Def is a custom tool's definition.
type Def struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Call        *Step           `json:"call,omitempty"`
	Steps       []Step          `json:"steps,omitempty"`
	// Risk is the declared tier; below the derived one it is ignored.
	Risk      string `json:"risk,omitempty"`
	Owner     string `json:"owner"`
	Published bool   `json:"published"`
	// Version counts the definitions of this name: 1 when created, one
	// more at every redefinition.
	Version int `json:"version,omitempty"`
	// PublishedVersion is the version an admin published (0: none in
	// force): a redefinition is a new version, unpublished.
	PublishedVersion int       `json:"published_version,omitempty"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// Info is a tool as GET /v1/tools lists it.
type Info struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Risk        string          `json:"risk" enum:"safe,medium,dangerous,dynamic" doc:"the tool's tier; dynamic: decided per call (exec.run rates each command), between risk_floor and risk_ceiling; for custom tools: derived now from the reference tree"`
	RiskFloor   string          `json:"risk_floor,omitempty" doc:"for dynamic tools: the lowest tier a call can have"`
	RiskCeiling string          `json:"risk_ceiling,omitempty" doc:"for dynamic tools: the highest tier a call can have"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	Custom      bool            `json:"custom"`
	Owner       string          `json:"owner,omitempty"`
	Published   bool            `json:"published,omitempty"`
	Calls       []string        `json:"calls,omitempty" doc:"the tools a custom tool calls"`
	// The definition of a custom tool, for review.
	Version          int    `json:"version,omitempty" doc:"custom tools: the definition's version (one more at every redefinition)"`
	PublishedVersion int    `json:"published_version,omitempty" doc:"custom tools: the version an admin published; a redefinition is unpublished until an admin publishes again"`
	Digest           string `json:"digest,omitempty" doc:"custom tools: digest of the definition in force, with those of the custom tools it calls (approvals bind it)"`
	Call             *Step  `json:"call,omitempty"`
	Steps            []Step `json:"steps,omitempty"`
	Review           bool   `json:"review,omitempty" doc:"another key's unpublished tool, listed for an admin to review: no one but its owner may call it until it is published"`
}

// compiled is a definition checked and ready to run.
type compiled struct {
	def    Def
	schema *Schema
	steps  []compiledStep
	risk   guard.Risk // declared (Safe when not declared)
	// self is the digest of this definition alone (Digest adds the
	// definitions of the custom tools it calls).
	self string
}

type compiledStep struct {
	id, tool string
	tmpl     any  // decoded arguments template
	late     bool // uses earlier steps' results: cannot be assessed before running
}

func (c *compiled) refs() []string {
	out := make([]string, 0, len(c.steps))
	for _, s := range c.steps {
		if !slices.Contains(out, s.tool) {
			out = append(out, s.tool)
		}
	}
	return out
}

// Settings is the part of the store the registry uses.
type Settings interface {
	GetSetting(ctx context.Context, key string) ([]byte, error)
	PutSetting(ctx context.Context, key string, value []byte) error
}

// Registry holds the custom tools and keeps the dispatcher's registry in
// step with them. Safe for concurrent use.
type Registry struct {
	d  *dispatch.Dispatcher
	st Settings

	// mu guards defs and pending and serialises changes (store, then
	// dispatcher).
	mu   sync.RWMutex
	defs map[string]*compiled
	// pending are stored definitions that did not compile at start,
	// usually because a tool they call is registered later in the start:
	// they are retried whenever the dispatcher's tools change, and kept
	// in the store either way.
	pending []Def

	// redefined is told the tools whose definition in force changed (set
	// once at start, before any call).
	redefined func(names []string)
}

var (
	nameRe = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
	stepRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
)

// Load reads the stored definitions and registers them into d, bottom-up.
// A definition that does not compile yet (a tool it calls is registered
// later) is retried whenever the dispatcher's tools change; it stays in
// the store meanwhile, and Load reports it.
func Load(ctx context.Context, d *dispatch.Dispatcher, st Settings) (*Registry, []error, error) {
	r := &Registry{d: d, st: st, defs: make(map[string]*compiled)}
	b, err := st.GetSetting(ctx, SettingKey)
	if errors.Is(err, store.ErrNotFound) {
		return r, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read custom tools: %w", err)
	}
	var defs []Def
	if err := json.Unmarshal(b, &defs); err != nil {
		return nil, nil, fmt.Errorf("stored custom tools: %w", err)
	}
	r.pending = upgrade(defs)
	r.loadPendingLocked()
	var problems []error
	for _, def := range r.pending {
		_, err := r.compileLocked(def)
		problems = append(problems, fmt.Errorf("custom tool %s not loaded yet: %v", def.Name, fault.Public(err)))
	}
	d.OnChange(func() {
		r.mu.Lock()
		if len(r.pending) > 0 {
			r.loadPendingLocked()
		}
		dropped := r.dropShadowingLocked()
		r.mu.Unlock()
		if len(dropped) > 0 {
			r.notify(dropped...)
		}
	})
	return r, problems, nil
}

// upgrade fills in what definitions stored before versions lack: the
// version in force is 1, and a published one is published at it.
func upgrade(defs []Def) []Def {
	for i := range defs {
		if defs[i].Version == 0 {
			defs[i].Version = 1
		}
		if defs[i].Published && defs[i].PublishedVersion == 0 {
			defs[i].PublishedVersion = defs[i].Version
		}
	}
	return defs
}

// loadPendingLocked registers every pending definition that compiles now,
// bottom-up (a definition compiles once what it calls is loaded).
func (r *Registry) loadPendingLocked() {
	for progress := true; progress && len(r.pending) > 0; {
		progress = false
		var next []Def
		for _, def := range r.pending {
			c, err := r.compileLocked(def)
			if err != nil {
				next = append(next, def)
				continue
			}
			if r.reservedLocked(def.Name) != "" {
				continue // a built-in took the name since: drop the definition from service
			}
			r.defs[def.Name] = c
			if err := r.d.Register(r.tool(c)); err != nil {
				delete(r.defs, def.Name)
				continue
			}
			progress = true
		}
		r.pending = next
	}
}

// compileLocked checks def against the tools in force (callers hold mu or
// own r exclusively). It does not check cycles through tools that refer
// to def (see checkGraphLocked).
func (r *Registry) compileLocked(def Def) (*compiled, error) {
	if !nameRe.MatchString(def.Name) || len(def.Name) > 64 {
		return nil, fault.InvalidField("name", "name must be lower-case dotted words (a-z, 0-9, _), at most 64 bytes")
	}
	if IsManagement(def.Name) {
		return nil, fault.InvalidField("name", fmt.Sprintf("%q is in a reserved namespace", def.Name))
	}
	if len(def.Description) > maxDescription {
		return nil, fault.InvalidField("description", fmt.Sprintf("description is longer than %d bytes", maxDescription))
	}
	schema, err := compileSchema(def.InputSchema)
	if err != nil {
		return nil, err
	}
	c := &compiled{def: def, schema: schema, risk: guard.Safe}
	if def.Risk != "" {
		rk := guard.ParseRisk(def.Risk)
		if rk.String() != def.Risk {
			return nil, fault.InvalidField("risk", "risk must be safe, medium or dangerous")
		}
		c.risk = rk
	}
	var steps []Step
	switch {
	case def.Call != nil && len(def.Steps) > 0:
		return nil, fault.InvalidField("steps", "give either call or steps, not both")
	case def.Call != nil:
		if def.Call.ID != "" {
			return nil, fault.InvalidField("call.id", "call has no id (it is the only step)")
		}
		steps = []Step{*def.Call}
	case len(def.Steps) > 0:
		if len(def.Steps) > maxSteps {
			return nil, fault.InvalidField("steps", fmt.Sprintf("at most %d steps", maxSteps))
		}
		steps = def.Steps
	default:
		return nil, fault.InvalidField("call", "a custom tool needs call or steps")
	}
	seen := map[string]bool{}
	for i, s := range steps {
		at := fmt.Sprintf("steps.%d", i)
		if def.Call != nil {
			at = "call"
		} else if !stepRe.MatchString(s.ID) || seen[s.ID] {
			return nil, fault.InvalidField(at+".id", "each step needs a unique id (a-z, 0-9, _)")
		}
		switch {
		case s.Tool == def.Name:
			return nil, fault.InvalidField(at+".tool", "a custom tool may not call itself")
		case IsManagement(s.Tool):
			return nil, fault.InvalidField(at+".tool", fmt.Sprintf("%s is a management tool; custom tools may not call it", s.Tool))
		}
		if _, ok := r.d.Tool(s.Tool); !ok {
			return nil, fault.InvalidField(at+".tool", fmt.Sprintf("no tool named %q (define the tools it calls first)", s.Tool))
		}
		if len(s.Arguments) > maxTemplateBytes {
			return nil, fault.InvalidField(at+".arguments", fmt.Sprintf("arguments are larger than %d bytes", maxTemplateBytes))
		}
		var tmpl any = map[string]any{}
		if len(s.Arguments) > 0 {
			if err := decodeExact(s.Arguments, &tmpl); err != nil {
				return nil, fault.InvalidField(at+".arguments", "arguments are not valid JSON")
			}
		}
		refs, err := templateRefs(tmpl)
		if err != nil {
			return nil, fault.InvalidField(at+".arguments", err.Error())
		}
		late := false
		for _, rf := range refs {
			if rf.arg != "" && !slices.Contains(schema.Args, rf.arg) {
				return nil, fault.InvalidField(at+".arguments", fmt.Sprintf("placeholder {%s} is not a property of inputSchema", rf.arg))
			}
			if rf.step != "" {
				if !seen[rf.step] {
					return nil, fault.InvalidField(at+".arguments", fmt.Sprintf("placeholder {steps.%s…} does not name an earlier step", rf.step))
				}
				late = true
			}
		}
		seen[s.ID] = true
		c.steps = append(c.steps, compiledStep{id: s.ID, tool: s.Tool, tmpl: tmpl, late: late})
	}
	c.self = selfDigest(c)
	return c, nil
}

// checkGraphLocked refuses a set of definitions with a cycle or a chain
// of custom tools taller than maxHeight.
func (r *Registry) checkGraphLocked(defs map[string]*compiled) error {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	height := map[string]int{}
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		c, ok := defs[name]
		if !ok {
			return nil // a built-in
		}
		switch state[name] {
		case visiting:
			return fault.InvalidField("steps", fmt.Sprintf("cycle: %s", strings.Join(append(path, name), " → ")))
		case done:
			return nil
		}
		state[name] = visiting
		h := 1
		for _, ref := range c.refs() {
			if err := visit(ref, append(path, name)); err != nil {
				return err
			}
			h = max(h, height[ref]+1)
		}
		state[name] = done
		height[name] = h
		if h > maxHeight {
			return fault.InvalidField("steps", fmt.Sprintf("%s nests %d custom tools deep; at most %d", name, h, maxHeight))
		}
		return nil
	}
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := visit(n, nil); err != nil {
			return err
		}
	}
	return nil
}

// get returns the definition in force.
func (r *Registry) get(name string) (*compiled, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.defs[name]
	return c, ok
}

// IsCustom reports whether name is a custom tool.
func (r *Registry) IsCustom(name string) bool {
	_, ok := r.get(name)
	return ok
}

// Def returns a custom tool's definition if c may see it.
func (r *Registry) Def(c auth.Caller, name string) (Def, bool) {
	comp, ok := r.get(name)
	if !ok || !seeableBy(comp, c) {
		return Def{}, false
	}
	return comp.def, true
}

// Args are a custom tool's decoded, schema-checked arguments.
type Args struct {
	Raw    json.RawMessage
	Values map[string]any
}

// decode validates raw arguments against the tool's input schema (422
// naming the field).
func (r *Registry) decode(name string, raw json.RawMessage) (any, error) {
	c, ok := r.get(name)
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "no tool named %q", name)
	}
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return nil, fault.InvalidField("arguments", "arguments are not valid JSON")
	}
	if err := c.schema.validate(v); err != nil {
		return nil, err
	}
	var m map[string]any
	if err := decodeExact(raw, &m); err != nil {
		return nil, fault.InvalidField("arguments", "arguments must be a JSON object")
	}
	return Args{Raw: raw, Values: m}, nil
}

// run executes the steps, each through the dispatcher.
func (r *Registry) run(ctx context.Context, caller auth.Caller, name string, args Args) (any, error) {
	c, ok := r.get(name)
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "no tool named %q", name)
	}
	results := map[string]any{}
	var last any
	for i, s := range c.steps {
		rendered, err := render(s.tmpl, args.Values, results)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(rendered)
		if err != nil {
			return nil, fault.Wrap(fault.Internal, err, "render arguments")
		}
		res, err := r.d.Call(ctx, caller, s.tool, raw)
		if err != nil {
			return nil, stepError(c, i, err)
		}
		// Results travel between steps as JSON, numbers exact.
		var generic any
		if b, err := json.Marshal(res); err == nil {
			_ = decodeExact(b, &generic)
		}
		if s.id != "" {
			results[s.id] = generic
		}
		last = generic
	}
	if c.def.Call != nil {
		return last, nil
	}
	return map[string]any{"steps": results, "result": last}, nil
}

// stepError says which step failed, keeping the error's kind (and an
// approval the step waits for, which must reach the caller as is).
func stepError(c *compiled, i int, err error) error {
	var ar *dispatch.ApprovalRequired
	if errors.As(err, &ar) {
		return err
	}
	label := "call"
	if c.def.Call == nil {
		label = "step " + c.steps[i].id
	}
	kind := fault.KindOf(err)
	if kind == "" {
		kind = fault.Internal
	}
	return fault.Wrap(kind, err, fmt.Sprintf("%s (%s): %s", label, c.steps[i].tool, fault.Public(err)))
}

// tool is the dispatcher tool of a definition. Its Assess, Decode and Run
// look the definition up at call time, so a redefinition of it or of
// anything it calls applies at once. Unlike a built-in tool its arguments
// are not a Go type: they are checked against the definition's own JSON
// schema (InputSchema and Decode replace what Define derives).
func (r *Registry) tool(c *compiled) dispatch.Tool {
	name := c.def.Name
	t := dispatch.Define(dispatch.Ref[Args, any](name), dispatch.Spec{Description: c.def.Description, Risk: guard.Safe,
		Category: r.categoryLocked(c, 0),
		Roles:    []auth.Role{auth.RoleAdmin, auth.RoleAgent},
		Visible: func(caller auth.Caller) bool {
			cur, ok := r.get(name)
			return ok && visibleTo(cur, caller)
		}},
		func(ctx context.Context, caller auth.Caller, a Args) (any, error) { return r.run(ctx, caller, name, a) },
		dispatch.Hooks[Args, any]{
			Assess: func(a Args) dispatch.Assessment { return r.assess(name, a.Values, 0) },
			Describe: func(Args) dispatch.Target {
				cur, ok := r.get(name)
				if !ok {
					return dispatch.Target{}
				}
				// The version that runs, and the digest an approval of it
				// binds: the audit names what each call ran.
				return dispatch.Target{Detail: map[string]any{"custom": true, "owner": cur.def.Owner, "calls": cur.refs(),
					"version": cur.def.Version, "published_version": cur.def.PublishedVersion, "digest": r.digest(name)}}
			},
		})
	t.InputSchema = c.schema.Raw
	t.Decode = func(raw json.RawMessage) (any, error) { return r.decode(name, raw) }
	t.Custom = true
	return t
}

func (r *Registry) infoLocked(c *compiled) Info {
	return Info{Name: c.def.Name, Description: c.def.Description, Risk: r.potentialLocked(c).String(),
		InputSchema: c.schema.Raw, Custom: true, Owner: c.def.Owner, Published: c.def.Published, Calls: c.refs(),
		Version: c.def.Version, PublishedVersion: c.def.PublishedVersion, Digest: r.digestLocked(c, 0),
		Call: c.def.Call, Steps: c.def.Steps}
}

// List returns the tools c may call: built-ins by role, custom tools c
// owns or that are published, with risks derived now. An admin also gets
// every other key's unpublished tool, marked Review, to vet and publish.
func (r *Registry) List(c auth.Caller) []Info {
	tools := r.d.ToolsFor(c)
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Info, 0, len(tools))
	for _, t := range tools {
		if comp, ok := r.defs[t.Name]; ok {
			out = append(out, r.infoLocked(comp))
			continue
		}
		lr := t.Listed()
		out = append(out, Info{Name: t.Name, Description: t.Description, Risk: lr.Risk, RiskFloor: lr.Floor,
			RiskCeiling: lr.Ceiling, InputSchema: t.InputSchema})
	}
	if c.IsAdmin() {
		var review []Info
		for _, comp := range r.defs {
			if !visibleTo(comp, c) {
				in := r.infoLocked(comp)
				in.Review = true
				review = append(review, in)
			}
		}
		sort.Slice(review, func(i, j int) bool { return review[i].Name < review[j].Name })
		out = append(out, review...)
	}
	return out
}
