// Package policy decides, per role and per API key, which tool calls run,
// which wait for an operator's approval and which are refused, and which
// rate limits apply. It implements dispatch.Policy.
//
// What it stops: an agent key running what the operator did not allow — a
// command the guard flagged (rm -rf /, curl | sh, code built at run time),
// a command or path on a deny list, a tool the operator switched off — and
// an agent widening its own rights: the policy is changed only through the
// admin-only policy.set tool, and the management tools (policy, control,
// approvals) are exempt from it, so a bad policy cannot lock the operator
// out. It is policy, not the boundary: the sandbox is.
//
// A Document holds Rules per role (admin, agent, viewer) and per key id. A
// key's rules override its role's field by field; lists add up. The
// decision for one call is the strictest of:
//
//   - the risk tier: up to allow_up_to → allow; up to approve_up_to →
//     needs approval; above → deny. A tools entry or, for a command whose
//     every name is on commands.allow and that the guard did not flag, an
//     allow entry lifts a risk-based approval;
//   - flagged: the guard matched a Dangerous rule or found code built at
//     run time (dispatch.Assessment.Flagged);
//   - tools: an explicit allow/approve/deny per tool name (or "file.*");
//   - commands.approve/deny and paths.approve/deny, matched against the
//     command names and paths the guard found.
package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/store"
)

// SettingKey is where the policy document is stored (one JSON value,
// replaced atomically).
const SettingKey = "policy"

// Caps on a document, so that an admin's typo cannot make every call slow.
const (
	maxKeys        = 1000 // keys with rules of their own
	maxListEntries = 256  // entries per allow/approve/deny list and tools map
	maxPattern     = 256  // bytes per pattern
)

// Action is what a rule says about a call.
type Action string

// Actions, from the most to the least permissive.
const (
	ActAllow   Action = "allow"
	ActApprove Action = "approve"
	ActDeny    Action = "deny"
)

func (a Action) decision() dispatch.Decision {
	switch a {
	case ActAllow:
		return dispatch.Allow
	case ActApprove:
		return dispatch.NeedsApproval
	}
	return dispatch.Deny
}

// Lists are glob patterns (path.Match) per action.
type Lists struct {
	Allow   []string `json:"allow,omitempty" doc:"command names that never need approval by their risk tier alone"`
	Approve []string `json:"approve,omitempty"`
	Deny    []string `json:"deny,omitempty"`
}

// RateRule is one category's limit (see ratelimit.Rule).
type RateRule struct {
	PerMinute  float64 `json:"per_minute,omitempty"`
	Burst      int     `json:"burst,omitempty"`
	Concurrent int     `json:"concurrent,omitempty"`
}

// Rules apply to a role or a key. Empty fields inherit (a key inherits from
// its role; a role from nothing: see Default).
type Rules struct {
	// AllowUpTo is the highest risk allowed without approval.
	AllowUpTo string `json:"allow_up_to,omitempty" enum:"safe,medium,dangerous" doc:"highest risk tier allowed without approval"`
	// ApproveUpTo is the highest risk that may run with an approval;
	// above it calls are denied. "none": nothing above AllowUpTo runs.
	ApproveUpTo string `json:"approve_up_to,omitempty" enum:"none,safe,medium,dangerous" doc:"highest risk tier that may run after an operator approves; above it: denied"`
	// Flagged is the action for calls the command guard flagged.
	Flagged Action `json:"flagged,omitempty" enum:"allow,approve,deny" doc:"what a call the guard flagged (dangerous rule, code built at run time) needs"`
	// Tools are explicit actions per tool name ("exec.run") or prefix
	// ("file.*").
	Tools map[string]Action `json:"tools,omitempty"`
	// Commands match the command names a command line runs.
	Commands Lists `json:"commands,omitempty"`
	// Paths match the paths a call touches ("/etc/*", "~/.ssh/**").
	Paths Lists `json:"paths,omitempty"`
	// Templates match the templates a call uses (name:tag; host for the
	// host's /usr): a sandbox's create, a build's FROM. With an allow list,
	// only templates on it may be used.
	Templates Lists `json:"templates,omitempty" doc:"templates a key may make sandboxes from or build FROM (name:tag patterns; host is the built-in one); with allow entries, only those"`
	// RateLimits override the server's per-key limits by category name
	// (file, exec, browser, terminal, sandboxes).
	RateLimits map[string]RateRule `json:"rate_limits,omitempty"`
}

// Document is the whole policy.
type Document struct {
	Roles map[string]Rules `json:"roles" required:"true"`
	Keys  map[string]Rules `json:"keys,omitempty"`
}

// Default is the policy a fresh server runs with. The reasoning, in
// SECURITY.md ("Risk policy"): ordinary agent work (ls, python, pip,
// writing files, plain commands the guard rates Medium) flows; what the
// guard flags waits for an operator; viewers only observe.
func Default() Document {
	return Document{Roles: map[string]Rules{
		// The operator's key: everything, flagged commands included.
		string(auth.RoleAdmin): {AllowUpTo: "dangerous", ApproveUpTo: "dangerous", Flagged: ActAllow},
		// Agents: every tier by itself (exec and code are the point of a
		// sandbox), but a command the guard flagged — rm -rf /, curl | sh,
		// credential reads, reverse shells, eval "$x" — needs approval.
		string(auth.RoleAgent): {AllowUpTo: "dangerous", ApproveUpTo: "dangerous", Flagged: ActApprove},
		// Viewers: read-only tools; nothing waits, the rest is refused.
		string(auth.RoleViewer): {AllowUpTo: "safe", ApproveUpTo: "none", Flagged: ActDeny},
	}}
}

// defaultRoles is Default's role table, built once: effective reads the
// default of a role on every call.
var defaultRoles = func() map[auth.Role]Rules {
	m := map[auth.Role]Rules{}
	for r, rules := range Default().Roles {
		m[auth.Role(r)] = rules
	}
	return m
}()

// Exempt are the management tools the policy never restricts: their
// protection is the admin role (dispatch scope), and a policy that denied
// them would lock the operator out of undoing it.
var Exempt = []string{
	"policy.get", "policy.set",
	"control.get", "control.halt", "control.unhalt",
	"approvals.list", "approvals.get", "approvals.approve", "approvals.deny",
}

// Settings is the part of the store the policy uses.
type Settings interface {
	GetSetting(ctx context.Context, key string) ([]byte, error)
	PutSetting(ctx context.Context, key string, value []byte) error
}

// Policy is the live policy. Safe for concurrent use.
type Policy struct {
	st Settings

	// mu guards doc.
	mu  sync.RWMutex
	doc Document
}

var _ dispatch.Policy = (*Policy)(nil)

// Load reads the stored policy (Default when none is stored). A stored
// document that no longer validates is an error: the server does not start
// on a policy it cannot read, rather than fall back to a looser one.
func Load(ctx context.Context, st Settings) (*Policy, error) {
	p := &Policy{st: st, doc: Default()}
	b, err := st.GetSetting(ctx, SettingKey)
	if errors.Is(err, store.ErrNotFound) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	doc, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("stored policy: %w", err)
	}
	p.doc = doc
	return p, nil
}

// Parse decodes and validates a document (unknown fields refused).
func Parse(b []byte) (Document, error) {
	var doc Document
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return doc, fault.InvalidField("body", "policy is not a valid document: "+err.Error())
	}
	return doc, doc.Validate()
}

// Document returns a copy of the policy in force.
func (p *Policy) Document() Document {
	p.mu.RLock()
	defer p.mu.RUnlock()
	b, _ := json.Marshal(p.doc) // our own value: cannot fail
	var out Document
	_ = json.Unmarshal(b, &out)
	return out
}

// Set validates doc, stores it and puts it in force.
func (p *Policy) Set(ctx context.Context, doc Document) error {
	if err := doc.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode policy: %w", err)
	}
	// Keep a copy of our own: the caller's maps may change after Set,
	// and effective hands out the document's maps without copying them.
	var own Document
	if err := json.Unmarshal(b, &own); err != nil {
		return fmt.Errorf("copy policy: %w", err)
	}
	doc = own
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.st.PutSetting(ctx, SettingKey, b); err != nil {
		return fmt.Errorf("store policy: %w", err)
	}
	p.doc = doc
	return nil
}

// Reload puts the stored policy in force (another node of a cluster changed
// it). A stored document that does not validate is an error and the policy
// in force stays: a node never loosens on what it cannot read.
func (p *Policy) Reload(ctx context.Context) error {
	b, err := p.st.GetSetting(ctx, SettingKey)
	doc := Default()
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read policy: %w", err)
	default:
		if doc, err = Parse(b); err != nil {
			return fmt.Errorf("stored policy: %w", err)
		}
	}
	p.mu.Lock()
	p.doc = doc
	p.mu.Unlock()
	return nil
}

// Validate checks every field, naming the offending one.
func (doc Document) Validate() error {
	if len(doc.Keys) > maxKeys {
		return fault.InvalidField("keys", fmt.Sprintf("at most %d keys may have rules of their own", maxKeys))
	}
	for role, r := range doc.Roles {
		if !slices.Contains([]auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}, auth.Role(role)) {
			return fault.InvalidField("roles."+role, fmt.Sprintf("unknown role %q (admin, agent, viewer)", role))
		}
		if err := r.validate("roles." + role); err != nil {
			return err
		}
	}
	for id, r := range doc.Keys {
		if id == "" || len(id) > 64 {
			return fault.InvalidField("keys", "key ids are 1 to 64 bytes")
		}
		if err := r.validate("keys." + id); err != nil {
			return err
		}
	}
	return nil
}

func (r Rules) validate(at string) error {
	for _, f := range []struct {
		name, v string
		none    bool
	}{{"allow_up_to", r.AllowUpTo, false}, {"approve_up_to", r.ApproveUpTo, true}} {
		if f.v == "" || (f.none && f.v == "none") {
			continue
		}
		if guard.ParseRisk(f.v) == 0 || !guard.ParseRisk(f.v).Valid() || guard.ParseRisk(f.v).String() != f.v {
			return fault.InvalidField(at+"."+f.name, fmt.Sprintf("%s.%s: %q is not safe, medium or dangerous", at, f.name, f.v))
		}
	}
	if r.Flagged != "" && !validAction(r.Flagged) {
		return fault.InvalidField(at+".flagged", at+".flagged must be allow, approve or deny")
	}
	if len(r.Tools) > maxListEntries {
		return fault.InvalidField(at+".tools", fmt.Sprintf("at most %d tool entries", maxListEntries))
	}
	for name, act := range r.Tools {
		if !validAction(act) {
			return fault.InvalidField(at+".tools."+name, "tool actions are allow, approve or deny")
		}
		if err := checkPattern(at+".tools", name); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		name string
		l    Lists
	}{{"commands", r.Commands}, {"paths", r.Paths}, {"templates", r.Templates}} {
		for _, list := range []struct {
			name string
			v    []string
		}{{"allow", l.l.Allow}, {"approve", l.l.Approve}, {"deny", l.l.Deny}} {
			field := at + "." + l.name + "." + list.name
			if len(list.v) > maxListEntries {
				return fault.InvalidField(field, fmt.Sprintf("%s: at most %d entries", field, maxListEntries))
			}
			for _, pat := range list.v {
				if err := checkPattern(field, pat); err != nil {
					return err
				}
			}
		}
	}
	if len(r.Paths.Allow) > 0 {
		return fault.InvalidField(at+".paths.allow", "paths have approve and deny lists only (an allowed path cannot make a command safe)")
	}
	if _, err := r.rateRules(at); err != nil {
		return err
	}
	return nil
}

func validAction(a Action) bool { return a == ActAllow || a == ActApprove || a == ActDeny }

func checkPattern(field, pat string) error {
	if pat == "" || len(pat) > maxPattern {
		return fault.InvalidField(field, fmt.Sprintf("%s: patterns are 1 to %d bytes", field, maxPattern))
	}
	if _, err := path.Match(strings.TrimSuffix(pat, "/**"), ""); err != nil {
		return fault.InvalidField(field, fmt.Sprintf("%s: %q is not a valid pattern", field, pat))
	}
	return nil
}

func (r Rules) rateRules(at string) (ratelimit.Rules, error) {
	if len(r.RateLimits) == 0 {
		return nil, nil
	}
	out := make(ratelimit.Rules, len(r.RateLimits))
	for name, rr := range r.RateLimits {
		cat, err := ratelimit.ParseCategory(name)
		if err != nil || cat == ratelimit.AuthFailure || cat == ratelimit.Executions {
			return nil, fault.InvalidField(at+".rate_limits."+name, fmt.Sprintf("unknown rate-limit category %q (file, exec, browser, terminal, sandboxes)", name))
		}
		if math.IsNaN(rr.PerMinute) || math.IsInf(rr.PerMinute, 0) || rr.PerMinute < 0 || rr.PerMinute > 1e6 ||
			rr.Burst < 0 || rr.Burst > 1e6 || rr.Concurrent < 0 || rr.Concurrent > 1e6 {
			return nil, fault.InvalidField(at+".rate_limits."+name, "rate limits are finite numbers between 0 and 1e6")
		}
		out[cat] = ratelimit.Rule{PerMinute: rr.PerMinute, Burst: rr.Burst, Concurrent: rr.Concurrent}
	}
	if err := out.Validate(); err != nil {
		return nil, fault.InvalidField(at+".rate_limits", err.Error())
	}
	return out, nil
}

// effective merges a role's rules with a key's: scalars of the key win,
// lists add up, map entries of the key win.
func (p *Policy) effective(c auth.Caller) Rules {
	p.mu.RLock()
	defer p.mu.RUnlock()
	base := defaultRoles[c.Role]
	role, ok := p.doc.Roles[string(c.Role)]
	if !ok {
		role = base
	}
	key := p.doc.Keys[c.KeyID]
	out := role
	if out.AllowUpTo == "" {
		out.AllowUpTo = base.AllowUpTo
	}
	if out.ApproveUpTo == "" {
		out.ApproveUpTo = base.ApproveUpTo
	}
	if out.Flagged == "" {
		out.Flagged = base.Flagged
	}
	if key.AllowUpTo != "" {
		out.AllowUpTo = key.AllowUpTo
	}
	if key.ApproveUpTo != "" {
		out.ApproveUpTo = key.ApproveUpTo
	}
	if key.Flagged != "" {
		out.Flagged = key.Flagged
	}
	out.Tools = mergeMap(role.Tools, key.Tools)
	out.RateLimits = mergeMap(role.RateLimits, key.RateLimits)
	out.Commands = Lists{Allow: concat(role.Commands.Allow, key.Commands.Allow), Approve: concat(role.Commands.Approve, key.Commands.Approve), Deny: concat(role.Commands.Deny, key.Commands.Deny)}
	out.Paths = Lists{Approve: concat(role.Paths.Approve, key.Paths.Approve), Deny: concat(role.Paths.Deny, key.Paths.Deny)}
	out.Templates = Lists{Allow: concat(role.Templates.Allow, key.Templates.Allow), Approve: concat(role.Templates.Approve, key.Templates.Approve), Deny: concat(role.Templates.Deny, key.Templates.Deny)}
	return out
}

// mergeMap returns a's entries overlaid by b's. The result is only read
// (Evaluate, rateRules), and a policy document is replaced, never changed
// in place (Set, Load): so when one side is empty the other is returned
// as it is, sparing every call an allocation.
func mergeMap[V any](a, b map[string]V) map[string]V {
	switch {
	case len(b) == 0:
		return a
	case len(a) == 0:
		return b
	}
	out := make(map[string]V, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func concat(a, b []string) []string { return append(slices.Clip(a), b...) }

// RateRules returns the caller's rate-limit overrides (role, then key),
// for dispatch.Dispatcher.SetRateRules.
func (p *Policy) RateRules(c auth.Caller) ratelimit.Rules {
	r, _ := p.effective(c).rateRules("")
	return r
}

// Decide implements dispatch.Policy.
func (p *Policy) Decide(_ context.Context, c auth.Caller, t *dispatch.Tool, a dispatch.Assessment, _ any) (dispatch.Decision, string) {
	if slices.Contains(Exempt, t.Name) {
		return dispatch.Allow, ""
	}
	return Evaluate(p.effective(c), t.Name, a)
}

// Evaluate is the decision for one call under rules r (exported for the
// golden table test and for /v1/policy explanations).
func Evaluate(r Rules, tool string, a dispatch.Assessment) (dispatch.Decision, string) {
	risk := a.Risk
	if !risk.Valid() {
		risk = guard.Dangerous
	}
	// Deny lists first: nothing lifts them.
	for _, n := range a.Names {
		if pat, ok := matchAny(r.Commands.Deny, n, false); ok {
			return dispatch.Deny, fmt.Sprintf("command %q is denied (%s)", n, pat)
		}
	}
	for _, pth := range a.Paths {
		if pat, ok := matchAny(r.Paths.Deny, pth, true); ok {
			return dispatch.Deny, fmt.Sprintf("path %q is denied (%s)", pth, pat)
		}
	}
	for _, tree := range a.Trees {
		if pat, ok := matchTree(r.Paths.Deny, tree); ok {
			return dispatch.Deny, fmt.Sprintf("a walk of %q reaches a denied path (%s)", tree, pat)
		}
	}
	for _, tp := range a.Templates {
		if pat, ok := matchAny(r.Templates.Deny, tp, false); ok {
			return dispatch.Deny, fmt.Sprintf("template %q is denied (%s)", tp, pat)
		}
		if _, ok := matchAny(r.Templates.Allow, tp, false); len(r.Templates.Allow) > 0 && !ok {
			return dispatch.Deny, fmt.Sprintf("template %q is not on this key's template allow list", tp)
		}
	}
	entry := tool // whose entry decides
	toolAct, hasToolAct := toolAction(r.Tools, tool)
	if !hasToolAct && a.Guard != nil {
		entry = execRun
		// Every way of running a command line (shell, bash, code, the
		// lines typed into a shell) answers to exec.run's entry unless it
		// has one of its own: "exec.run": "deny" denies commands, not one
		// route to them.
		toolAct, hasToolAct = toolAction(r.Tools, execRun)
	}
	if hasToolAct && toolAct == ActDeny {
		return dispatch.Deny, "tool " + entry + " is denied"
	}
	// The risk tier.
	dec, why := dispatch.Allow, ""
	allow, approve := guard.ParseRisk(r.AllowUpTo), guard.Risk(0)
	if r.ApproveUpTo != "none" {
		approve = guard.ParseRisk(r.ApproveUpTo)
	}
	switch {
	case risk <= allow:
	case risk <= approve:
		dec, why = dispatch.NeedsApproval, fmt.Sprintf("risk %s is above %s", risk, allow)
	default:
		return dispatch.Deny, fmt.Sprintf("risk %s is above what this key may run", risk)
	}
	// An explicit tool entry or a fully allowed, unflagged command lifts
	// (or raises) the tier's answer.
	if hasToolAct {
		dec, why = toolAct.decision(), "tool "+entry+" is set to "+string(toolAct)
	} else if dec == dispatch.NeedsApproval && len(a.Names) > 0 && !a.Flagged() && allMatch(r.Commands.Allow, a.Names) {
		dec, why = dispatch.Allow, ""
	}
	raise := func(d dispatch.Decision, w string) {
		if d > dec {
			dec, why = d, w
		}
	}
	if a.Flagged() && r.Flagged != "" {
		w := "the command guard flagged it"
		if len(a.Rules) > 0 {
			w += " (" + strings.Join(a.Rules, ", ") + ")"
		} else if a.Dynamic {
			w += " (built at run time)"
		}
		raise(r.Flagged.decision(), w)
	}
	for _, n := range a.Names {
		if pat, ok := matchAny(r.Commands.Approve, n, false); ok {
			raise(dispatch.NeedsApproval, fmt.Sprintf("command %q needs approval (%s)", n, pat))
		}
	}
	for _, pth := range a.Paths {
		if pat, ok := matchAny(r.Paths.Approve, pth, true); ok {
			raise(dispatch.NeedsApproval, fmt.Sprintf("path %q needs approval (%s)", pth, pat))
		}
	}
	for _, tree := range a.Trees {
		if pat, ok := matchTree(r.Paths.Approve, tree); ok {
			raise(dispatch.NeedsApproval, fmt.Sprintf("a walk of %q reaches a path that needs approval (%s)", tree, pat))
		}
	}
	for _, tp := range a.Templates {
		if pat, ok := matchAny(r.Templates.Approve, tp, false); ok {
			raise(dispatch.NeedsApproval, fmt.Sprintf("template %q needs approval (%s)", tp, pat))
		}
	}
	return dec, why
}

// execRun is the tool whose entry covers every call that runs a command
// line.
const execRun = "exec.run"

// toolAction finds the entry for tool: the exact name, else the longest
// matching pattern.
func toolAction(m map[string]Action, tool string) (Action, bool) {
	if a, ok := m[tool]; ok {
		return a, true
	}
	best, found := "", Action("")
	for pat, a := range m {
		if ok, _ := path.Match(pat, tool); ok && len(pat) > len(best) {
			best, found = pat, a
		}
	}
	return found, best != ""
}

// matchAny reports the first pattern of pats matching v. Paths are cleaned
// first, "dir/**" matches dir and everything below it, a pattern without
// a slash matches the base name, and ~ is the sandbox's home, /workspace.
func matchAny(pats []string, v string, isPath bool) (string, bool) {
	if isPath {
		v = expandHome(path.Clean(v))
	}
	for _, p := range pats {
		if isPath {
			if matchPath(expandHome(p), v) {
				return p, true
			}
			continue
		}
		if ok, _ := path.Match(p, v); ok {
			return p, true
		}
	}
	return "", false
}

// maxPathDepth bounds the ancestors of a path tried against a "dir/**"
// pattern (a path from a caller may be long).
const maxPathDepth = 64

// matchPath reports whether the cleaned path v matches pattern p.
func matchPath(p, v string) bool {
	if dir, ok := strings.CutSuffix(p, "/**"); ok {
		dir = strings.TrimSuffix(dir, "/")
		if !strings.ContainsAny(dir, "*?[\\") {
			return v == dir || strings.HasPrefix(v, dir+"/") || dir == ""
		}
		// A glob directory (/home/*/.ssh/**): v or one of its ancestors.
		for i, a := 0, v; i < maxPathDepth; i++ {
			if ok, _ := path.Match(dir, a); ok {
				return true
			}
			next := path.Dir(a)
			if next == a {
				break
			}
			a = next
		}
		return false
	}
	if ok, _ := path.Match(p, v); ok {
		return true
	}
	// A pattern without a slash matches the base name (id_rsa, *.pem).
	if !strings.Contains(p, "/") {
		ok, _ := path.Match(p, path.Base(v))
		return ok
	}
	return false
}

// home is the sandbox's home directory (HOME=/workspace): ~ in a pattern
// or a path means it.
const home = "/workspace"

func expandHome(p string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return home + "/" + rest
	}
	return p
}

// matchTree reports the first pattern of pats that a walk of directory
// tree reaches: one matching tree itself or a directory above it, or one
// whose fixed directory part (/etc of /etc/** or /etc/*.conf) lies below
// tree. A base-name pattern (*.pem) has no fixed part: it is matched
// against the walk's root only, not against each file the walk finds
// (the workspace's sensitive-path policy filters walks file by file).
func matchTree(pats []string, tree string) (string, bool) {
	if pat, ok := matchAny(pats, tree, true); ok {
		return pat, true
	}
	tree = expandHome(path.Clean(tree))
	for _, p := range pats {
		fixed := strings.TrimSuffix(expandHome(p), "/**")
		if i := strings.IndexAny(fixed, "*?[\\"); i >= 0 {
			fixed = fixed[:max(0, strings.LastIndexByte(fixed[:i], '/'))]
		}
		if !strings.HasPrefix(fixed, "/") && fixed != "" {
			continue
		}
		if fixed == "" {
			if strings.HasPrefix(expandHome(p), "/") && tree == "/" {
				return p, true // /*/x: below the root
			}
			continue
		}
		fixed = path.Clean(fixed)
		if fixed == tree || tree == "/" || strings.HasPrefix(fixed, tree+"/") {
			return p, true
		}
	}
	return "", false
}

func allMatch(pats []string, names []string) bool {
	for _, n := range names {
		if _, ok := matchAny(pats, n, false); !ok {
			return false
		}
	}
	return true
}
