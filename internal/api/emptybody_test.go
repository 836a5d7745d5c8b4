package api

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/danielgtaylor/huma/v2"
)

type optionalIn struct {
	Body struct {
		Name string `json:"name,omitempty" required:"false"`
	}
}

type requiredIn struct {
	Body struct {
		Command string `json:"command"`
	}
}

// TestEmptyBodyMeansDefaults: a POST with no body reaches a route whose
// fields are all optional as "{}" (AIO's create_session() sends none), a
// route with a required field answers 422 naming it, and an upload route
// gets its empty body untouched.
func TestEmptyBodyMeansDefaults(t *testing.T) {
	e := newEdgeServer(t)
	huma.Register(e.s.api, huma.Operation{OperationID: "t-opt", Method: "POST", Path: "/v1/test-optional"},
		func(_ context.Context, in *optionalIn) (*struct{ Body Envelope[string] }, error) {
			return &struct{ Body Envelope[string] }{Body: OK("name=" + in.Body.Name)}, nil
		})
	huma.Register(e.s.api, huma.Operation{OperationID: "t-req", Method: "POST", Path: "/v1/test-required"},
		func(_ context.Context, in *requiredIn) (*struct{ Body Envelope[string] }, error) {
			return &struct{ Body Envelope[string] }{Body: OK(in.Body.Command)}, nil
		})
	var plain string
	e.s.Router().Post("/sandboxes/{id}/v1/test-plain", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		plain = string(b)
		w.WriteHeader(http.StatusNoContent)
	})
	var upload = "unset"
	e.s.UseTable(uploadTable{}) // the upload's row: its media types
	e.s.Router().Post("/v1/file/upload", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		upload = string(b)
		w.WriteHeader(http.StatusNoContent)
	})
	auth := map[string]string{"Authorization": "Bearer " + e.agentKey}

	if rec := e.req("POST", "/v1/test-optional", "192.0.2.1:1", "", auth); rec.Code != 200 {
		t.Fatalf("optional fields, no body: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req("POST", "/v1/test-required", "192.0.2.1:1", "", auth); rec.Code != 422 {
		t.Fatalf("required field, no body: %d %s, want 422", rec.Code, rec.Body)
	}
	if rec := e.req("POST", "/sandboxes/sb1/v1/test-plain", "192.0.2.1:1", "", auth); rec.Code != 204 || plain != "{}" {
		t.Fatalf("plain handler, no body: %d, read %q, want {}", rec.Code, plain)
	}
	if rec := e.req("POST", "/v1/file/upload", "192.0.2.1:1", "", auth); rec.Code != 204 || upload != "" {
		t.Fatalf("upload, no body: %d, read %q, want it empty", rec.Code, upload)
	}
	// A GET is never given a body.
	e.s.Router().Get("/v1/test-get", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if len(b) != 0 {
			t.Errorf("GET got body %q", b)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	e.req("GET", "/v1/test-get", "192.0.2.1:1", "", auth)
}
