package dispatch

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

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
