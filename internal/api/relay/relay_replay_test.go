package relay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// failingRT fails its first fail round trips, then answers 200.
type failingRT struct {
	fail, calls int
}

func (f *failingRT) RoundTrip(*http.Request) (*http.Response, error) {
	f.calls++
	if f.calls <= f.fail {
		return nil, errors.New("read: connection reset by peer")
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

func TestReplayRelaySendsABodilessGETAgain(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name, kind, method string
		body               io.ReadCloser
		fail, wantCalls    int
		wantOK             bool
	}{
		{"cdp GET after one reset", "cdp", http.MethodGet, nil, 1, 2, true},
		{"cdp GET after two resets", "cdp", http.MethodGet, nil, 2, 3, true},
		{"cdp GET gives up after the replays", "cdp", http.MethodGet, nil, 5, relayReplays + 1, false},
		{"cdp POST with a body is not replayed", "cdp", http.MethodPost, io.NopCloser(strings.NewReader("x")), 1, 1, false},
		{"cdp PUT is not replayed", "cdp", http.MethodPut, nil, 1, 1, false},
		{"preview GET is not replayed (the sandbox's own server may act on it)", "preview", http.MethodGet, nil, 1, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &failingRT{fail: tc.fail}
			req, err := http.NewRequestWithContext(context.Background(), tc.method, "http://127.0.0.1:9222/json/version", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.body == nil {
				req.Body = nil
			}
			resp, err := replayRelay{tr: f, log: quiet, kind: tc.kind}.RoundTrip(req)
			if (err == nil) != tc.wantOK {
				t.Fatalf("err %v, want ok=%v", err, tc.wantOK)
			}
			if resp != nil {
				_ = resp.Body.Close()
			}
			if f.calls != tc.wantCalls {
				t.Fatalf("%d round trips, want %d", f.calls, tc.wantCalls)
			}
		})
	}
}
