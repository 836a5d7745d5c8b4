package aio

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/workspace"
)

// FileRoutes mounts AIO's file API (tags file and file-watch) from the
// AIO route table: at /v1/file/... on the caller's default sandbox and at
// /sandboxes/{id}/v1/file/... on a given one. A failure's data is AIO's
// FileOperationError.
func FileRoutes(s *api.Server, d *dispatch.Dispatcher) { mountAIO(s, d, groupFile) }

// watchList wraps the watch list as AIO does.
type watchList struct {
	Watches []workspace.WatchInfo `json:"watches"`
}

// events streams a watch's events as server-sent events, with AIO's
// names: "watch_started" first (data: the watch), one "file_change" per
// change (data: the event) with the id "{watcher_id}:{seq}" (Last-Event-ID,
// in that form or as a bare seq, resumes after it; so does ?cursor=N), a
// comment every 15 s, and "watch_stopped" when the watch ends.
func watchEvents(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	ref := workspace.WatchRef{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, WatcherID: chi.URLParam(r, "watcher_id")}
	watch, err := workspace.ToolWatchEvents.Call(r.Context(), e.dispatcher(), callerOf(r), ref)
	if err != nil {
		e.fail(w, r, rt, ref.WatcherID, err)
		return
	}
	var cursor int64
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("cursor")} {
		if n, ok := parseEventID(watch.ID(), v); ok {
			cursor = n
		}
	}
	flusher, _ := w.(http.Flusher)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	info, _ := json.Marshal(watch.Info())
	// #nosec G705 -- a text/event-stream (never rendered as HTML) of a server-made id and JSON.
	if _, err := fmt.Fprintf(w, "id: %s:%d\nevent: watch_started\ndata: %s\n\n", watch.ID(), cursor, info); err != nil {
		return
	}
	if flusher != nil {
		flusher.Flush()
	}
	for {
		evs, last, _, ended := watch.Next(r.Context(), cursor, 100, 15*time.Second)
		if r.Context().Err() != nil {
			return
		}
		for _, e := range evs {
			b, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "id: %s:%d\nevent: file_change\ndata: %s\n\n", watch.ID(), e.Seq, b); err != nil {
				return
			}
		}
		if len(evs) == 0 && !ended {
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		if last > cursor {
			cursor = last
		}
		if ended {
			b, _ := json.Marshal(watch.Info())
			_, _ = fmt.Fprintf(w, "event: watch_stopped\ndata: %s\n\n", b)
			if flusher != nil {
				flusher.Flush()
			}
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// parseEventID reads an SSE resume point: "{watcher_id}:{seq}" of this
// watch, or a bare seq. Another watch's id or a negative seq is ignored.
func parseEventID(watcherID, v string) (int64, bool) {
	if wid, seq, ok := strings.Cut(v, ":"); ok {
		if wid != watcherID {
			return 0, false
		}
		v = seq
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
