package cluster

import (
	"errors"
	"net/http"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/store"
)

// Which node runs a sandbox is a question to the shared store, asked
// before the API authenticates the request (the node that runs the
// sandbox does). So that a stranger cannot make every node query the
// database at will — every /sandboxes/{random}/… was a query — the
// forwarder asks the store only for a request that carries a credential
// (a key header, a ticket, a cookie: the API checks it), at most
// lookupPerMinute times a minute per client address, and remembers both
// answers: who runs a sandbox (sandboxes never move) and that an id is
// unknown (ids are random and never reused; a create through this node
// forgets the unknown ones, in case one was asked for early).
const (
	ownerTTL  = time.Minute
	maxOwners = 4096
	// missingTTL and maxMissing: how long and how many unknown ids are
	// remembered (a client that learned an id from a create on another
	// node asks for it after the create, so it was never unknown here).
	missingTTL = time.Minute
	maxMissing = 4096
	// lookupPerMinute and lookupBurst bound each client address's store
	// lookups: a client works with a few sandboxes, found once each.
	lookupPerMinute = 120
	lookupBurst     = 60
	// lookupRetry is the Retry-After of a refused lookup, in seconds.
	lookupRetry = 1
)

// errLookups: the client's store lookups are used up.
var errLookups = errors.New("store lookups of this client used up")

// errNoCredential: a request without a credential is not looked up.
var errNoCredential = errors.New("no credential")

func newLookupLimiter() *ratelimit.Limiter {
	return ratelimit.New(ratelimit.Options{Rules: ratelimit.Rules{ratelimit.Read: {PerMinute: lookupPerMinute, Burst: lookupBurst}}})
}

type ownerAt struct {
	node string
	at   time.Time
}

// owner returns the node that runs sandbox id, from what is remembered or
// — for a request with a credential, within its client's lookups — from
// the store.
func (f *Forwarder) owner(r *http.Request, id string) (string, error) {
	now := f.now()
	f.mu.Lock()
	o, known := f.owners[id]
	at, missing := f.missing[id]
	f.mu.Unlock()
	switch {
	case known && now.Sub(o.at) < ownerTTL:
		return o.node, nil
	case missing && now.Sub(at) < missingTTL:
		return "", errUnknown
	case !hasCredential(r):
		return "", errNoCredential
	case !f.lookups.Allow(clientIP(r.RemoteAddr), ratelimit.Read).Allowed:
		return "", errLookups
	}
	node, err := f.nodes.SandboxNode(r.Context(), id)
	if err == nil {
		f.remember(id, node)
		return node, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if errors.Is(err, store.ErrNotFound) {
		if f.missing == nil || len(f.missing) >= maxMissing {
			f.missing = make(map[string]time.Time)
		}
		f.missing[id] = now
	}
	return "", err
}

// remember notes that node runs sandbox id.
func (f *Forwarder) remember(id, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owners == nil || len(f.owners) >= maxOwners {
		f.owners = make(map[string]ownerAt)
	}
	f.owners[id] = ownerAt{node, f.now()}
}

// forget drops what is remembered of sandbox id's node: it was dead, and
// the sandbox may move (deadOwner).
func (f *Forwarder) forget(id string) {
	f.mu.Lock()
	delete(f.owners, id)
	f.mu.Unlock()
}

// errUnknown: the store said it does not know the id (remembered).
var errUnknown = errors.New("unknown sandbox")

// hasCredential reports whether r carries anything the API would take as
// a credential (it decides whether it is one).
func hasCredential(r *http.Request) bool {
	for _, h := range []string{"Authorization", "X-API-Key", "X-AIO-API-Key"} {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return r.URL.Query().Has(auth.TicketParam) || len(r.Cookies()) > 0
}
