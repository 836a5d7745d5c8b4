package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Key is an API key as the server lists it (never its secret).
type Key struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	RateLimits string     `json:"rate_limits,omitempty"`
	// Secret is the key itself, in the answer to its creation only.
	Secret string `json:"key,omitempty"`
}

// Keys lists the server's keys (admin).
func (c *Client) Keys(ctx context.Context) ([]Key, error) {
	var out []Key
	err := c.call(ctx, http.MethodGet, "/v1/keys", nil, nil, &out)
	return out, err
}

// CreateKey makes a key (admin); the answer holds its secret, shown once.
func (c *Client) CreateKey(ctx context.Context, name, role, rateLimits string) (Key, error) {
	var out Key
	body := map[string]string{"name": name, "role": role}
	if rateLimits != "" {
		body["rate_limits"] = rateLimits
	}
	err := c.call(ctx, http.MethodPost, "/v1/keys", nil, body, &out)
	return out, err
}

// RevokeKey revokes a key by id (admin).
func (c *Client) RevokeKey(ctx context.Context, id string) (Key, error) {
	var out Key
	err := c.call(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(id), nil, nil, &out)
	return out, notFound(err, "key "+Escape(id))
}

// Identity is who the client's key is.
type Identity struct {
	KeyID   string `json:"key_id"`
	KeyName string `json:"key_name"`
	Role    string `json:"role"`
}

// WhoAmI asks the server which key the client authenticates as (GET
// /auth, which answers the bare object rather than an envelope).
func (c *Client) WhoAmI(ctx context.Context) (Identity, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/auth", nil, nil)
	if err != nil {
		return Identity{}, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.do(req, http.StatusOK)
	if err != nil {
		return Identity{}, err
	}
	defer func() { _ = res.Body.Close() }()
	var id Identity
	if err := decodeJSON(res.Body, &id); err != nil {
		return Identity{}, err
	}
	return id, nil
}
