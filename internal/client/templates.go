package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
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

// TemplateEvent is one progress event of a pull, import or build.
type TemplateEvent struct {
	Step    string `json:"step"`
	Layer   int    `json:"layer,omitempty"`
	Layers  int    `json:"layers,omitempty"`
	Digest  string `json:"digest,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"`
	Cached  bool   `json:"cached,omitempty"`
	Message string `json:"message,omitempty"`
	Stream  string `json:"stream,omitempty"`
}

// TemplateMade is the template a pull, import, build or commit made.
type TemplateMade struct {
	Name   string `json:"name"`
	Tag    string `json:"tag"`
	Digest string `json:"digest"`
	Bytes  int64  `json:"bytes"`
}

// PullRequest is POST /v1/templates with an image.
type PullRequest struct {
	Name  string `json:"name"`
	Tag   string `json:"tag,omitempty"`
	Image string `json:"image"`
}

// Pull makes a template by pulling an image (the server must allow its
// registry), calling progress for each step.
func (c *Client) Pull(ctx context.Context, r PullRequest, progress func(TemplateEvent)) (TemplateMade, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return TemplateMade{}, err
	}
	return c.templateStream(ctx, "/v1/templates", nil, bytes.NewReader(b), "application/json", progress)
}

// ImportTemplate uploads an OCI layout tar or a docker save tarball.
func (c *Client) ImportTemplate(ctx context.Context, name, tag string, archive io.Reader, progress func(TemplateEvent)) (TemplateMade, error) {
	q := url.Values{"name": {name}}
	if tag != "" {
		q.Set("tag", tag)
	}
	return c.templateStream(ctx, "/v1/templates/import", q, archive, "application/x-tar", progress)
}

// BuildRequest is a build's settings; the context is sent as a tar.
type BuildRequest struct {
	Name, Tag  string
	Dockerfile string // a path in the context ("" for Dockerfile)
	BuildArgs  []string
	Network    string
	Allow      []string
	NoCache    bool
}

// Build uploads a build context (a tar stream) and builds it.
func (c *Client) Build(ctx context.Context, r BuildRequest, contextTar io.Reader, progress func(TemplateEvent)) (TemplateMade, error) {
	q := url.Values{"name": {r.Name}}
	for k, v := range map[string]string{"tag": r.Tag, "network": r.Network} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if r.NoCache {
		q.Set("no_cache", "true")
	}
	q["allow"], q["build_arg"] = r.Allow, r.BuildArgs
	return c.templateStream(ctx, "/v1/templates/build", q, contextTar, "application/x-tar", progress)
}

// Commit makes a template of a template sandbox's changes.
func (c *Client) Commit(ctx context.Context, sb, name, tag string) (TemplateMade, error) {
	var out TemplateMade
	err := c.call(ctx, http.MethodPost, sandboxPath(sb)+"/commit", nil, map[string]string{"name": name, "tag": tag}, &out)
	return out, err
}

// templateStream posts body and reads the progress events until done.
func (c *Client) templateStream(ctx context.Context, path string, q url.Values, body io.Reader, contentType string, progress func(TemplateEvent)) (TemplateMade, error) {
	req, err := c.newRequest(ctx, http.MethodPost, path, q, body)
	if err != nil {
		return TemplateMade{}, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.do(req, http.StatusOK, http.StatusCreated)
	if err != nil {
		return TemplateMade{}, err
	}
	defer func() { _ = res.Body.Close() }()
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		var out TemplateMade
		return out, decodeEnvelope(res.Body, &out)
	}
	var made *TemplateMade
	var fail error
	err = readSSE(res.Body, func(event string, data []byte) error {
		switch event {
		case "progress":
			var e TemplateEvent
			if json.Unmarshal(data, &e) == nil && progress != nil {
				progress(e)
			}
		case "done":
			var out TemplateMade
			if err := decodeEnvelope(bytes.NewReader(data), &out); err != nil {
				return err
			}
			made = &out
			return errStopSSE
		case "error":
			var env struct {
				Message string `json:"message"`
				Data    struct {
					Code      string `json:"code"`
					RequestID string `json:"request_id"`
				} `json:"data"`
			}
			_ = json.Unmarshal(data, &env)
			fail = &Error{Status: http.StatusOK, Code: env.Data.Code, Message: env.Message, RequestID: env.Data.RequestID}
			return errStopSSE
		}
		return nil
	})
	switch {
	case err != nil:
		return TemplateMade{}, err
	case fail != nil:
		return TemplateMade{}, fail
	case made == nil:
		return TemplateMade{}, errors.New("the stream ended before the template was made (server restarted or connection lost)")
	}
	return *made, nil
}
