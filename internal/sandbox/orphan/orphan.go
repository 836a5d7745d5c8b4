// Package orphan marks a request's context for a sandbox whose cluster
// node is dead. The cluster's forwarder (internal/cluster) serves such a
// request on this node instead of forwarding it, and marks it: an orphan
// (a hibernated sandbox, which this node may take over: internal/sandbox's
// sandbox.adopt) or lost (a sandbox that was running there and is lost
// with its node). The marks move nothing and answer nothing themselves;
// internal/sandbox reads them once the request's call, authenticated and
// past the dispatcher's steps, looks the sandbox up.
package orphan

import (
	"context"

	"github.com/sandhold/sandhold/internal/fault"
)

// orphanKey marks a request's context: the sandbox it addresses is held
// by a node that is dead (or was never registered).
type orphanKey struct{}

type orphan struct{ id, from string }

// With marks ctx as a request for sandbox id, whose node from is dead:
// the cluster's forwarder serves the request here instead of forwarding
// it. The mark moves nothing; a call of the request that looks id up
// dispatches sandbox.adopt (the sandbox's Lookup).
func With(ctx context.Context, id, from string) context.Context {
	return context.WithValue(ctx, orphanKey{}, orphan{id: id, from: from})
}

// Of returns the dead node ctx's request found sandbox id on.
func Of(ctx context.Context, id string) (string, bool) {
	o, ok := ctx.Value(orphanKey{}).(orphan)
	if !ok || o.id != id || o.from == "" {
		return "", false
	}
	return o.from, true
}

// lostKey marks a request's context: the sandbox it addresses was
// running (not hibernated) on a node that is dead, so it is lost with it.
type lostKey struct{}

// Lost is the mark of a request for sandbox ID of key Owner, lost with
// its dead node Node.
type Lost struct{ ID, Node, Owner string }

// WithLost marks ctx as a request for sandbox id of key owner, lost with
// its dead node: the forwarder serves the request here instead of
// answering before authentication (which told anyone with a
// credential-shaped header that id exists). A call that looks id up then
// answers 503 "lost" to the key that owns it (and to admins and viewers,
// as Get does) and NotFound to every other key.
func WithLost(ctx context.Context, id, node, owner string) context.Context {
	return context.WithValue(ctx, lostKey{}, Lost{ID: id, Node: node, Owner: owner})
}

// LostOf returns ctx's mark for sandbox id, if its request found it lost
// with its node.
func LostOf(ctx context.Context, id string) (Lost, bool) {
	l, ok := ctx.Value(lostKey{}).(Lost)
	if !ok || l.ID != id {
		return Lost{}, false
	}
	return l, true
}

// Resolve answers a call's lookup of sandbox id for key (admin: an
// admin's): get's answer, or — when get misses (its error, miss) — for a
// request that found id lost with its node, unavailable "lost" to the key
// that owns it (and to admins) and miss to any other key; for a request
// that found id on a dead node, adopt's take-over (its refusal, or get
// again); for any other request, miss.
func Resolve[S any](ctx context.Context, id, key string, admin bool, get func() (S, error), adopt func(miss error) error) (S, error) {
	s, miss := get()
	if miss == nil {
		return s, nil
	}
	var none S
	if l, ok := LostOf(ctx, id); ok {
		if !admin && l.Owner != key {
			return none, miss
		}
		return none, fault.Errorf(fault.Unavailable, "sandbox lost: its node %s is down, and only a hibernated sandbox moves to another node", l.Node)
	}
	if _, ok := Of(ctx, id); !ok {
		return none, miss
	}
	if err := adopt(miss); err != nil {
		return none, err
	}
	return get()
}
