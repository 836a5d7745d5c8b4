package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
)

// Snapshot is a snapshot as the server describes it.
type Snapshot struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Sandbox        string `json:"sandbox"`
	Created        string `json:"created"`
	State          string `json:"state"` // sealing (no digest yet), ready
	Digest         string `json:"digest"`
	Bytes          int64  `json:"bytes"`
	ImageSize      int64  `json:"image_size"`
	Template       string `json:"template"`
	TemplateDigest string `json:"template_digest,omitempty"`
}

// Fork is the answer of a fork.
type Fork struct {
	Snapshot string `json:"snapshot"`
	// SnapshotState is ready (Digest is the snapshot's digest) or sealing
	// (no digest yet: GET the snapshot once it is ready).
	SnapshotState     string    `json:"snapshot_state"`
	Digest            string    `json:"digest,omitempty"`
	Sandboxes         []Sandbox `json:"sandboxes"`
	ProcessesRestored bool      `json:"processes_restored"`
}

func snapshotPath(id string) string { return "/v1/snapshots/" + url.PathEscape(id) }

// CreateSnapshot snapshots sandbox id.
func (c *Client) CreateSnapshot(ctx context.Context, id, name string) (Snapshot, error) {
	var out Snapshot
	err := c.call(ctx, http.MethodPost, sandboxPath(id)+"/snapshots", nil, map[string]string{"name": name}, &out)
	return out, notFound(err, "sandbox "+Escape(id))
}

// Snapshots lists the caller's snapshots.
func (c *Client) Snapshots(ctx context.Context) ([]Snapshot, error) {
	var out []Snapshot
	err := c.call(ctx, http.MethodGet, "/v1/snapshots", nil, nil, &out)
	return out, err
}

// DeleteSnapshot removes a snapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	return notFound(c.call(ctx, http.MethodDelete, snapshotPath(id), nil, nil, nil), "snapshot "+Escape(id))
}

// ForkSnapshot makes count sandboxes from a snapshot.
func (c *Client) ForkSnapshot(ctx context.Context, id string, count int, name string) (Fork, error) {
	var out Fork
	err := c.call(ctx, http.MethodPost, snapshotPath(id)+"/fork", nil, map[string]any{"count": count, "name": name}, &out)
	return out, notFound(err, "snapshot "+Escape(id))
}

// ExportSnapshot writes a snapshot's export (a tar stream) to w and
// returns its digest.
func (c *Client) ExportSnapshot(ctx context.Context, id string, w io.Writer) (string, error) {
	req, err := c.newRequest(ctx, http.MethodGet, snapshotPath(id)+"/export", nil, nil)
	if err != nil {
		return "", err
	}
	res, err := c.do(req, http.StatusOK)
	if err != nil {
		return "", notFound(err, "snapshot "+Escape(id))
	}
	defer func() { _ = res.Body.Close() }()
	if _, err := io.Copy(w, res.Body); err != nil {
		return "", err
	}
	return res.Header.Get("X-Snapshot-Digest"), nil
}

// ImportSnapshot uploads an export as a new snapshot.
func (c *Client) ImportSnapshot(ctx context.Context, name string, r io.Reader) (Snapshot, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	req, err := c.newRequest(ctx, http.MethodPost, "/v1/snapshots/import", q, r)
	if err != nil {
		return Snapshot{}, err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	req.Header.Set("Accept", "application/json")
	res, err := c.do(req, http.StatusCreated)
	if err != nil {
		return Snapshot{}, err
	}
	defer func() { _ = res.Body.Close() }()
	var out Snapshot
	return out, decodeEnvelope(res.Body, &out)
}

// Hibernate snapshots a sandbox and frees it.
func (c *Client) Hibernate(ctx context.Context, id string) error {
	return notFound(c.call(ctx, http.MethodPost, sandboxPath(id)+"/hibernate", nil, nil, nil), "sandbox "+Escape(id))
}
