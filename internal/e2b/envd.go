package e2b

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/filesystempb/filesystempbconnect"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/processpb/processpbconnect"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// The in-sandbox API: one handler for E2B_SANDBOX_URL (the sandbox and
// port in the E2b-Sandbox-Id and E2b-Sandbox-Port headers) and for the
// content origin's host {port}-{id}.<domain> (ServeHost). Every request
// is authenticated here, before it is routed:
//
//   - an access token (X-Access-Token; for the code interpreter also
//     E2B-Traffic-Access-Token) that verifies for the sandbox it names
//     (token.go), whose key is then re-read (revoked: refused);
//   - or, for GET and POST /files only, a signed URL (signature,
//     signature_expiration) that verifies against the sandbox owner's
//     token for that path, operation and user.
//
// A request without either is 401; a token or signature that does not
// verify is counted against the client address's lockout (10 a minute, as
// a wrong key) and refused.

// Settings of the in-sandbox API, with their reasons.
const (
	// maxRPCBody caps one Connect message (stdin data, paths).
	maxRPCBody = 16 << 20
	// maxKeepalive bounds the keepalive interval a client asks for.
	maxKeepalive = 5 * time.Minute
)

// envdCall is an authenticated in-sandbox request: the key it acts for,
// the sandbox and the E2B user it names.
type envdCall struct {
	caller  auth.Caller
	sandbox string
	// user is "" (the sandbox user) or "root" (sudo).
	user string
	// err is why authentication failed (Connect handlers answer it in
	// their protocol).
	err error
}

type envdKey struct{}

func envdOf(ctx context.Context) envdCall {
	e, _ := ctx.Value(envdKey{}).(envdCall)
	return e
}

// SignedFilesPath is where the SDK's uploadUrl and downloadUrl point
// when E2B_SANDBOX_URL has a path: it builds them with new URL('/files',
// base), which drops the base's path. Only signed URLs are served there,
// naming their sandbox with the E2b-Sandbox-Id header (as E2B's own
// sandbox URL needs); on the content origin's host 49983-{id} the id is
// the host's.
const SignedFilesPath = "/files"

// signedFilesHandler serves SignedFilesPath.
func (s *Service) signedFilesHandler(envd, interp http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.Query().Has("signature") {
			s.writeError(w, r, fault.New(fault.NotFound, "no such route (signed E2B file URLs only)"))
			return
		}
		id := r.Header.Get("E2b-Sandbox-Id")
		if id == "" {
			s.writeError(w, r, fault.New(fault.Invalid, "name the sandbox with the E2b-Sandbox-Id header, or use the URL on the content origin's host 49983-{id}"))
			return
		}
		s.serveSandbox(w, r, envd, interp, id, EnvdPort, SignedFilesPath)
	})
}

// sandboxHandler serves SandboxPrefix.
func (s *Service) sandboxHandler(envd, interp http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		port, err := strconv.Atoi(r.Header.Get("E2b-Sandbox-Port"))
		if err != nil {
			port = EnvdPort // the SDK always sends it; envd is the default
		}
		s.serveSandbox(w, r, envd, interp, r.Header.Get("E2b-Sandbox-Id"), port, strings.TrimPrefix(r.URL.Path, SandboxPrefix))
	})
}

func (s *Service) envdMux() *http.ServeMux {
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(maxRPCBody)}
	mux := http.NewServeMux()
	mux.Handle(processpbconnect.NewProcessHandler(processRPC{s}, opts...))
	mux.Handle(filesystempbconnect.NewFilesystemHandler(fsRPC{s}, opts...))
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /files", s.download)
	mux.HandleFunc("POST /files", s.upload)
	return mux
}

func (s *Service) interpMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /execute", s.execute)
	mux.HandleFunc("GET /contexts", s.listContexts)
	mux.HandleFunc("POST /contexts", s.createContext)
	mux.HandleFunc("DELETE /contexts/{id}", s.removeContext)
	mux.HandleFunc("POST /contexts/{id}/restart", s.restartContext)
	mux.HandleFunc("GET /health", s.health)
	return mux
}

// connectRPC reports whether path is one of the Connect services'.
func connectRPC(path string) bool {
	return strings.HasPrefix(path, "/"+processpbconnect.ProcessName+"/") || strings.HasPrefix(path, "/"+filesystempbconnect.FilesystemName+"/")
}

// serveSandbox authenticates r for sandbox id and serves path on port's
// mux.
func (s *Service) serveSandbox(w http.ResponseWriter, r *http.Request, envd, interp http.Handler, id string, port int, path string) {
	var h http.Handler
	switch port {
	case EnvdPort:
		h = envd
	case InterpreterPort:
		h = interp
	default:
		s.writeError(w, r, fault.Errorf(fault.NotFound, "sandhold serves E2B's ports %d (envd) and %d (code interpreter) here; a sandbox's own ports are reached through the content origin (getHost)", EnvdPort, InterpreterPort))
		return
	}
	e := s.authenticate(r, id, port, path)
	if e.err == nil {
		api.NoteCaller(r.Context(), e.caller)
	}
	rpc := connectRPC(path)
	if e.err != nil && !rpc {
		// A Connect RPC answers the refusal in its own protocol (the
		// handlers check e.err first).
		s.writeError(w, r, e.err)
		return
	}
	if rpc && (strings.HasSuffix(path, "/Start") || strings.HasSuffix(path, "/Connect") || strings.HasSuffix(path, "/WatchDir")) {
		// A stream lives as long as its process or watch, not the
		// server's write timeout.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
	r2 := r.Clone(context.WithValue(r.Context(), envdKey{}, e))
	r2.URL.Path, r2.URL.RawPath = path, ""
	h.ServeHTTP(w, r2)
}

// errNoToken is a request that presents no credential.
var errNoToken = fault.New(fault.Unauthorized, "missing access token: send the X-Access-Token the sandbox's create or connect answered")

// authenticate turns r's token (or URL signature) into the call it makes.
func (s *Service) authenticate(r *http.Request, id string, port int, path string) envdCall {
	ctx := r.Context()
	addr := auth.ClientIP(r.RemoteAddr)
	e := envdCall{sandbox: id}
	user, err := userOf(r)
	if err != nil {
		e.err = err
		return e
	}
	e.user = user
	if d := s.d.Auth.Locked(addr); d > 0 {
		e.err = fault.WithRetryAfter(fault.RateLimited, int((d+time.Second-1)/time.Second), "too many failed authentication attempts; retry later")
		return e
	}
	q := r.URL.Query()
	var keyID string
	switch tok, traffic := r.Header.Get("X-Access-Token"), r.Header.Get("E2B-Traffic-Access-Token"); {
	case q.Has("signature") && path == "/files" && port == EnvdPort:
		keyID, err = s.verifySignature(ctx, r, id)
	case tok != "":
		keyID, err = s.tokens.verify(ctx, purposeEnvd, tok, id)
	case traffic != "" && port == InterpreterPort:
		keyID, err = s.tokens.verify(ctx, purposeTraffic, traffic, id)
	default:
		e.err = errNoToken
		return e
	}
	if err != nil {
		if errors.Is(err, errBadToken) || errors.Is(err, errBadSignature) {
			if lerr := s.d.Auth.RecordFailure(ctx, addr, "e2b: "+err.Error()); fault.KindOf(lerr) == fault.RateLimited {
				e.err = lerr
				return e
			}
			msg := err.Error()
			if fault.KindOf(err) != "" {
				msg = fault.Public(err)
			}
			e.err = fault.Wrap(fault.Unauthorized, err, msg)
			return e
		}
		e.err = err
		return e
	}
	c, err := s.d.Auth.SessionCaller(ctx, keyID, addr)
	if err != nil {
		if errors.Is(err, auth.ErrSessionEnded) {
			e.err = fault.Wrap(fault.Unauthorized, err, "the key this access token belongs to is revoked")
		} else {
			e.err = err
		}
		return e
	}
	c.ViaSession = false // a token of its own, not the console's session
	e.caller = c
	return e
}

// userOf is the E2B user a request names: envd's Authorization: Basic
// "user:" header, or the files API's username parameter.
func userOf(r *http.Request) (string, error) {
	name := r.URL.Query().Get("username")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(strings.TrimSpace(h), " ")
		if !ok || !strings.EqualFold(scheme, "Basic") {
			return "", fault.New(fault.Unauthorized, "envd's Authorization header names the user (Basic); sandhold's keys authenticate the control plane only")
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
		if err != nil {
			return "", fault.New(fault.Invalid, "malformed user in the Authorization header")
		}
		name, _, _ = strings.Cut(string(b), ":")
	}
	switch name {
	case "", "user", "sandbox":
		return "", nil
	case "root":
		return "root", nil
	}
	return "", fault.InvalidField("user", "the users of a sandhold sandbox are user (the sandbox user) and root")
}

// errBadSignature is a signed URL that does not verify.
var errBadSignature = errors.New("the URL's signature is not valid")

// verifySignature checks a signed /files URL: its expiry (required, near),
// then its signature against the sandbox owner's envd token. The key that
// owns the sandbox is the one the call acts for.
func (s *Service) verifySignature(ctx context.Context, r *http.Request, id string) (string, error) {
	q := r.URL.Query()
	if err := checkURLExpiry(q.Get("signature_expiration"), time.Now()); err != nil {
		return "", fault.Wrap(fault.Unauthorized, errBadSignature, err.Error())
	}
	sb, err := s.d.Sandboxes.Get(sandbox.Caller{Admin: true}, id)
	if err != nil {
		return "", errBadSignature // the same answer as a wrong signature
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	token, err := s.tokens.mint(ctx, purposeEnvd, sb.Owner(), id)
	if err != nil {
		return "", err
	}
	exp, _ := strconv.ParseInt(q.Get("signature_expiration"), 10, 64)
	want := urlSignature(q.Get("path"), op, q.Get("username"), token, exp)
	if subtle.ConstantTimeCompare([]byte(want), []byte(q.Get("signature"))) != 1 {
		return "", errBadSignature
	}
	return sb.Owner(), nil
}

// health is envd's GET /health: 204 while the sandbox runs, 502 when it
// is paused or gone (the SDK's isRunning: false).
func (s *Service) health(w http.ResponseWriter, r *http.Request) {
	e := envdOf(r.Context())
	in, err := s.info(r.Context(), e)
	switch {
	case fault.Is(err, fault.NotFound), err == nil && paused(in.State):
		writeJSON(w, http.StatusBadGateway, errorJSON{Code: http.StatusBadGateway, Message: "the sandbox is not running"})
	case err != nil:
		s.writeError(w, r, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
