package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// TemplateSummary is a template as the server lists it.
type TemplateSummary struct {
	Name    string `json:"name,omitempty"`
	Tag     string `json:"tag,omitempty"`
	Digest  string `json:"digest"`
	Owner   string `json:"owner,omitempty"`
	Created string `json:"created"`
	Bytes   int64  `json:"bytes"`
	Layers  int    `json:"layers"`
	Source  string `json:"source"`
}

func templatePath(ref string) string { return "/v1/templates/" + url.PathEscape(ref) }

// Templates lists the templates the caller may use.
func (c *Client) Templates(ctx context.Context) ([]TemplateSummary, error) {
	var out []TemplateSummary
	err := c.call(ctx, http.MethodGet, "/v1/templates", nil, nil, &out)
	return out, err
}

// Template returns one template as the server describes it (layers,
// config, source), as raw JSON.
func (c *Client) Template(ctx context.Context, ref string) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.call(ctx, http.MethodGet, templatePath(ref), nil, nil, &out)
	return out, notFound(err, "template "+Escape(ref))
}

// RemoveTemplate removes a template's name.
func (c *Client) RemoveTemplate(ctx context.Context, ref string) error {
	return notFound(c.call(ctx, http.MethodDelete, templatePath(ref), nil, nil, nil), "template "+Escape(ref))
}
