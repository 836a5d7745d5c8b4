package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

// uploadTable is a Table with one row, an upload that takes a multipart
// form or the raw file, and a status rule that makes every failure of a
// /v1/file/... request the tool's own: the core's stand-in for the AIO
// table (whose own rows internal/api/aio tests).
type uploadTable struct{}

func (uploadTable) Row(method, pattern string) (Row, bool) {
	if method == http.MethodPost && strings.TrimPrefix(pattern, SandboxPrefix) == "/v1/file/upload" {
		return Row{Method: method, Tool: "file.upload", BodyTypes: []string{"multipart/form-data", "application/octet-stream"}}, true
	}
	return Row{}, false
}

func (uploadTable) ToolLevel(_, path string) func(error) bool {
	if strings.HasPrefix(path, "/v1/file/") {
		return func(error) bool { return true }
	}
	return nil
}

// TestTableStatusRule: a route the table's rule covers answers its
// failures 200; the server's own routing failures (no route, no method)
// keep their status whatever the rule says; other routes keep theirs.
func TestTableStatusRule(t *testing.T) {
	e := newEdgeServer(t)
	e.s.UseTable(uploadTable{})
	fail := func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, fault.New(fault.NotFound, "no such file"))
	}
	e.s.Router().Post("/v1/file/read", fail)
	e.s.Router().Post("/v1/other", fail)
	auth := map[string]string{"Authorization": "Bearer " + e.opKey, "Content-Type": "application/json"}
	for _, c := range []struct {
		name, method, path string
		want               int
	}{
		{"tool's failure", "POST", "/v1/file/read", 200},
		{"no route", "POST", "/v1/file/nothing", 404},
		{"no method", "PUT", "/v1/file/read", 405},
		{"not the table's", "POST", "/v1/other", 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			if rec := e.req(c.method, c.path, "10.0.0.1:1", "{}", auth); rec.Code != c.want {
				t.Fatalf("%s %s: %d, want %d: %s", c.method, c.path, rec.Code, c.want, rec.Body)
			}
		})
	}
}
