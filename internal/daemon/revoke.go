package daemon

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
)

// inflight tracks the requests in progress by the key they present, so a
// revocation can cancel them: an exec SSE stream, a file-watch stream, a
// long command. Requests are grouped by the SHA-256 of the key (what the
// store keeps), so the table never holds a key itself.
type inflight struct {
	// max bounds one key's requests in progress (0: no bound); set
	// before serving.
	max int

	// mu guards byHash.
	mu     sync.Mutex
	byHash map[string]*reqSet
}

// reqSet are the cancel functions of one key's requests.
type reqSet struct {
	m map[*context.CancelCauseFunc]struct{}
}

// errKeyRevoked is the cancel cause of a revoked key's requests.
var errKeyRevoked = &revokedError{}

type revokedError struct{}

func (*revokedError) Error() string { return "the API key was revoked" }

// track wraps next: every request carrying an API key runs with a context
// that revocation of that key cancels. Requests with a ticket or no
// credential, and WebSocket upgrades, pass through: WebSocket and MCP
// sessions are ended by their own services' revocation hooks, which close
// them with a policy-violation status the client can tell from a network
// drop (cancelling the upgrade request's context would race that close).
func (in *inflight) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			next.ServeHTTP(w, r)
			return
		}
		cred, err := auth.ParseCredential(r.Header, r.URL.Query())
		if err != nil || cred.Key == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := string(auth.HashKey(cred.Key))
		ctx, cancel := context.WithCancelCause(r.Context())
		p := &cancel
		in.mu.Lock()
		if in.byHash == nil {
			in.byHash = map[string]*reqSet{}
		}
		set := in.byHash[h]
		if set == nil {
			set = &reqSet{m: map[*context.CancelCauseFunc]struct{}{}}
			in.byHash[h] = set
		}
		if in.max > 0 && len(set.m) >= in.max {
			// One key's flood (thousands of calls waiting for approval)
			// holds its own share of the server, not every connection:
			// refused before any work, and the connection is closed.
			in.mu.Unlock()
			cancel(nil)
			w.Header().Set("Connection", "close")
			api.WriteError(w, r, fault.WithRetryAfter(fault.RateLimited, 1,
				fmt.Sprintf("this key has %d requests in progress, the most it may (SANDBOX_MAX_CONNECTIONS_PER_KEY)", in.max)))
			return
		}
		set.m[p] = struct{}{}
		in.mu.Unlock()
		defer func() {
			in.mu.Lock()
			delete(set.m, p)
			if len(set.m) == 0 && in.byHash[h] == set {
				delete(in.byHash, h)
			}
			in.mu.Unlock()
			cancel(nil)
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// cancel ends every request in progress with the key whose hash is h and
// returns how many.
func (in *inflight) cancel(h []byte) int {
	in.mu.Lock()
	set := in.byHash[string(h)]
	delete(in.byHash, string(h))
	var fns []*context.CancelCauseFunc
	if set != nil {
		for c := range set.m {
			fns = append(fns, c)
		}
	}
	in.mu.Unlock()
	for _, c := range fns {
		(*c)(errKeyRevoked)
	}
	return len(fns)
}

// count is the number of requests in progress (tests and metrics).
func (in *inflight) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, s := range in.byHash {
		n += len(s.m)
	}
	return n
}

// revokeTimeout bounds the clean-up after a revocation (killing trees and
// stopping sandboxes is bounded by each step's own waits; this bounds the
// store look-up and the audit record).
const revokeTimeout = 30 * time.Second

// onRevoke registers fn to end what a revoked key holds in one capability
// (sessions, interpreters); it runs, with the others, after the key's
// requests were cancelled and before its sandboxes stop.
func (d *Daemon) onRevoke(fn func(keyID string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.revokers = append(d.revokers, fn)
}

// endKey ends everything key id holds (the auth service's OnRevoke hook,
// run in its own goroutine: the hook must not block): its requests in
// progress (streams included), its sessions and interpreters, every
// execution it started, and its sandboxes, which are stopped with their
// workspaces kept. One audit record says what was ended.
func (d *Daemon) endKey(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	requests := 0
	if ks, err := d.store.ListKeys(ctx); err == nil {
		for _, k := range ks {
			if k.ID == id {
				requests = d.inflight.cancel(k.Hash)
			}
		}
	} else {
		d.log.Error("revocation: list keys", "key", id, "err", err)
	}
	d.mu.Lock()
	fns := append([]func(string){}, d.revokers...)
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(id)
		}()
	}
	wg.Wait()
	stopped, killed := d.sandboxes.RevokeOwner(id)
	if _, err := d.audit.Append(ctx, audit.Entry{Actor: "system", Action: "key.revoke.end", Target: id, Verdict: audit.Allow,
		Detail: map[string]any{"requests_cancelled": requests, "sandboxes_stopped": stopped, "executions_killed": killed}}); err != nil {
		d.log.Error("audit key.revoke.end", "key", id, "err", err)
	}
	d.log.Info("revoked key's holdings ended", "key", id, "requests", requests, "sandboxes", len(stopped), "executions", killed)
}
