package sandbox

import "context"

// scopeKey carries the sandbox a request's URL names for calls that name
// none (MCP served at /sandboxes/{id}/mcp): Resolve takes it where it would
// take the caller's default sandbox. It only narrows: Resolve still checks
// the caller may see that sandbox.
type scopeKey struct{}

// WithScope makes id the sandbox of calls under ctx that name none.
func WithScope(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, scopeKey{}, id)
}

// ScopeFrom is the sandbox WithScope set, or "".
func ScopeFrom(ctx context.Context) string {
	id, _ := ctx.Value(scopeKey{}).(string)
	return id
}
