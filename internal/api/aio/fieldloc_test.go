package aio

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/fault"
)

// TestFieldLoc: a field that names its place keeps it; a bare one (a
// tool's Validate names its argument) is in the body.
func TestFieldLoc(t *testing.T) {
	cases := []struct {
		name, field string
		want        []any
	}{
		{"empty", "", []any{"body"}},
		{"body-itself", "body", []any{"body"}},
		{"body-field", "body.timeout", []any{"body", "timeout"}},
		{"bare-field", "timeout", []any{"body", "timeout"}},
		{"bare-nested", "limits.cpu", []any{"body", "limits", "cpu"}},
		{"query", "query.top_rows", []any{"query", "top_rows"}},
		{"path", "path.index", []any{"path", "index"}},
		{"header", "header.Upload-Offset", []any{"header", "Upload-Offset"}},
		// A body field called "path" (the file tools') is not a location.
		{"body-field-named-path", "path", []any{"body", "path"}},
		{"body-field-named-query", "query", []any{"body", "query"}},
		{"location-without-name", "query.", []any{"body", "query", ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fieldLoc(c.field); !slices.Equal(got, c.want) {
				t.Fatalf("fieldLoc(%q) = %v, want %v", c.field, got, c.want)
			}
		})
	}
}

// newRowServer is a server with the AIO groups whose rows read query,
// path and header input themselves, over a dispatcher with no tools of
// theirs: every case below is refused before a tool would run.
func newRowServer(t *testing.T) (*api.Server, string) {
	t.Helper()
	srv := newServer(t)
	s, d := srv.Server, srv.D
	BrowserRoutes(s, d)
	ServiceRoutes(s, d)
	ProxyRoutes(s, d)
	ShellRoutes(s, d)
	TransferRoutes(s, d)
	return s, srv.AgentKey
}

// TestRefusedInputNamesItsPlace: a refused query parameter, path
// parameter or header is reported where it is — "query.<name>",
// "path.<name>", "header.<name>", as huma names them — and a form field as
// "body.<name>"; on AIO's rows FastAPI's loc says the same.
func TestRefusedInputNamesItsPlace(t *testing.T) {
	s, key := newRowServer(t)
	cases := []struct {
		name, method, target string
		header               map[string]string
		body                 string
		status               int
		field                string // data.field
		loc                  string // detail[0].loc joined by ".", "" where the row answers no 422
	}{
		{"query-int", http.MethodGet, "/v1/sandbox/observe/live?top_rows=many", nil, "",
			http.StatusUnprocessableEntity, "query.top_rows", "query.top_rows"},
		{"query-missing", http.MethodGet, "/v1/proxy/diagnose", nil, "",
			http.StatusUnprocessableEntity, "query.url", "query.url"},
		{"query-browser-int", http.MethodGet, "/v1/browser/network/requests?limit=x", nil, "",
			http.StatusUnprocessableEntity, "query.limit", "query.limit"},
		{"path-int", http.MethodDelete, "/v1/browser/tabs/first", nil, "",
			http.StatusUnprocessableEntity, "path.index", "path.index"},
		{"query-bool", http.MethodPost, "/v1/file/upload?extract=maybe", nil, "x",
			0, "query.extract", ""},
		{"query-enum", http.MethodGet, "/v1/file/download?path=/workspace/a&change_policy=never", nil, "",
			0, "query.change_policy", ""},
		{"query-terminal", http.MethodGet, "/v1/shell/ws?rows=tall", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}, "",
			0, "query.rows", ""},
		{"header", http.MethodPatch, "/v1/artifacts/up_x", map[string]string{"Content-Type": "application/offset+octet-stream"}, "abc",
			0, "header.Upload-Offset", ""},
		{"form-field", http.MethodPost, "/v1/file/upload", map[string]string{"Content-Type": "multipart/form-data; boundary=b"},
			"--b\r\nContent-Disposition: form-data; name=\"extract\"\r\n\r\nmaybe\r\n--b--\r\n",
			0, "body.extract", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rd io.Reader
			if c.body != "" {
				rd = strings.NewReader(c.body)
			}
			r := httptest.NewRequest(c.method, c.target, rd)
			r.Host = "127.0.0.1:8080"
			r.RemoteAddr = "127.0.0.1:5000"
			r.Header.Set("Authorization", "Bearer "+key)
			for k, v := range c.header {
				r.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, r)
			var got struct {
				Detail []struct {
					Loc []any `json:"loc"`
				} `json:"detail"`
				Data struct {
					Code  string `json:"code"`
					Field string `json:"field"`
				} `json:"data"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("status %d, body %q: %v", rec.Code, rec.Body, err)
			}
			if c.status != 0 && rec.Code != c.status {
				t.Errorf("status %d, want %d: %s", rec.Code, c.status, rec.Body)
			}
			if got.Data.Field != c.field {
				t.Errorf("data.field %q, want %q: %s", got.Data.Field, c.field, rec.Body)
			}
			if c.loc != "" {
				if len(got.Detail) != 1 {
					t.Fatalf("detail %v, want one entry: %s", got.Detail, rec.Body)
				}
				parts := make([]string, len(got.Detail[0].Loc))
				for i, p := range got.Detail[0].Loc {
					parts[i], _ = p.(string)
				}
				if l := strings.Join(parts, "."); l != c.loc {
					t.Errorf("loc %q, want %q", l, c.loc)
				}
			}
		})
	}
}

// TestPlaceField: on a row that reads no body, a tool's refusal of an
// argument the row took from the query names the query; rows with a body,
// placed fields and other kinds of error are left alone.
func TestPlaceField(t *testing.T) {
	diagnose := aioRow(http.MethodGet, "/v1/proxy/diagnose")
	download := aioRow(http.MethodGet, "/v1/file/download")
	exclude := aioRow(http.MethodPost, "/v1/proxy/excludes")
	if diagnose == nil || download == nil || exclude == nil {
		t.Fatal("rows not found")
	}
	s := newServer(t).Server
	e := &aioEdge{s: s, params: map[*aioRoute]map[string]string{}}
	for _, rt := range []*aioRoute{diagnose, download, exclude} {
		e.params[rt] = paramPlaces(documentAIO(s, rt, ""))
	}
	cases := []struct {
		name string
		rt   *aioRoute
		err  error
		want string
	}{
		{"body-named-query-param", diagnose, fault.InvalidField("body.url", "url is not allowed"), "query.url"},
		{"bare-query-param", download, fault.InvalidField("path", "path is sensitive"), "query.path"},
		{"placed-already", diagnose, fault.InvalidField("query.url", "no"), "query.url"},
		{"not-a-parameter", diagnose, fault.InvalidField("body.sandbox", "no"), "body.sandbox"},
		{"nested", diagnose, fault.InvalidField("body.url.host", "no"), "body.url.host"},
		{"row-with-body", exclude, fault.InvalidField("body.pattern", "no"), "body.pattern"},
		{"not-invalid", diagnose, &fault.Error{Kind: fault.NotFound, Msg: "no", Field: "url"}, "url"},
		{"no-row", &aioRoute{}, fault.InvalidField("url", "no"), "url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := e.placeField(c.rt, c.err)
			if f := fault.FieldOf(got); f != c.want {
				t.Fatalf("field %q, want %q", f, c.want)
			}
			if fault.KindOf(got) != fault.KindOf(c.err) || fault.Public(got) != fault.Public(c.err) {
				t.Fatalf("kind %q msg %q, want %q %q", fault.KindOf(got), fault.Public(got), fault.KindOf(c.err), fault.Public(c.err))
			}
		})
	}
	// On AIO's rows the 422's loc follows.
	var inv *aioInvalid
	if err := e.requestError(diagnose, fault.InvalidField("body.url", "no")); !errors.As(err, &inv) || !slices.Equal(inv.Detail[0].Loc, []any{"query", "url"}) {
		t.Fatalf("requestError = %#v, want loc query.url", err)
	}
}
