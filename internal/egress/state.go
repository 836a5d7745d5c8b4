package egress

// A sandbox's routing state: changed through the Proxy's methods (the
// proxy tools), kept with the sandbox's policy, and saved in
// Options.StateDir so a server restart finds it again when the sandbox's
// policy is installed (SetPolicy). It ends with the sandbox's proxy mode
// (Remove: the sandbox is deleted or leaves mode proxy).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// sandboxIDPattern is what a sandbox id must look like to name a state
// file: the ids sandhold makes, and nothing that could walk out of
// StateDir.
var sandboxIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// maxStateBytes bounds a state file read back (MaxMappings entries of
// bounded patterns fit well inside).
const maxStateBytes = 4 << 20

// RoutingOf returns a sandbox's routing with its password in clear; an
// answer to a client must use Masked. ErrNotProxied when the sandbox has
// no policy.
func (p *Proxy) RoutingOf(sandboxID string) (Routing, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.sandboxes[sandboxID]
	if st == nil {
		return Routing{}, ErrNotProxied
	}
	return st.routes.r.clone(), nil
}

// routesOf is the snapshot a connection works on (nil: no policy).
func (p *Proxy) routesOf(sandboxID string) *routes {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.sandboxes[sandboxID]; st != nil {
		return st.routes
	}
	return nil
}

// changeRouting applies edit to a copy of the sandbox's routing, saves it
// and installs it. The lock is held throughout so concurrent changes do
// not lose one another; edit must not block.
func (p *Proxy) changeRouting(sandboxID string, edit func(*Routing) error) (Routing, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.sandboxes[sandboxID]
	if st == nil {
		return Routing{}, ErrNotProxied
	}
	r := st.routes.r.clone()
	if err := edit(&r); err != nil {
		return Routing{}, err
	}
	c, err := compileRouting(r)
	if err != nil {
		return Routing{}, err
	}
	if err := p.saveRouting(sandboxID, r); err != nil {
		return Routing{}, err
	}
	st.routes = c
	return r.clone(), nil
}

// SetUpstream chains the sandbox's connections through u (replacing any
// upstream). The upstream must be allowed by the sandbox's allow list:
// its name or address is checked now (a refusal says why) and again on
// every connection.
func (p *Proxy) SetUpstream(ctx context.Context, sandboxID string, u Upstream) (Upstream, error) {
	if err := p.allowedNow(ctx, sandboxID, u.Host, u.Port, "the upstream proxy"); err != nil {
		return Upstream{}, err
	}
	r, err := p.changeRouting(sandboxID, func(r *Routing) error {
		r.Upstream = &u
		return nil
	})
	if err != nil {
		return Upstream{}, err
	}
	return *r.Upstream, nil
}

// RemoveUpstream makes the sandbox's connections go direct again; it
// reports whether there was an upstream.
func (p *Proxy) RemoveUpstream(sandboxID string) (bool, error) {
	had := false
	_, err := p.changeRouting(sandboxID, func(r *Routing) error {
		had = r.Upstream != nil
		r.Upstream = nil
		return nil
	})
	return had, err
}

// AddExclude adds a bypass pattern (a no-op when listed already) and
// returns the canonical pattern.
func (p *Proxy) AddExclude(sandboxID, pattern string) (string, error) {
	e, err := parseExclude(pattern)
	if err != nil {
		return "", &InputError{Field: "pattern", Err: err}
	}
	_, err = p.changeRouting(sandboxID, func(r *Routing) error {
		if slices.Contains(r.Excludes, e.pattern) {
			return nil
		}
		if len(r.Excludes) >= MaxExcludes {
			return &InputError{Field: "pattern", Err: fmt.Errorf("the sandbox has %d excludes, the most it may hold", MaxExcludes)}
		}
		r.Excludes = append(r.Excludes, e.pattern)
		return nil
	})
	return e.pattern, err
}

// RemoveExclude removes a bypass pattern (any spelling of it); it reports
// whether it was listed.
func (p *Proxy) RemoveExclude(sandboxID, pattern string) (bool, error) {
	e, err := parseExclude(pattern)
	if err != nil {
		return false, &InputError{Field: "pattern", Err: err}
	}
	found := false
	_, err = p.changeRouting(sandboxID, func(r *Routing) error {
		n := len(r.Excludes)
		r.Excludes = slices.DeleteFunc(r.Excludes, func(s string) bool { return s == e.pattern })
		found = len(r.Excludes) != n
		return nil
	})
	return found, err
}

// AddMapping adds a mapping, replacing one with the same source. A target
// other than the sandbox's own loopback must be allowed by the sandbox's
// allow list (checked now and on every connection).
func (p *Proxy) AddMapping(ctx context.Context, sandboxID string, m Mapping) (Mapping, error) {
	if m.Loopback() {
		if p.opts.DialSandbox == nil {
			return Mapping{}, &InputError{Field: "target", Err: errors.New("this server does not reach ports inside sandboxes; map to an allowed host:port")}
		}
		if p.opts.SandboxPorts != nil && !slices.Contains(p.opts.SandboxPorts, m.TargetPort) {
			return Mapping{}, &InputError{Field: "target", Err: fmt.Errorf("port %d is not one of the ports the server reaches inside a sandbox (SANDBOX_PREVIEW_PORTS and the browser's)", m.TargetPort)}
		}
	} else if err := p.allowedNow(ctx, sandboxID, m.TargetHost, m.TargetPort, "the mapping's target"); err != nil {
		return Mapping{}, err
	}
	_, err := p.changeRouting(sandboxID, func(r *Routing) error {
		for i := range r.Mappings {
			if r.Mappings[i].key() == m.key() {
				r.Mappings[i] = m
				return nil
			}
		}
		if len(r.Mappings) >= MaxMappings {
			return &InputError{Field: "source", Err: fmt.Errorf("the sandbox has %d mappings, the most it may hold", MaxMappings)}
		}
		r.Mappings = append(r.Mappings, m)
		return nil
	})
	return m, err
}

// RemoveMapping removes the mapping of a source (as listed, or any
// spelling that parses to the same host and port); it reports whether
// there was one.
func (p *Proxy) RemoveMapping(sandboxID, source string) (bool, error) {
	key := ""
	probe := Mapping{Source: strings.TrimSpace(source)}
	if err := probe.parseSource(); err == nil {
		key = probe.key()
	}
	found := false
	_, err := p.changeRouting(sandboxID, func(r *Routing) error {
		n := len(r.Mappings)
		r.Mappings = slices.DeleteFunc(r.Mappings, func(m Mapping) bool {
			return m.Source == source || (key != "" && m.key() == key)
		})
		found = len(r.Mappings) != n
		return nil
	})
	return found, err
}

// InputError is a routing change refused for one of its fields: a
// malformed value, or a host the sandbox's allow list does not permit.
type InputError struct {
	Field string
	Err   error
}

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// allowedNow checks host:port against the sandbox's allow list as a
// connection would (names resolved, every address checked) and explains
// a refusal. A name that does not resolve now is accepted: the allow list
// permits it, and each connection checks again.
func (p *Proxy) allowedNow(ctx context.Context, sandboxID, host string, port uint16, what string) error {
	a := p.allowlist(sandboxID)
	if a == nil {
		return ErrNotProxied
	}
	_, ref := p.check(ctx, a, host, port)
	if ref == nil || ref.status == http.StatusBadGateway {
		return nil
	}
	field := "target"
	if strings.Contains(what, "upstream") {
		field = "server"
	}
	return &InputError{Field: field, Err: fmt.Errorf("%s is not allowed by the sandbox's egress allow list: %s", what, ref.client)}
}

// statePath is the state file of a sandbox ("" without a state dir).
func (p *Proxy) statePath(sandboxID string) (string, error) {
	if p.opts.StateDir == "" {
		return "", nil
	}
	if !sandboxIDPattern.MatchString(sandboxID) {
		return "", fmt.Errorf("sandbox id %q cannot name a state file", sanitize(sandboxID))
	}
	return filepath.Join(p.opts.StateDir, sandboxID+".json"), nil
}

// saveRouting writes the sandbox's routing atomically (temp file, fsync,
// rename), mode 0600: it holds the upstream's password. Empty routing
// removes the file.
func (p *Proxy) saveRouting(sandboxID string, r Routing) error {
	path, err := p.statePath(sandboxID)
	if err != nil || path == "" {
		return err
	}
	if r.empty() {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove egress routing state: %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(p.opts.StateDir, 0o700); err != nil {
		return fmt.Errorf("egress state dir: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode egress routing: %w", err)
	}
	f, err := os.CreateTemp(p.opts.StateDir, ".routing-*")
	if err != nil {
		return fmt.Errorf("save egress routing: %w", err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // after the rename: nothing left to remove
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save egress routing: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save egress routing: %w", err)
	}
	return nil
}

// loadRouting reads a sandbox's saved routing (empty when none). A file
// that cannot be read or no longer validates is an error: SetPolicy
// refuses rather than silently dropping an upstream the sandbox relied on.
func (p *Proxy) loadRouting(sandboxID string) (*routes, error) {
	path, err := p.statePath(sandboxID)
	if err != nil || path == "" {
		return compileRouting(Routing{})
	}
	f, err := os.Open(path) //nolint:gosec // G304: path is StateDir joined with an id checked by sandboxIDPattern
	if errors.Is(err, os.ErrNotExist) {
		return compileRouting(Routing{})
	}
	if err != nil {
		return nil, fmt.Errorf("read egress routing state: %w", err)
	}
	defer func() { _ = f.Close() }()
	var r Routing
	dec := json.NewDecoder(&limitReader{r: f, n: maxStateBytes})
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("read egress routing state %s: %w", filepath.Base(path), err)
	}
	for _, m := range r.Mappings {
		again, err := ParseMapping(m.Source, m.Target)
		if err != nil || again != m {
			return nil, fmt.Errorf("egress routing state %s: mapping %q does not validate", filepath.Base(path), sanitize(m.Source))
		}
	}
	if r.Upstream != nil {
		if r.Upstream.Scheme != SchemeHTTP && r.Upstream.Scheme != SchemeSOCKS5 {
			return nil, fmt.Errorf("egress routing state %s: unknown upstream scheme", filepath.Base(path))
		}
	}
	return compileRouting(r)
}

// PruneState removes the state files of sandboxes that have no policy
// (deleted, or out of mode proxy, while the server was down). Call it
// after the policies of existing sandboxes are installed.
func (p *Proxy) PruneState() error {
	if p.opts.StateDir == "" {
		return nil
	}
	ents, err := os.ReadDir(p.opts.StateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("egress state dir: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok && !strings.HasPrefix(e.Name(), ".routing-") {
			continue
		}
		if ok && p.sandboxes[id] != nil {
			continue
		}
		if err := os.Remove(filepath.Join(p.opts.StateDir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// limitReader fails once more than n bytes were read (io.LimitReader
// would end silently and hide a truncated file).
type limitReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (l *limitReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("state file too large")
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}
