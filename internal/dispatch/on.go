package dispatch

// On names the sandbox a call acts on. Every tool argument type that acts
// in one sandbox embeds it (internal/gates holds it: no argument struct
// declares a sandbox field of its own), so the field's JSON name, tags and
// description are the same for every tool, and an edge that takes the
// sandbox from elsewhere — a route's /sandboxes/{id}, E2B's sandbox
// header — names it the one way, through Targeted:
//
//	type ReadArgs struct {
//		dispatch.On
//		File string `json:"file"`
//	}
//
// Embed it where the field stood: encoding/json writes an embedded
// struct's fields at its place, so the JSON keeps its field order.
type On struct {
	Sandbox string `json:"sandbox,omitempty" doc:"sandbox id; empty: the caller's default sandbox"`
}

// ActOn names the sandbox the call acts on. (Not "Target": a tool's own
// field of that name — a proxy mapping's target — hid the method, so its
// arguments were no Targeted and an edge could not name their sandbox.)
func (o *On) ActOn(id string) { o.Sandbox = id }

// SandboxID is the sandbox the call names ("": the caller's default).
func (o On) SandboxID() string { return o.Sandbox }

// Targeted is an argument type whose sandbox an edge can name: the
// pointer of every type that embeds On.
type Targeted interface {
	ActOn(id string)
}

var _ Targeted = (*On)(nil)
