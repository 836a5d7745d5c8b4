package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/e2b"
)

// selfAuthenticated are the routes that authenticate their requests
// themselves (api.MountSelfAuthenticated): E2B's in-sandbox API takes a
// per-sandbox access token, never a key, so the key-based walks cannot
// reach them; e2bProbes reach every one of their calls with a real
// token instead.
var selfAuthenticated = map[string]bool{e2b.SandboxPrefix + "/*": true, e2b.SignedFilesPath: true}

// e2bCall is one request of E2B's in-sandbox API.
type e2bCall struct {
	name, method, path string
	port               int
	ctype              string
	body               string
	header             map[string]string
}

// e2bNotServed are the RPCs that answer Unimplemented before they act,
// each with the reason: they reach no capability.
var e2bNotServed = map[string]string{
	"process.Process/StreamInput":            "client streaming: the SDK sends input with SendInput",
	"filesystem.Filesystem/CreateWatcher":    "polled watchers: the SDK watches with WatchDir",
	"filesystem.Filesystem/GetWatcherEvents": "polled watchers: the SDK watches with WatchDir",
	"filesystem.Filesystem/RemoveWatcher":    "polled watchers: the SDK watches with WatchDir",
}

// connectFrame frames one Connect streaming message.
func connectFrame(msg string) string {
	var b [5]byte
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg))) // #nosec G115 -- a test message
	return string(b[:]) + msg
}

// e2bCalls are a request for every call E2B's in-sandbox API serves.
func e2bCalls() []e2bCall {
	rpc := func(name, body string) e2bCall {
		return e2bCall{name: name, method: http.MethodPost, path: "/" + name, port: e2b.EnvdPort, ctype: "application/json", body: body}
	}
	stream := func(name, body string) e2bCall {
		return e2bCall{name: name, method: http.MethodPost, path: "/" + name, port: e2b.EnvdPort, ctype: "application/connect+json",
			body: connectFrame(body), header: map[string]string{"Connect-Timeout-Ms": "1500"}}
	}
	interp := func(method, path, body string) e2bCall {
		return e2bCall{name: "interpreter " + method + " " + path, method: method, path: path, port: e2b.InterpreterPort, ctype: "application/json", body: body}
	}
	return []e2bCall{
		{name: "envd GET /health", method: http.MethodGet, path: "/health", port: e2b.EnvdPort},
		{name: "envd POST /files", method: http.MethodPost, path: "/files?path=/workspace/e2b.txt", port: e2b.EnvdPort, ctype: "application/octet-stream", body: "x"},
		{name: "envd GET /files", method: http.MethodGet, path: "/files?path=/workspace/e2b.txt", port: e2b.EnvdPort},
		rpc("process.Process/List", `{}`),
		stream("process.Process/Start", `{"process":{"cmd":"/bin/true"}}`),
		stream("process.Process/Connect", `{"process":{"pid":1}}`),
		rpc("process.Process/Update", `{"process":{"pid":1},"pty":{"size":{"cols":80,"rows":24}}}`),
		rpc("process.Process/SendInput", `{"process":{"pid":1},"input":{"stdin":"eA=="}}`),
		rpc("process.Process/SendSignal", `{"process":{"pid":1},"signal":"SIGNAL_SIGTERM"}`),
		rpc("process.Process/CloseStdin", `{"process":{"pid":1}}`),
		rpc("filesystem.Filesystem/Stat", `{"path":"/workspace"}`),
		rpc("filesystem.Filesystem/MakeDir", `{"path":"/workspace/d"}`),
		rpc("filesystem.Filesystem/Move", `{"source":"/workspace/d","destination":"/workspace/e"}`),
		rpc("filesystem.Filesystem/ListDir", `{"path":"/workspace","depth":1}`),
		rpc("filesystem.Filesystem/Remove", `{"path":"/workspace/e"}`),
		stream("filesystem.Filesystem/WatchDir", `{"path":"/workspace"}`),
		interp(http.MethodPost, "/execute", `{"code":"1"}`),
		interp(http.MethodGet, "/contexts", ``),
		interp(http.MethodPost, "/contexts", `{"language":"python"}`),
		interp(http.MethodDelete, "/contexts/python-0", ``),
		interp(http.MethodPost, "/contexts/python-0/restart", ``),
		interp(http.MethodGet, "/health", ``),
	}
}

// e2bSandbox creates a sandbox through E2B's control plane as key and
// returns its id and envd access token.
func e2bSandbox(t *testing.T, s *server, key string) (id, token string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.base+e2b.Prefix+"/v2/sandboxes", strings.NewReader(`{"templateID":"base"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var out struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusCreated || json.Unmarshal(b, &out) != nil || out.EnvdAccessToken == "" {
		t.Fatalf("E2B create: %d %s", res.StatusCode, b)
	}
	return out.SandboxID, out.EnvdAccessToken
}

// e2bGrant is a sandbox made through E2B's control plane and its token,
// which acts as the key that made it.
type e2bGrant struct{ sandbox, token string }

// sendE2B makes one in-sandbox request and returns its request id and
// status.
func sendE2B(t *testing.T, s *server, c e2bCall, g e2bGrant) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, c.method, s.base+e2b.SandboxPrefix+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	}
	req.Header.Set("E2b-Sandbox-Id", g.sandbox)
	req.Header.Set("E2b-Sandbox-Port", strconv.Itoa(c.port))
	req.Header.Set("X-Access-Token", g.token)
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	return doE2B(req)
}

// doE2B sends req and returns its request id and status. A Connect
// streaming RPC answers its error in the stream's end message inside a
// 200: those of a refused credential or a limit count as 401 and 429.
func doE2B(req *http.Request) (string, int) {
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	_ = res.Body.Close()
	status := res.StatusCode
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/connect+") {
		switch {
		case strings.Contains(string(body), `"code":"unauthenticated"`):
			status = http.StatusUnauthorized
		case strings.Contains(string(body), `"code":"resource_exhausted"`):
			status = http.StatusTooManyRequests
		}
	}
	return res.Header.Get("X-Request-Id"), status
}

// signedDownload is a request of the SDK's downloadUrl at the host's root:
// signed as the SDK signs (sandbox/signature.ts), the sandbox in the
// E2b-Sandbox-Id header.
func signedDownload(t *testing.T, s *server, g e2bGrant) *http.Request {
	t.Helper()
	exp := strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10)
	sum := sha256.Sum256([]byte("/workspace/e2b.txt:read::" + g.token + ":" + exp))
	sig := "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
	q := url.Values{"path": {"/workspace/e2b.txt"}, "signature": {sig}, "signature_expiration": {exp}}
	req, err := http.NewRequest(http.MethodGet, s.base+e2b.SignedFilesPath+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("E2b-Sandbox-Id", g.sandbox)
	return req
}

// e2bProbe names a call of E2B's in-sandbox API in the chokepoint walk.
func e2bProbe(name string) string { return "e2b " + name }

// e2bProbes are every call of E2B's in-sandbox API, sent with the token
// of the key the walk acts as (grants, made before that key was revoked;
// a key without one — the viewer, which may not create or connect to a
// sandbox — sends none and is refused before the dispatcher). The RPCs of
// e2bNotServed are probed too: they must reach no tool (notCapable).
func (c *chokepoint) e2bProbes(grants map[string]e2bGrant) []probe {
	calls := e2bCalls()
	for name := range e2bNotServed {
		call := e2bCall{name: name, method: http.MethodPost, path: "/" + name, port: e2b.EnvdPort, ctype: "application/json", body: `{}`}
		if strings.HasSuffix(name, "/StreamInput") {
			call.ctype, call.body = "application/connect+json", connectFrame(`{}`)
		}
		calls = append(calls, call)
	}
	var out []probe
	for _, call := range calls {
		out = append(out, probe{name: e2bProbe(call.name), send: func(c *chokepoint, key string) (string, int) {
			return sendE2B(c.t, c.s, call, grants[key])
		}})
	}
	out = append(out, probe{name: e2bProbe("GET " + e2b.SignedFilesPath + " (signed)"), send: func(c *chokepoint, key string) (string, int) {
		return doE2B(signedDownload(c.t, c.s, grants[key]))
	}})
	return out
}
