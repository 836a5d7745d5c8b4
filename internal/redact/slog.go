package redact

import (
	"context"
	"log/slog"
)

// Handler wraps a slog.Handler so that the message and every string
// attribute (including ones in groups and ones added With) pass through
// String first. It is how secrets are kept out of the server log even when
// a caller logs something it should not.
type Handler struct{ inner slog.Handler }

// NewHandler returns h with redaction.
func NewHandler(h slog.Handler) *Handler { return &Handler{inner: h} }

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(attr(a, 0))
		return true
	})
	return h.inner.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = attr(a, 0)
	}
	return &Handler{inner: h.inner.WithAttrs(red)}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name)}
}

func attr(a slog.Attr, depth int) slog.Attr {
	if depth > maxDepth {
		return slog.String(a.Key, Mark)
	}
	if sensitiveKey(a.Key) {
		return slog.String(a.Key, Mark)
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, 0, len(g))
		for _, ga := range g {
			red = append(red, attr(ga, depth+1))
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, String(err.Error()))
		}
		return slog.Any(a.Key, Value(v.Any()))
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}
