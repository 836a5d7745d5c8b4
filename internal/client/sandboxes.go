package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Sandbox is a sandbox as the server lists it.
type Sandbox struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Owner    string        `json:"owner"`
	Default  bool          `json:"default"`
	State    string        `json:"state"`
	Created  time.Time     `json:"created"`
	LastUsed time.Time     `json:"last_used"`
	Limits   SandboxLimits `json:"limits"`
	Network  struct {
		Mode  string   `json:"mode"`
		Allow []string `json:"allow"`
	} `json:"network"`
	TTL string `json:"ttl,omitempty"`
	// Template is the template's name:tag ("host" for the host's /usr).
	Template       string `json:"template,omitempty"`
	TemplateDigest string `json:"template_digest,omitempty"`
}

// SandboxLimits are a sandbox's limits as the server reports them.
type SandboxLimits struct {
	MemoryBytes int64 `json:"memory"`
	CPUMilli    int64 `json:"cpu"`
	Pids        int64 `json:"pids"`
	DiskBytes   int64 `json:"disk"`
	CPUTime     int64 `json:"cpu_time"` // nanoseconds
}

// Limits are a new sandbox's limits as the API takes them.
type Limits struct {
	Memory  string  `json:"memory,omitempty"`
	CPU     float64 `json:"cpu,omitempty"`
	Pids    int64   `json:"pids,omitempty"`
	Disk    string  `json:"disk,omitempty"`
	CPUTime string  `json:"cpu_time,omitempty"`
}

// Network is a new sandbox's network.
type Network struct {
	Mode  string   `json:"mode,omitempty"`
	Allow []string `json:"allow,omitempty"`
}

// CreateRequest is POST /v1/sandboxes.
type CreateRequest struct {
	Name    string   `json:"name,omitempty"`
	Limits  *Limits  `json:"limits,omitempty"`
	Network *Network `json:"network,omitempty"`
	TTL     string   `json:"ttl,omitempty"`
	// Template is the template to make the sandbox from (name[:tag] or
	// digest); empty: host.
	Template string `json:"template,omitempty"`
	// Snapshot restores a snapshot into the new sandbox.
	Snapshot string `json:"snapshot,omitempty"`
}

func sandboxPath(id string) string { return "/v1/sandboxes/" + url.PathEscape(id) }

// aioPath is the prefix of the AIO-style and transfer routes of a given
// sandbox (/sandboxes/{id}/v1/...).
func aioPath(id string) string { return "/sandboxes/" + url.PathEscape(id) }

// List returns the caller's sandboxes (admins and viewers: all).
func (c *Client) List(ctx context.Context) ([]Sandbox, error) {
	var out []Sandbox
	err := c.call(ctx, http.MethodGet, "/v1/sandboxes", nil, nil, &out)
	return out, err
}

// Get returns one sandbox.
func (c *Client) Get(ctx context.Context, id string) (Sandbox, error) {
	var out Sandbox
	err := c.call(ctx, http.MethodGet, sandboxPath(id), nil, nil, &out)
	return out, notFound(err, "sandbox "+Escape(id))
}

// Create makes a sandbox.
func (c *Client) Create(ctx context.Context, r CreateRequest) (Sandbox, error) {
	var out Sandbox
	err := c.call(ctx, http.MethodPost, "/v1/sandboxes", nil, r, &out)
	return out, err
}

// Delete removes a sandbox, its processes and its workspace.
func (c *Client) Delete(ctx context.Context, id string) error {
	return notFound(c.call(ctx, http.MethodDelete, sandboxPath(id), nil, nil, nil), "sandbox "+Escape(id))
}
