package dispatch

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Dispatcher holds the registry and runs the steps.
type Dispatcher struct {
	limiter *ratelimit.Limiter
	audit   audit.Appender

	// mu guards the tools, the watchers and the pluggable steps (set once at
	// start by the daemon, read on every call).
	mu        sync.RWMutex
	tools     map[string]*Tool
	watchers  []func()
	policy    Policy
	halt      Halt
	approvals Approvals
	rates     RateRules
	observers []Observer

	// flushWindow is Options.FlushWindow.
	flushWindow func(context.Context) (context.Context, func())
}

// Options configures a Dispatcher. Nil Policy allows every call its role
// may make; nil Halt never halts; nil Approvals denies what needs approval.
type Options struct {
	Limiter   *ratelimit.Limiter
	Audit     audit.Appender
	Policy    Policy
	Halt      Halt
	Approvals Approvals
	// RateRules gives per-role/per-key rate-limit overrides; nil uses the
	// limiter's base rules.
	RateRules RateRules
	// FlushWindow, if set, wraps each tool's run: the writes the run makes
	// under the context it returns may leave their flush to the durable
	// commit of the call's audit record, which follows before the answer
	// (store.SQLite.OpenFlushWindow). Set it only when Audit commits to
	// that same database. The dispatcher calls the returned close before
	// it appends the record; with no Audit it opens no window.
	FlushWindow func(context.Context) (context.Context, func())
}

// New returns a dispatcher with no tools.
func New(o Options) *Dispatcher {
	return &Dispatcher{limiter: o.Limiter, audit: o.Audit, policy: o.Policy, halt: o.Halt, approvals: o.Approvals,
		rates: o.RateRules, tools: make(map[string]*Tool), flushWindow: o.FlushWindow}
}

var toolName = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// Register adds a tool; names are unique.
func (d *Dispatcher) Register(t Tool) error {
	if !toolName.MatchString(t.Name) || len(t.Name) > 64 {
		return fmt.Errorf("tool name %q: want lower-case dotted words", t.Name)
	}
	if t.Run == nil {
		return fmt.Errorf("tool %s: no Run", t.Name)
	}
	if !t.Risk.Valid() {
		return fmt.Errorf("tool %s: invalid risk", t.Name)
	}
	if err := viewerSafe(&t); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.tools[t.Name]; ok {
		return fmt.Errorf("tool %s registered twice", t.Name)
	}
	d.tools[t.Name] = &t
	d.changedLocked()
	return nil
}

// viewerSafe refuses a tool offered to viewers whose calls can be more than
// Safe: viewers observe, and the default policy lets them run Safe tools
// only, so a tool whose risk is decided per call (exec.run) must never
// reach their listing looking safe.
func viewerSafe(t *Tool) error {
	if slices.Contains(t.Roles, auth.RoleViewer) && t.Ceiling() > guard.Safe {
		return fmt.Errorf("tool %s: offered to viewers but its calls can be %s", t.Name, t.Ceiling())
	}
	return nil
}

// Unregister removes a tool (custom tools); it reports whether it existed.
func (d *Dispatcher) Unregister(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.tools[name]; !ok {
		return false
	}
	delete(d.tools, name)
	d.changedLocked()
	return true
}

// Replace registers t in place of the tool of the same name (a redefined
// custom tool); the tool must exist.
func (d *Dispatcher) Replace(t Tool) error {
	if t.Run == nil || !t.Risk.Valid() {
		return fmt.Errorf("tool %s: no Run or invalid risk", t.Name)
	}
	if err := viewerSafe(&t); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.tools[t.Name]; !ok {
		return fmt.Errorf("tool %s is not registered", t.Name)
	}
	d.tools[t.Name] = &t
	d.changedLocked()
	return nil
}

// OnChange calls fn (in its own goroutine) whenever the set of tools
// changes: MCP sends tools/list_changed.
func (d *Dispatcher) OnChange(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.watchers = append(d.watchers, fn)
}

// changedLocked notifies watchers. Callers hold mu.
func (d *Dispatcher) changedLocked() {
	for _, fn := range d.watchers {
		go fn()
	}
}

// MustRegister is Register for the built-in tools, whose registration
// cannot fail unless the code is wrong.
func (d *Dispatcher) MustRegister(t Tool) {
	if err := d.Register(t); err != nil {
		panic(err)
	}
}

// Tool returns a registered tool.
func (d *Dispatcher) Tool(name string) (*Tool, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	t, ok := d.tools[name]
	return t, ok
}

// Tools lists the registered tools by name.
func (d *Dispatcher) Tools() []*Tool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]*Tool, 0, len(d.tools))
	for _, t := range d.tools {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ToolsFor lists the tools c may call (role and visibility), by name.
func (d *Dispatcher) ToolsFor(c auth.Caller) []*Tool {
	all := d.Tools()
	out := all[:0]
	for _, t := range all {
		if t.CallableBy(c) {
			out = append(out, t)
		}
	}
	return out
}
