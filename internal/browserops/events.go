package browserops

import (
	"strings"
	"time"

	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
)

// ConsoleEntry is one console message or uncaught exception of a page.
type ConsoleEntry struct {
	Type      string  `json:"type" doc:"log, info, warning, error, debug …; exception for an uncaught one"`
	Text      string  `json:"text"`
	Timestamp float64 `json:"timestamp" doc:"milliseconds since the epoch"`
	TargetID  string  `json:"target_id,omitempty" doc:"the tab it came from"`
}

// RequestEntry is one network request a page made.
type RequestEntry struct {
	ID              string            `json:"id"`
	URL             string            `json:"url"`
	Method          string            `json:"method"`
	ResourceType    string            `json:"resource_type,omitempty"`
	Status          int64             `json:"status,omitempty"`
	StatusText      string            `json:"status_text,omitempty"`
	MIMEType        string            `json:"mime_type,omitempty"`
	RequestHeaders  map[string]string `json:"request_headers,omitempty"`
	ResponseHeaders map[string]string `json:"response_headers,omitempty"`
	StartedAt       float64           `json:"started_at" doc:"milliseconds since the epoch"`
	DurationMS      float64           `json:"duration_ms,omitempty"`
	EncodedBytes    float64           `json:"encoded_bytes,omitempty"`
	Failed          string            `json:"failed,omitempty" doc:"the network error, when the request failed"`
	Finished        bool              `json:"finished"`

	monoStart float64
}

const (
	// maxLogText caps one console message or URL kept in the logs.
	maxLogText = 8 << 10
	// maxHeaders caps the headers kept per request.
	maxHeaders = 64
)

// onEvent runs on the CDP reader goroutine: it only appends to bounded
// logs under logMu and never calls the browser.
func (b *browserState) onEvent(session, method string, params jsonv2.Value) {
	switch method {
	case "Runtime.consoleAPICalled":
		var e runtime.EventConsoleAPICalled
		if jsonv2.Unmarshal(params, &e) != nil {
			return
		}
		parts := make([]string, 0, len(e.Args))
		for _, a := range e.Args {
			parts = append(parts, remoteText(a))
		}
		b.addConsole(session, ConsoleEntry{Type: string(e.Type), Text: strings.Join(parts, " "), Timestamp: float64(e.Timestamp)})
	case "Runtime.exceptionThrown":
		var e runtime.EventExceptionThrown
		if jsonv2.Unmarshal(params, &e) != nil || e.ExceptionDetails == nil {
			return
		}
		text := e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil && e.ExceptionDetails.Exception.Description != "" {
			text = e.ExceptionDetails.Exception.Description
		}
		b.addConsole(session, ConsoleEntry{Type: "exception", Text: text, Timestamp: float64(e.Timestamp)})
	case "Network.requestWillBeSent":
		var e network.EventRequestWillBeSent
		if jsonv2.Unmarshal(params, &e) != nil || e.Request == nil {
			return
		}
		b.logMu.Lock()
		defer b.logMu.Unlock()
		if old := b.reqByID[string(e.RequestID)]; old != nil && !old.Finished {
			// A redirect reuses the id: the hop before it is done.
			old.Finished = true
			b.inflight--
			if e.RedirectResponse != nil {
				old.Status, old.StatusText = e.RedirectResponse.Status, e.RedirectResponse.StatusText
			}
		}
		r := &RequestEntry{ID: string(e.RequestID), URL: clip(e.Request.URL), Method: e.Request.Method,
			ResourceType: string(e.Type), RequestHeaders: headerMap(e.Request.Headers),
			StartedAt: float64(e.WallTime) * 1000, monoStart: float64(e.Timestamp)}
		b.reqByID[r.ID] = r
		b.requests = append(b.requests, r)
		b.inflight++
		if len(b.requests) > maxRequests {
			drop := b.requests[0]
			b.requests = b.requests[1:]
			if b.reqByID[drop.ID] == drop {
				delete(b.reqByID, drop.ID)
				if !drop.Finished {
					b.inflight--
				}
			}
		}
	case "Network.responseReceived":
		var e network.EventResponseReceived
		if jsonv2.Unmarshal(params, &e) != nil || e.Response == nil {
			return
		}
		b.logMu.Lock()
		defer b.logMu.Unlock()
		if r := b.reqByID[string(e.RequestID)]; r != nil {
			r.Status, r.StatusText, r.MIMEType = e.Response.Status, e.Response.StatusText, e.Response.MimeType
			r.ResponseHeaders = headerMap(e.Response.Headers)
		}
	case "Network.loadingFinished":
		var e network.EventLoadingFinished
		if jsonv2.Unmarshal(params, &e) != nil {
			return
		}
		b.finishRequest(string(e.RequestID), float64(e.Timestamp), e.EncodedDataLength, "")
	case "Network.loadingFailed":
		var e network.EventLoadingFailed
		if jsonv2.Unmarshal(params, &e) != nil {
			return
		}
		b.finishRequest(string(e.RequestID), float64(e.Timestamp), 0, cmpOr(e.ErrorText, "failed"))
	}
}

func (b *browserState) finishRequest(id string, mono, bytes float64, failed string) {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	r := b.reqByID[id]
	if r == nil || r.Finished {
		return
	}
	r.Finished = true
	r.Failed = failed
	r.EncodedBytes = bytes
	if mono > r.monoStart {
		r.DurationMS = (mono - r.monoStart) * 1000
	}
	b.inflight--
}

func (b *browserState) addConsole(session string, e ConsoleEntry) {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	e.Text = clip(e.Text)
	e.TargetID = b.sessions[session]
	b.console = append(b.console, e)
	if len(b.console) > maxConsole {
		b.console = b.console[len(b.console)-maxConsole:]
	}
}

// consoleLog returns the console entries, clearing them when asked.
func (b *browserState) consoleLog(clear bool) []ConsoleEntry {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	out := append([]ConsoleEntry{}, b.console...)
	if clear {
		b.console = nil
	}
	return out
}

// requestLog returns copies of the logged requests whose URL contains
// filter, newest last, at most limit.
func (b *browserState) requestLog(filter string, limit int) []RequestEntry {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	var out []RequestEntry
	for _, r := range b.requests {
		if filter == "" || strings.Contains(r.URL, filter) {
			out = append(out, *r)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// idle reports the number of requests in flight.
func (b *browserState) inFlight() int {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	return b.inflight
}

func remoteText(a *runtime.RemoteObject) string {
	if a == nil {
		return ""
	}
	if len(a.Value) > 0 {
		var s string
		if jsonv2.Unmarshal(a.Value, &s) == nil {
			return s
		}
		return string(a.Value)
	}
	if a.UnserializableValue != "" {
		return string(a.UnserializableValue)
	}
	return a.Description
}

func headerMap(h network.Headers) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, min(len(h), maxHeaders))
	for k, v := range h {
		if len(out) >= maxHeaders {
			break
		}
		if s, ok := v.(string); ok {
			out[k] = clip(s)
		}
	}
	return out
}

func clip(s string) string {
	if len(s) > maxLogText {
		return s[:maxLogText] + "…"
	}
	return s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func nowMS() float64 { return float64(time.Now().UnixNano()) / 1e6 }

func cmpInt(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}
