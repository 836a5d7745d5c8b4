package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/sandhold/sandhold/internal/redact"
)

// NewLogger returns the redacting logger for level: one line of text per
// record for a person when w is a terminal, JSON lines otherwise (a log
// collector, the journal, a file, a test's buffer).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if IsTerminal(w) {
		return slog.New(redact.NewHandler(newConsoleHandler(w, opts)))
	}
	return slog.New(redact.NewHandler(slog.NewJSONHandler(w, opts)))
}

// IsTerminal reports whether w is a character device (a terminal; or
// /dev/null, where the format does not matter).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// consoleHandler writes "15:04:05 INFO  message  key=value …": the time of
// day, the level and the message first, then the attributes as slog's text
// handler quotes them.
type consoleHandler struct {
	w io.Writer
	// mu guards buf, which the attribute handler writes into, and w.
	mu    *sync.Mutex
	buf   *bytes.Buffer
	attrs slog.Handler
}

func newConsoleHandler(w io.Writer, opts *slog.HandlerOptions) *consoleHandler {
	buf := &bytes.Buffer{}
	o := *opts
	o.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
			return slog.Attr{} // written before the attributes
		}
		return a
	}
	return &consoleHandler{w: w, mu: &sync.Mutex{}, buf: buf, attrs: slog.NewTextHandler(buf, &o)}
}

func (h *consoleHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.attrs.Enabled(ctx, l)
}

func (h *consoleHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf.Reset()
	if err := h.attrs.Handle(ctx, r); err != nil {
		return err
	}
	var line bytes.Buffer
	line.WriteString(r.Time.Format("15:04:05"))
	line.WriteByte(' ')
	lv := r.Level.String()
	line.WriteString(lv)
	for range 6 - len(lv) {
		line.WriteByte(' ')
	}
	line.WriteString(r.Message)
	if attrs := bytes.TrimSpace(h.buf.Bytes()); len(attrs) > 0 {
		line.WriteString("  ")
		line.Write(attrs)
	}
	line.WriteByte('\n')
	_, err := h.w.Write(line.Bytes())
	return err
}

func (h *consoleHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = h.attrs.WithAttrs(as)
	return &c
}

func (h *consoleHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.attrs = h.attrs.WithGroup(name)
	return &c
}
