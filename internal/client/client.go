package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Caps of the client, with their reasons.
const (
	// maxJSONBody bounds an answer read into memory: the largest the
	// server sends is a page of audit records or exec output (1 MiB per
	// stream); a server answering more is broken or hostile.
	maxJSONBody = 32 << 20
	// maxErrorBody bounds an error answer read to find its message.
	maxErrorBody = 64 << 10
	// dialTimeout bounds connecting; the calls themselves are bounded by
	// their context (streams may last as long as the command runs).
	dialTimeout = 10 * time.Second
)

// Client calls one server with one key.
type Client struct {
	base *url.URL
	key  string
	http *http.Client
	// UserAgent is sent with every request.
	UserAgent string
	// ApprovalWait, when set, asks the server to hold a call that needs
	// an operator's approval this long for the decision (X-Approval-Wait;
	// the server caps it) instead of answering 202 at once.
	ApprovalWait time.Duration
}

// New returns a client for c.
func New(c Config) (*Client, error) {
	u, err := ParseURL(c.URL)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(c.Key) == "" {
		return nil, ErrNotLoggedIn
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dialTimeout}).DialContext,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: 0, // streams and long polls answer late
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}
	hc := &http.Client{
		Transport: tr,
		// The API never redirects; following one could send the key
		// to wherever the Location points.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Client{base: u, key: strings.TrimSpace(c.Key), http: hc, UserAgent: "sandhold-cli"}, nil
}

// BaseURL is the server's URL (without a key).
func (c *Client) BaseURL() string { return c.base.String() }

// url joins the base URL and an API path (already escaped by the caller
// with url.PathEscape for its variable parts) and a query.
func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawPath = c.base.EscapedPath() + path
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// newRequest builds an authenticated request.
func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("User-Agent", c.UserAgent)
	if c.ApprovalWait > 0 {
		req.Header.Set("X-Approval-Wait", strconv.Itoa(int(c.ApprovalWait/time.Second)))
	}
	return req, nil
}

// do sends req and returns the response when its status is one of ok;
// any other answer becomes an *Error (the body is read and closed).
func (c *Client) do(req *http.Request, ok ...int) (*http.Response, error) {
	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	for _, s := range ok {
		if res.StatusCode == s {
			return res, nil
		}
	}
	defer func() { _ = res.Body.Close() }()
	return nil, errorFrom(res)
}

// transportError words a failure to reach the server (never with the key:
// url.Error carries the URL, which holds none).
func (c *Client) transportError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ne *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach the server at %s (connection refused): is it running? (`sandhold serve`, or `sandhold login` another URL)", c.base)
	case errors.As(err, &ne):
		return fmt.Errorf("cannot reach the server at %s (%w): check the URL with `sandhold login`", c.base, ne.Err)
	}
	return fmt.Errorf("request to %s failed: %w", c.base, err)
}

// call sends a JSON request (in may be nil) and decodes the envelope's
// data into out (may be nil).
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.do(req, http.StatusOK, http.StatusCreated)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	return decodeEnvelope(res.Body, out)
}

// envelope is the server's answer shape.
type envelope struct {
	Success bool            `json:"success"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Hint    *string         `json:"hint"`
}

func decodeEnvelope(r io.Reader, out any) error {
	var env envelope
	if err := json.NewDecoder(io.LimitReader(r, maxJSONBody)).Decode(&env); err != nil {
		return fmt.Errorf("the server's answer is not a sandhold envelope: %w", err)
	}
	if !env.Success {
		// AIO-style tool failures are 200 with success false.
		return &Error{Status: http.StatusOK, Message: env.Message}
	}
	if out == nil || len(env.Data) == 0 {
		return nil
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("decode the server's answer: %w", err)
	}
	return nil
}

// Error is a refusal by the server: its status, kind and public message.
// Error() is one line that says what to do.
type Error struct {
	Status    int
	Code      string
	Message   string
	RequestID string
	// Field names the refused input ("body.timeout", "query.limit").
	Field      string
	ApprovalID string
	// RetryAfter is the wait a 429 asks for.
	RetryAfter time.Duration
	// Resource names what a 404 was about ("sandbox sb…"), when known.
	Resource string
}

// Error implements error.
func (e *Error) Error() string {
	msg := oneLine(e.Message)
	switch {
	case e.Status == http.StatusUnauthorized:
		return "the server refused the key (" + msg + "): run `sandhold login URL` with a valid key, or fix SANDHOLD_KEY"
	case e.Status == http.StatusTooManyRequests:
		wait := "a moment"
		if e.RetryAfter > 0 {
			wait = e.RetryAfter.String()
		}
		return "rate limited (" + msg + "): wait " + wait + " and run the command again"
	case e.Status == http.StatusAccepted && e.ApprovalID != "":
		return "this call waits for an operator's approval (id " + e.ApprovalID + "): run the same command again once it is approved, or wait for the decision with `exec --wait-approval`"
	case e.Code == CodeApprovalDenied:
		return "denied: " + msg + " (an operator's decision on this exact call; change it or ask the operator)"
	case e.Status == http.StatusNotFound && e.Resource != "":
		return e.Resource + " not found (" + msg + "): it was deleted or never existed; see `sandhold ls`"
	case e.Status == http.StatusForbidden:
		return "forbidden: " + msg + " (this key's role or the policy does not allow it)"
	case e.Status == http.StatusConflict && strings.Contains(strings.ToLower(msg), "halt"):
		return "refused: " + msg + " (an operator must unhalt the server)"
	}
	s := msg
	if e.Code != "" {
		s += " [" + e.Code + "]"
	}
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// oneLine keeps a server message to one printable line.
func oneLine(s string) string {
	s = Escape(strings.TrimSpace(s))
	const maxMsg = 300 // a message longer than this is not read anyway
	if len(s) > maxMsg {
		s = s[:maxMsg] + "…"
	}
	if s == "" {
		s = "no message"
	}
	return s
}

// errorFrom turns a non-success answer into *Error.
func errorFrom(res *http.Response) error {
	e := &Error{Status: res.StatusCode, Message: http.StatusText(res.StatusCode)}
	if ra := res.Header.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(ra); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	var env struct {
		Message string `json:"message"`
		Data    struct {
			Code       string `json:"code"`
			RequestID  string `json:"request_id"`
			Field      string `json:"field"`
			ApprovalID string `json:"approval_id"`
		} `json:"data"`
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	if json.Unmarshal(b, &env) == nil && env.Message != "" {
		e.Message, e.Code, e.RequestID, e.ApprovalID = env.Message, env.Data.Code, env.Data.RequestID, env.Data.ApprovalID
		e.Field = env.Data.Field
	}
	return e
}

// CodeApprovalDenied is the error code of a call an operator denied.
const CodeApprovalDenied = "approval_denied"

// IsApprovalPending reports whether err is a call waiting for an
// operator's approval (202), and its approval id.
func IsApprovalPending(err error) (string, bool) {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusAccepted && e.ApprovalID != "" {
		return e.ApprovalID, true
	}
	return "", false
}

// IsApprovalDenied reports whether err is a call an operator denied.
func IsApprovalDenied(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeApprovalDenied
}

// notFound labels a 404 with what was looked for.
func notFound(err error, resource string) error {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound && e.Resource == "" {
		e.Resource = resource
	}
	return err
}

// IsStatus reports whether err is a server refusal with this status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// decodeJSON reads a bare JSON answer (not an envelope), bounded.
func decodeJSON(r io.Reader, out any) error {
	if err := json.NewDecoder(io.LimitReader(r, maxJSONBody)).Decode(out); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	return nil
}
