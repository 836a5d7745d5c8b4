package daemontest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/sandhold/sandhold/internal/daemon"
)

// Client is the HTTP client of the end-to-end suites: JSON in, AIO's
// envelope out, every failure to talk at all a test failure.
type Client struct {
	t testing.TB
	// Base is the server's URL, "http://127.0.0.1:port".
	Base string
	// Key is sent as "Authorization: Bearer"; empty sends none.
	Key string
	// HTTP does the requests; nil is http.DefaultClient.
	HTTP *http.Client
}

// NewClient is a client of d holding its admin key.
func NewClient(t testing.TB, d *daemon.Daemon) *Client {
	return &Client{t: t, Base: "http://" + d.Addr(), Key: d.AdminKey()}
}

// As is a copy of c that authenticates with key.
func (c *Client) As(key string) *Client {
	cp := *c
	cp.Key = key
	return &cp
}

// Reply is one answer: the status, the headers, the raw body and, when the
// body is an envelope, its fields.
type Reply struct {
	Status int
	Header http.Header
	Raw    []byte
	// Envelope is false when the body is not AIO's JSON envelope.
	Envelope bool
	Success  bool
	Message  string
	Data     json.RawMessage
}

// Do sends one request. A body that is an io.Reader is sent as it is
// (set the content type with the header pairs), anything else non-nil as
// JSON. header holds name, value pairs.
func (c *Client) Do(method, path string, body any, header ...string) Reply {
	c.t.Helper()
	var rd io.Reader
	isJSON := false
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatalf("%s %s: encode body: %v", method, path, err)
		}
		rd, isJSON = bytes.NewReader(raw), true
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	if isJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	if len(header)%2 != 0 {
		c.t.Fatalf("%s %s: header needs name, value pairs", method, path)
	}
	for i := 0; i < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	r := Reply{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	var env struct {
		Success *bool           `json:"success"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Success != nil {
		r.Envelope, r.Success, r.Message, r.Data = true, *env.Success, env.Message, env.Data
	}
	return r
}

// JSON sends one request, fails the test unless the answer has status want
// and is an envelope, and decodes its data into out (when out is not nil).
func (c *Client) JSON(method, path string, body any, want int, out any) Reply {
	c.t.Helper()
	r := c.Do(method, path, body)
	if r.Status != want || !r.Envelope {
		c.t.Fatalf("%s %s: status %d, want %d with an envelope: %s", method, path, r.Status, want, r.Raw)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			c.t.Fatalf("%s %s: decode data: %v: %s", method, path, err, r.Raw)
		}
	}
	return r
}

// Key is a key as its creation answers it; Key is the secret.
type Key struct {
	ID   string `json:"id"`
	Key  string `json:"key"`
	Role string `json:"role"`
}

// NewKey creates a key named name with role (agent, admin, viewer); c must
// hold an admin key.
func (c *Client) NewKey(name, role string) Key {
	c.t.Helper()
	var k Key
	c.JSON("POST", "/v1/keys", map[string]any{"name": name, "role": role}, http.StatusCreated, &k)
	if k.Key == "" || k.ID == "" {
		c.t.Fatalf("create %s key: no id or secret in the answer", role)
	}
	return k
}

// NewSandbox creates a sandbox from spec (nil for the defaults) and returns
// its id.
func (c *Client) NewSandbox(spec any) string {
	c.t.Helper()
	if spec == nil {
		spec = map[string]any{}
	}
	var sb struct {
		ID string `json:"id"`
	}
	c.JSON("POST", "/v1/sandboxes", spec, http.StatusCreated, &sb)
	if sb.ID == "" {
		c.t.Fatal("create sandbox: no id in the answer")
	}
	return sb.ID
}

// ExecResult is the answer of one foreground command.
type ExecResult struct {
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// Exec runs command in sandbox id and returns its result; a refused call
// fails the test (a command that exits non-zero does not).
func (c *Client) Exec(id, command string) ExecResult {
	c.t.Helper()
	var res ExecResult
	c.JSON("POST", "/v1/sandboxes/"+url.PathEscape(id)+"/exec", map[string]any{"command": command}, http.StatusOK, &res)
	return res
}

// WithT is a copy of c that reports to t (for a Client built as a literal).
func WithT(c *Client, t testing.TB) *Client {
	cp := *c
	cp.t = t
	return &cp
}
