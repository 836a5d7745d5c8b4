// Package dispatch is the one chokepoint every capability call passes,
// whether it arrives over the native HTTP API, an AIO-compatible route, MCP
// or a composite custom tool:
//
//	HALT → auth scope → rate limit → risk → policy → run → audit
//
// HALT is deny by default: while halted only the tools of one exempt
// list run (halt.go).
//
// Each capability is a named Tool with an input schema and a declared risk
// tier. Dispatch refuses in that order (a halted server refuses before it
// counts a call against a rate limit; a refused call is not counted), runs
// the tool, and writes one audit record with the verdict, whatever the
// outcome; a call whose record cannot be stored is answered Unavailable,
// never with its result (no answer without its record). Nested calls (custom tools) re-enter Dispatch, so every step
// applies at every level; the nesting depth travels in the context and is
// capped.
//
// What it stops: a route that forgets a check. Routes do not check roles,
// limits or HALT themselves; they call Dispatch. What it does not stop:
// anything the tool's own Run lets through — the sandbox is the boundary.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// MaxDepth is the deepest nesting of tool calls; a call at this depth is
// refused (custom tools: depth >= 8 refused at run time).
const MaxDepth = 8

// Assessment is a call's risk after looking at its arguments.
type Assessment struct {
	Risk    guard.Risk
	Rules   []string
	Reasons []string
	Dynamic bool
	// Names are the command names a command line runs (guard.Names), for
	// the policy's command allow/deny lists.
	Names []string
	// Paths are the paths a call touches (guard.Paths for a command line;
	// a file tool's path), for the policy's path rules.
	Paths []string
	// Templates are the templates a call uses (a create's template, a
	// build's FROM) as name:tag, "host" for the host's, for the policy's
	// template rules.
	Templates []string
	// Trees are directories whose whole subtree a call walks (grep, find,
	// glob, a recursive list or watch, an archive): a path rule denies
	// the walk when the path it names lies below one of them.
	Trees []string
	// Guard is the command guard's verdict when the call runs a command
	// line or inline code (exec, shell, bash, code; a custom tool that
	// calls them); nil for calls that run none. Every audit record of such
	// a call carries it.
	Guard *GuardVerdict
	// Digest identifies the definition that will run, for a tool whose
	// behaviour is data (a custom tool: its steps, templates and the
	// definitions of the custom tools it calls): an approval binds it, so
	// a redefinition voids the approval. Empty for built-ins.
	Digest string
	// Plan is what the call will run, step by step (a custom tool's
	// rendered steps), for the operator who approves it.
	Plan []PlannedStep
}

// GuardVerdict is what the command guard said about the command a call
// runs, kept apart from the call's risk (which the declared tier, sudo or
// a custom tool's derivation may raise).
type GuardVerdict struct {
	Risk    guard.Risk
	Dynamic bool
	Rules   []string
}

// Label is the verdict in one word for the audit record: "dynamic" (built
// at run time), "flagged" (a Dangerous-tier rule matched; the record's
// rules name it), else the guard's tier ("safe", "medium").
func (g GuardVerdict) Label() string {
	switch {
	case g.Dynamic:
		return "dynamic"
	case g.Risk >= guard.Dangerous && len(g.Rules) > 0:
		return "flagged"
	case !g.Risk.Valid():
		return guard.Dangerous.String()
	}
	return g.Risk.String()
}

// Merge combines the verdicts of several commands (a custom tool's steps):
// the highest tier, dynamic if any is, every rule.
func (g *GuardVerdict) Merge(o *GuardVerdict) *GuardVerdict {
	if o == nil {
		return g
	}
	if g == nil {
		c := *o
		c.Rules = slices.Clone(o.Rules)
		return &c
	}
	out := &GuardVerdict{Risk: max(g.Risk, o.Risk), Dynamic: g.Dynamic || o.Dynamic, Rules: slices.Clone(g.Rules)}
	for _, r := range o.Rules {
		if !slices.Contains(out.Rules, r) {
			out.Rules = append(out.Rules, r)
		}
	}
	return out
}

// Merge is the assessment of two things done together (a custom tool's
// steps, the lines of one write to a shell): the higher tier, dynamic if
// either is, every rule, reason, name, path and tree once, the guard's
// verdicts merged. a's Plan and Digest are kept.
func (a Assessment) Merge(o Assessment) Assessment {
	a.Risk = max(a.Risk, o.Risk)
	a.Dynamic = a.Dynamic || o.Dynamic
	a.Rules = appendNew(a.Rules, o.Rules...)
	a.Reasons = appendNew(a.Reasons, o.Reasons...)
	a.Names = appendNew(a.Names, o.Names...)
	a.Paths = appendNew(a.Paths, o.Paths...)
	a.Trees = appendNew(a.Trees, o.Trees...)
	a.Guard = a.Guard.Merge(o.Guard)
	return a
}

// appendNew appends the strings of add that to lacks.
func appendNew(to []string, add ...string) []string {
	for _, s := range add {
		if !slices.Contains(to, s) {
			to = append(to, s)
		}
	}
	return to
}

// FromVerdict is the Assessment of a call that runs the command line the
// guard classified as v.
func FromVerdict(v guard.Verdict) Assessment {
	return Assessment{Risk: v.Risk, Rules: v.Rules, Reasons: v.Reasons, Dynamic: v.Dynamic,
		Names: guard.Names(v), Paths: guard.Paths(v),
		Guard: &GuardVerdict{Risk: v.Risk, Dynamic: v.Dynamic, Rules: v.Rules}}
}

// Flagged reports whether the guard found something worth an operator's
// eyes: code built at run time, or a rule of the Dangerous tier (rm -rf /,
// curl | sh, credential reads …). A tool that is Dangerous only by its
// declared tier is not flagged.
func (a Assessment) Flagged() bool {
	return a.Dynamic || (a.Risk >= guard.Dangerous && len(a.Rules) > 0)
}

// Tool is one capability. Its Name is also the audit action of its calls,
// so names start with the category the audit log filters by: sandbox.*,
// exec.*, file.*, network.*, browser.*, policy.* …
type Tool struct {
	Name        string
	Description string
	// Risk is the declared tier; Assess may raise it for given arguments.
	Risk guard.Risk
	// RiskCeiling is the highest tier Assess can give a call. Zero means
	// Dangerous when Assess is set (fail closed: exec.run is declared safe
	// and its command decides), and Risk when it is not. A tool whose
	// ceiling is above its Risk is listed with risk "dynamic" (see Listed).
	RiskCeiling guard.Risk
	// Category is the rate-limit bucket; 0 means not rate limited.
	Category ratelimit.Category
	// Roles may call the tool; empty means admin and agent. Viewers only
	// get tools that list them.
	Roles []auth.Role
	// InputSchema is the JSON schema of the arguments (for /v1/tools and
	// MCP).
	InputSchema json.RawMessage
	// Decode turns JSON arguments into the value Run takes; nil passes
	// json.RawMessage through.
	Decode func(raw json.RawMessage) (any, error)
	// Assess rates the arguments (exec: the command guard's verdict).
	Assess func(args any) Assessment
	// Describe names what the audit record should hold of the call.
	Describe func(args any) Target
	// Summarize adds the outcome to the audit record (exit code,
	// bytes written …); never output or file contents.
	Summarize func(args, result any) map[string]any
	// Check validates decoded arguments (Define: the type's Validate and
	// its type). Dispatch runs it after the scope check and before the
	// rate limit, for every caller, so a rule lives in one place.
	Check func(args any) error
	// Streams: the tool sends output while it runs to a caller that asked
	// with WithStreaming.
	Streams bool
	// Commands says whether the call starts a command, whose record then
	// goes first (record.go).
	Commands Commands
	// Run does the work.
	Run func(ctx context.Context, c auth.Caller, args any) (any, error)
	// Visible, when set, hides the tool from callers it returns false for
	// (a custom tool its owner has not published): they are told there is
	// no such tool, and ToolsFor leaves it out.
	Visible func(c auth.Caller) bool
	// Custom marks a tool a key defined at run time (customtool), not a
	// built-in: it lives in its own namespace where names are shown (MCP
	// lists it as custom_<name>), so it can never pass for a built-in.
	Custom bool

	// typed marks a tool made by Define.
	typed bool
}

// Typed reports whether the tool was declared with Define (typed
// arguments and answer, a schema derived from its argument type).
func (t *Tool) Typed() bool { return t.typed }

// Ceiling is the highest tier a call of t can be assessed at.
func (t *Tool) Ceiling() guard.Risk {
	switch {
	case !t.Risk.Valid():
		return guard.Dangerous
	case t.Assess == nil:
		return t.Risk
	case !t.RiskCeiling.Valid():
		return guard.Dangerous
	}
	return max(t.Risk, t.RiskCeiling)
}

// ListedRisk is how GET /v1/tools and MCP state t's risk. A tool whose
// risk is decided per call is never listed by its declared floor: risk
// is "dynamic", with the floor and the ceiling beside it.
type ListedRisk struct {
	Risk    string `json:"risk" enum:"safe,medium,dangerous,dynamic" doc:"the tool's tier; dynamic: decided per call, between risk_floor and risk_ceiling"`
	Floor   string `json:"risk_floor,omitempty" doc:"for dynamic tools: the lowest tier a call can have"`
	Ceiling string `json:"risk_ceiling,omitempty" doc:"for dynamic tools: the highest tier a call can have"`
}

// Listed is t's ListedRisk.
func (t *Tool) Listed() ListedRisk {
	floor, ceiling := t.Risk, t.Ceiling()
	if !floor.Valid() {
		floor = guard.Dangerous
	}
	if ceiling > floor {
		return ListedRisk{Risk: "dynamic", Floor: floor.String(), Ceiling: ceiling.String()}
	}
	return ListedRisk{Risk: floor.String()}
}

// CallableBy reports whether c's role may call t and t is visible to c.
func (t *Tool) CallableBy(c auth.Caller) bool {
	roles := t.Roles
	if len(roles) == 0 {
		roles = []auth.Role{auth.RoleAdmin, auth.RoleAgent}
	}
	return slices.Contains(roles, c.Role) && (t.Visible == nil || t.Visible(c))
}

// Target is what an audit record says a call touched.
type Target struct {
	Target  string
	Sandbox string
	Detail  map[string]any
}

// Decision is the policy's answer.
type Decision int

// Decisions.
const (
	Allow Decision = iota
	NeedsApproval
	Deny
)

// Policy decides whether a caller may run a tool at an assessed risk.
type Policy interface {
	Decide(ctx context.Context, c auth.Caller, t *Tool, a Assessment, args any) (Decision, string)
}

// Halt reports whether an operator has halted the server.
type Halt interface {
	Halted() (bool, string)
}

// Approvals turns a NeedsApproval decision into a pending approval; it
// returns the error the caller sees (an ApprovalRequired, or a refusal).
// It returns nil when an operator has approved this identical call (same
// caller, tool and arguments) and the approval is used up by this call:
// the dispatcher then runs it.
type Approvals interface {
	Request(ctx context.Context, c auth.Caller, t *Tool, a Assessment, args any) error
}

// RateRules returns the per-role and per-key rate-limit overrides for a
// caller (the policy's rate_limits); the limiter resolves them over its base
// rules.
type RateRules func(c auth.Caller) ratelimit.Rules

// Observer sees every call that reaches the dispatcher, before any step
// (tests prove that every route goes through it).
type Observer func(ctx context.Context, c auth.Caller, name string)

// ApprovalRequired is returned when a call waits for an operator.
type ApprovalRequired struct {
	ID string
}

func (e *ApprovalRequired) Error() string { return "approval required: " + e.ID }

// RateLimited is the cause inside the fault returned when a limit refuses
// a call; it carries what a 429 needs (Retry-After, X-RateLimit-*).
type RateLimited struct {
	Category ratelimit.Category
	Decision ratelimit.Decision
}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("rate limit for %s exceeded; retry in %ds", e.Category, e.Decision.RetryAfterSeconds())
}

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

// SetPolicy installs the policy step (the daemon builds the policy after
// the dispatcher).
func (d *Dispatcher) SetPolicy(p Policy) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.policy = p
}

// SetHalt installs the HALT step.
func (d *Dispatcher) SetHalt(h Halt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.halt = h
}

// SetApprovals installs the approvals step.
func (d *Dispatcher) SetApprovals(a Approvals) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.approvals = a
}

// SetRateRules installs the per-role/per-key rate-limit overrides.
func (d *Dispatcher) SetRateRules(r RateRules) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rates = r
}

// Limiter is the rate limiter the dispatcher counts with (nil: none), for
// the X-RateLimit-* headers of allowed calls.
func (d *Dispatcher) Limiter() *ratelimit.Limiter { return d.limiter }

// Observe adds fn to the observers that see every call first.
func (d *Dispatcher) Observe(fn Observer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.observers = append(d.observers, fn)
}

type steps struct {
	policy    Policy
	halt      Halt
	approvals Approvals
	rates     RateRules
	observers []Observer
}

func (d *Dispatcher) steps() steps {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return steps{policy: d.policy, halt: d.halt, approvals: d.approvals, rates: d.rates, observers: d.observers}
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

type depthKey struct{}

// Depth is the nesting depth of the call running in ctx (0 at the top).
func Depth(ctx context.Context) int {
	n, _ := ctx.Value(depthKey{}).(int)
	return n
}

// Call decodes JSON arguments for tool name and dispatches it (MCP,
// /v1/tools/call, custom tool steps).
func (d *Dispatcher) Call(ctx context.Context, c auth.Caller, name string, raw json.RawMessage) (any, error) {
	t, ok := d.Tool(name)
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "no tool named %q", name)
	}
	var args any = raw
	if t.Decode != nil {
		var err error
		if args, err = t.Decode(raw); err != nil {
			// Refused like any other call: after HALT and the role,
			// with its audit record.
			args = undecodable{err}
		}
	}
	return d.Dispatch(ctx, c, name, args)
}

// undecodable stands for arguments Call could not decode: Dispatch refuses
// the call with the decoder's error where it checks arguments.
type undecodable struct{ err error }

// AssessArgs returns what Dispatch would assess for tool t and typed args: the
// declared tier raised by the tool's Assess (custom tools assess the calls
// they make with it).
func (t *Tool) AssessArgs(args any) Assessment {
	a := Assessment{Risk: t.Risk}
	if t.Assess != nil {
		got := t.Assess(args)
		a.Rules, a.Reasons, a.Dynamic, a.Names, a.Paths, a.Trees, a.Guard = got.Rules, got.Reasons, got.Dynamic, got.Names, got.Paths, got.Trees, got.Guard
		a.Digest, a.Plan = got.Digest, got.Plan
		a.Risk = max(a.Risk, got.Risk)
		if !a.Risk.Valid() {
			a.Risk = guard.Dangerous
		}
	}
	return a
}

// Dispatch runs tool name for c with typed args through every step.
func (d *Dispatcher) Dispatch(ctx context.Context, c auth.Caller, name string, args any) (result any, err error) {
	st := d.steps()
	for _, fn := range st.observers {
		fn(ctx, c, name)
	}
	t, ok := d.Tool(name)
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "no tool named %q", name)
	}
	depth := Depth(ctx)
	_, bad := args.(undecodable)
	a := Assessment{Risk: t.Risk}
	var tgt Target
	if !bad { // a tool's hooks see only its own arguments
		a = t.AssessArgs(args)
		if t.Describe != nil {
			tgt = t.Describe(args)
		}
	}
	verdict := "allowed"
	var reason string
	var closeWindow func()
	// first is the call's record when it went before Run (record.go).
	var first Durable
	defer func() {
		if closeWindow != nil {
			// Before the record: its commit is the sync the run's
			// deferred writes wait for (Options.FlushWindow).
			closeWindow()
		}
		if err != nil && (verdict == "allowed" || verdict == "approved") {
			verdict = "error"
		}
		if first != nil {
			// The call's record went first; the answer still waits for
			// it (a command held for it has waited already), and the
			// outcome rides the next commit.
			seq, aerr := first.Wait()
			if aerr == nil {
				var sum map[string]any
				if err == nil && t.Summarize != nil {
					sum = t.Summarize(args, result)
				}
				aerr = d.outcome(ctx, c, t, Target{Target: tgt.Target, Sandbox: tgt.Sandbox, Detail: sum}, seq, verdict, reason, err)
			}
			if aerr != nil {
				// Whatever the run said: a command held for its record
				// was refused when the record failed.
				result = nil
				err = fault.Wrap(fault.Unavailable, aerr, "the call's audit record could not be stored, so its result is withheld; the server's log says why")
			}
			return
		}
		if err == nil && t.Summarize != nil {
			tgt.Detail = merge(tgt.Detail, t.Summarize(args, result))
		}
		if aerr := d.record(ctx, c, t, a, tgt, depth, verdict, reason, err); aerr != nil && err == nil {
			// No answer without its record: the call may have run, but
			// its result is withheld rather than given unrecorded.
			result = nil
			err = fault.Wrap(fault.Unavailable, aerr, "the call's audit record could not be stored, so its result is withheld; the server's log says why")
		}
	}()

	// 1. HALT: deny by default. Every call is refused, at every nesting
	// level, unless its tool is on the exempt list (halt.go) and the call
	// is Safe.
	if err := st.haltRefusal(t, a); err != nil {
		verdict, reason = "denied", "halted"
		return nil, err
	}
	if depth >= MaxDepth {
		verdict, reason = "denied", "depth"
		return nil, fault.Errorf(fault.Invalid, "tool calls nested %d deep; the limit is %d", depth, MaxDepth-1)
	}
	// 2. Scope: who may call this tool at all.
	roles := t.Roles
	if len(roles) == 0 {
		roles = []auth.Role{auth.RoleAdmin, auth.RoleAgent}
	}
	if t.Visible != nil && !t.Visible(c) {
		verdict, reason = "denied", "not_visible"
		return nil, fault.Errorf(fault.NotFound, "no tool named %q", name)
	}
	if !slices.Contains(roles, c.Role) {
		verdict, reason = "denied", "role"
		return nil, fault.Errorf(fault.Forbidden, "the %s role may not call %s", c.Role, t.Name)
	}
	// Arguments that break their type's rules are refused before they
	// count against a limit.
	if u, ok := args.(undecodable); ok {
		reason = "invalid"
		return nil, u.err
	}
	if t.Check != nil {
		if err := t.Check(args); err != nil {
			reason = "invalid"
			return nil, err
		}
	}
	// 3. Rate limit (a refused call is not counted).
	if cat := ratelimit.ForTool(t.Name, t.Category); d.limiter != nil && cat != 0 {
		var dec ratelimit.Decision
		if rule, ok := d.overridden(st, c, cat); ok {
			dec = d.limiter.AllowRule(c.KeyID, cat, rule)
		} else {
			dec = d.limiter.Allow(c.KeyID, cat)
		}
		if !dec.Allowed {
			verdict, reason = "denied", "rate_limit"
			rl := &RateLimited{Category: cat, Decision: dec}
			return nil, &fault.Error{Kind: fault.RateLimited, Msg: rl.Error(), RetryAfter: dec.RetryAfterSeconds(), Err: rl}
		}
	}
	// 4–5. Risk is assessed above; the policy decides on it.
	decision, why := Allow, ""
	if st.policy != nil {
		decision, why = st.policy.Decide(ctx, c, t, a, args)
	}
	switch decision {
	case Deny:
		verdict, reason = "denied", why
		return nil, fault.Errorf(fault.Forbidden, "policy refuses %s at risk %s: %s", t.Name, a.Risk, why)
	case NeedsApproval:
		verdict, reason = "pending", why
		if inApproved(ctx, c, a) {
			// A composite call an operator approved: its risk, shown to
			// the operator, was derived from the calls it makes (custom
			// tools flag arguments built at run time), so those calls
			// need no approval of their own — as long as what this one
			// is flagged for is what the operator saw. A Deny still
			// denies.
			verdict, reason = "approved", "inside an approved call"
			break
		}
		if st.approvals == nil {
			verdict = "denied"
			return nil, fault.Errorf(fault.Forbidden, "%s at risk %s needs an operator's approval, and approvals are not enabled", t.Name, a.Risk)
		}
		shown := a
		if why != "" {
			shown.Reasons = append(slices.Clip(a.Reasons), "policy: "+why)
		}
		waitCtx, release := d.holdWait(ctx, st, c)
		err := st.approvals.Request(waitCtx, c, t, shown, args)
		release()
		if err != nil {
			var ar *ApprovalRequired
			if !errors.As(err, &ar) {
				verdict = "denied"
			} else {
				tgt.Detail = merge(tgt.Detail, map[string]any{"approval_id": ar.ID})
			}
			return nil, err
		}
		// An operator approved this identical call; it runs once — if
		// what was approved is still what would run.
		if err := d.stillApproved(t, a, args); err != nil {
			verdict, reason = "denied", "redefined"
			return nil, err
		}
		verdict = "approved"
		ctx = withApproved(ctx, c, shown)
	}
	// HALT again: the approval (or the policy's look-ups) may have kept
	// the call waiting while an operator halted the server.
	if err := st.haltRefusal(t, a); err != nil {
		verdict, reason = "denied", "halted"
		return nil, err
	}
	// 6. Run. A call that starts a command has its record go first.
	switch {
	case t.Commands != NoCommand && d.audit != nil:
		rec, berr := d.begin(ctx, callEntry(c, t, a, tgt, depth, verdict, reason, nil))
		if berr != nil {
			verdict = "error"
			return nil, fault.Wrap(fault.Unavailable, berr, "the call's audit record could not be stored, so it did not run; the server's log says why")
		}
		first = rec
		if t.Commands == RecordFirst {
			if _, werr := rec.Wait(); werr != nil {
				return nil, fault.Wrap(fault.Unavailable, werr, "the call's audit record could not be stored, so it did not run; the server's log says why")
			}
			ctx = noHeldRecord(ctx)
		} else {
			ctx = context.WithValue(ctx, heldKey{}, rec)
		}
	case d.flushWindow != nil && d.audit != nil:
		ctx, closeWindow = d.flushWindow(ctx)
		ctx = noHeldRecord(ctx)
	default:
		ctx = noHeldRecord(ctx)
	}
	ctx = context.WithValue(ctx, withinKey{}, within{d: d, c: c})
	return t.Run(context.WithValue(ctx, depthKey{}, depth+1), c, args)
}

// record appends the call's audit record and returns the append's error.
func (d *Dispatcher) record(ctx context.Context, c auth.Caller, t *Tool, a Assessment, tgt Target, depth int, verdict, reason string, err error) error {
	if d.audit == nil {
		return nil
	}
	e := callEntry(c, t, a, tgt, depth, verdict, reason, err)
	if w, ok := d.audit.(auditWriter); ok {
		return w.Write(context.WithoutCancel(ctx), e)
	}
	_, aerr := d.audit.Append(context.WithoutCancel(ctx), e)
	return aerr
}

// callEntry is the record of a call.
func callEntry(c auth.Caller, t *Tool, a Assessment, tgt Target, depth int, verdict, reason string, err error) audit.Entry {
	detail := merge(map[string]any{"risk": a.Risk.String()}, tgt.Detail)
	if len(a.Rules) > 0 {
		detail["rules"] = a.Rules
	}
	if a.Dynamic {
		detail["dynamic"] = true
	}
	if a.Guard != nil {
		detail["guard"] = a.Guard.Label()
	}
	if depth > 0 {
		detail["depth"] = depth
	}
	if reason != "" {
		detail["reason"] = reason
	}
	if err != nil {
		detail["error"] = errorDetail(err)
	}
	return audit.Entry{
		Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr,
		Action: t.Name, Target: tgt.Target, Sandbox: tgt.Sandbox,
		Verdict: verdict, Detail: detail,
	}
}

// errorDetail is what a record says of a call's error.
func errorDetail(err error) string {
	var rl *RateLimited
	var ar *ApprovalRequired
	switch {
	case errors.As(err, &rl):
		return rl.Error()
	case errors.As(err, &ar):
		return "waiting for an operator's approval (" + ar.ID + ")"
	}
	return fault.Public(err)
}

// auditWriter is an audit log that stores a record without handing it
// back (audit.Log's Write): the dispatcher never reads its records back,
// so it skips decoding each one's detail again.
type auditWriter interface {
	Write(ctx context.Context, e audit.Entry) error
}

var _ auditWriter = (*audit.Log)(nil)

func merge(a, b map[string]any) map[string]any {
	if a == nil {
		a = make(map[string]any, len(b))
	}
	for k, v := range b {
		a[k] = v
	}
	return a
}

type approvalWaitKey struct{}

// WithApprovalWait asks that a call needing approval wait up to d for the
// operator's decision before answering "pending" (the HTTP layer sets it
// from the request; the approvals service bounds it).
func WithApprovalWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, approvalWaitKey{}, d)
}

// ApprovalWait is the wait set by WithApprovalWait (0: do not wait).
func ApprovalWait(ctx context.Context) time.Duration {
	d, _ := ctx.Value(approvalWaitKey{}).(time.Duration)
	return max(d, 0)
}
