// Package sandbox manages sandboxes: their lifecycle (create, list, pause,
// resume, delete, idle expiry), ownership (agents see only their own), the
// default sandbox of each key, a warm pool of pre-built ones, executions
// with their limits, and the reaping of whatever a previous run left
// behind.
//
// A sandbox is an init (internal/agent) in its own namespaces and cgroup
// (internal/isolate/cgroup), with a persistent workspace directory on the
// host. Every execution runs in a cgroup of its own below the sandbox's, so
// a timeout, a disconnect, a delete or a HALT kills exactly that
// execution's process tree — setsid'ed and double-forked children included
// — and an OOM kill is attributed to the execution that caused it.
package sandbox

import (
	"time"

	"github.com/sandhold/sandhold/internal/sandbox/netmode"
	"github.com/sandhold/sandhold/internal/template"
)

// Limits are a sandbox's resource limits. Zero means "the server's
// default"; every value is checked against the server's maximum.
type Limits struct {
	MemoryBytes int64         `json:"memory,omitempty"`
	CPUMilli    int64         `json:"cpu,omitempty"` // 1000 = one CPU
	Pids        int64         `json:"pids,omitempty"`
	DiskBytes   int64         `json:"disk,omitempty"`
	CPUTime     time.Duration `json:"cpu_time,omitempty"` // per execution
}

// Network modes.
const (
	NetworkNone  = netmode.None
	NetworkProxy = netmode.Proxy
	NetworkHost  = netmode.Host
)

// Network is a sandbox's egress setting.
type Network struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
}

// Spec is what a client asks for.
type Spec struct {
	Name    string        `json:"name,omitempty"`
	Limits  Limits        `json:"limits"`
	Network Network       `json:"network"`
	TTL     time.Duration `json:"ttl,omitempty"`
	// Browser starts the sandbox's browser with it and gives it
	// browser-sized default limits (internal/browser's create hook).
	Browser bool `json:"browser,omitempty"`
	// Template is the root the sandbox runs on: a template's name[:tag]
	// or digest ("" or "host": the host's /usr, read-only). A create
	// resolves it and keeps it as name:tag@digest, so the sandbox stays
	// on the content it was made from (template.go).
	Template string `json:"template,omitempty" doc:"template name[:tag] or sha256 digest to make the sandbox from; default host (the host's /usr, read-only)"`
	// Snapshot makes the sandbox from a snapshot (snapshot.go): its
	// image, template, network and limits (those the spec leaves unset).
	Snapshot string `json:"snapshot,omitempty" doc:"snapshot id to make the sandbox from: its files and installed packages, template, network and limits (processes are not restored)"`
	// pinned is a template the server resolved itself (PinTemplate): a
	// build's intermediate steps, which have no name.
	pinned *template.Template
	// Labels are the client's key/value metadata (listings filter by
	// them; E2B's sandbox metadata).
	Labels map[string]string `json:"labels,omitempty" doc:"key/value metadata of the client's (at most 64 labels; keys up to 128 bytes, values up to 1024)"`
	// Env is added to the environment every process of the sandbox
	// starts with (a call's own env wins over it).
	Env map[string]string `json:"env,omitempty" doc:"environment variables every command of the sandbox starts with (a call's env wins)"`
	// OnExpire is what the end of the TTL does (labels.go).
	OnExpire string `json:"on_expire,omitempty" enum:"delete,hibernate" doc:"what the end of the TTL does: delete (default), or hibernate — the sandbox is kept in the snapshot store until a call resumes it (resume or any use; it hibernates again at the janitor's next round unless its TTL was moved)"`
}

// State of a sandbox.
type State string

// States.
const (
	// Running: the init is up.
	Running State = "running"
	// Paused: every process is frozen.
	Paused State = "paused"
	// Stopped: the init is not running (idle expiry, a server restart);
	// the workspace persists and the next use starts it again.
	Stopped State = "stopped"
)

// Record is what the store keeps of a sandbox.
type Record struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Owner   string    `json:"owner"` // the creating key's id
	Default bool      `json:"default"`
	Created time.Time `json:"created"`
	Spec    Spec      `json:"spec"`
	// Slot picks the sandbox's host id range (see idRange).
	Slot int `json:"slot"`
	// Restore is a restore from a snapshot its next start makes
	// (snapshot.go); nil once the image exists.
	Restore *Restore `json:"restore,omitempty"`
	// Moves counts the take-overs that moved the sandbox from a dead node
	// to another (takeover.go): each changes the record, even when the
	// new node gives it the slot it had, as the store's move requires.
	Moves int `json:"moves,omitempty"`
}

// Info is a sandbox as clients see it.
type Info struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Owner     string    `json:"owner"`
	Default   bool      `json:"default"`
	State     State     `json:"state"`
	Created   time.Time `json:"created"`
	LastUsed  time.Time `json:"last_used"`
	Limits    Limits    `json:"limits"`
	Network   Network   `json:"network"`
	TTL       string    `json:"ttl,omitempty"`
	Workspace string    `json:"workspace"`
	// Node is the cluster node that runs the sandbox (empty on one host).
	Node string `json:"node,omitempty"`
	// Template and TemplateDigest name the template the sandbox was made
	// from ("host" and no digest for the host's /usr).
	Template       string `json:"template"`
	TemplateDigest string `json:"template_digest,omitempty"`
	// Snapshot is the snapshot the sandbox was made from; then
	// ProcessesRestored says its processes were not (memory capture is
	// off): its files and packages are the snapshot's, its init is new.
	Snapshot          string `json:"snapshot,omitempty"`
	ProcessesRestored *bool  `json:"processes_restored,omitempty" doc:"set for a sandbox made from a snapshot: false, its processes were not restored"`
	// Labels are the spec's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Expires is when the TTL ends the sandbox (absent without a TTL).
	Expires *time.Time `json:"expires,omitempty"`
}
