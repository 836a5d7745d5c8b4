package aio

import (
	"net/http"
	"net/url"
	"reflect"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/sandbox/proxytools"
)

// groupProxy is AIO's proxy namespace: the upstream proxy, excludes and
// mappings of a sandbox's egress proxy (package sandbox/proxytools).
const groupProxy = "proxy"

// ProxyRoutes mounts AIO's proxy routes at /v1/... and
// /sandboxes/{id}/v1/... (the daemon calls it once the tools are
// registered).
func ProxyRoutes(s *api.Server, d *dispatch.Dispatcher) { mountAIO(s, d, groupProxy) }

// proxyBypassRequest is AIO's ProxyBypassRequest (the body of DELETE
// /v1/proxy/excludes).
type proxyBypassRequest struct {
	Pattern string `json:"pattern" required:"true" maxLength:"1024" doc:"the bypass pattern to remove"`
}

// ProxyUpstreamOrNull is GET /v1/proxy/upstream's data: the upstream or
// null (a type of its own: the schema registry names it apart from PUT's
// answer, which is never null).
type ProxyUpstreamOrNull proxytools.UpstreamInfo

func proxySandbox(r *http.Request, _ struct{}) (proxytools.SandboxArgs, error) {
	return proxytools.SandboxArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}}, nil
}

// aioProxyRows are AIO's proxy namespace (11 operations). AIO's answers
// allow only the result or null as data, so a failure carries null; in
// network modes none and host every operation fails saying why.
var aioProxyRows = nullData([]aioRoute{
	jsonRowAs(groupProxy, http.MethodGet, "/v1/proxy/mappings", proxytools.ToolMappingsList, "proxy",
		"The sandbox's proxy mappings (destination rewrites)", proxySandbox, same[struct{}, []proxytools.MappingRoute]),
	jsonRow(groupProxy, http.MethodPost, "/v1/proxy/mappings", proxytools.ToolMappingAdd, "proxy",
		"Add or replace a mapping: connections to source go to target (the sandbox's own port, or a host in its allow list)",
		required("source", "target")),
	jsonRowAs(groupProxy, http.MethodDelete, "/v1/proxy/mappings/{source}", proxytools.ToolMappingRemove, "proxy",
		"Remove a mapping by its source (URL-encoded)", func(r *http.Request, _ struct{}) (proxytools.SourceArgs, error) {
			src := chi.URLParam(r, "source")
			if u, err := url.PathUnescape(src); err == nil {
				src = u
			}
			return proxytools.SourceArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Source: src}, nil
		}, same[struct{}, proxytools.Removed]),
	jsonRowAs(groupProxy, http.MethodGet, "/v1/proxy/excludes", proxytools.ToolExcludesList, "proxy",
		"The destinations that bypass the upstream proxy", proxySandbox, same[struct{}, []string]),
	jsonRow(groupProxy, http.MethodPost, "/v1/proxy/excludes", proxytools.ToolExcludeAdd, "proxy",
		"Add a bypass pattern: matching destinations go direct (still only if the allow list permits them)", required("pattern")),
	plainRow(groupProxy, http.MethodDelete, "/v1/proxy/excludes", proxytools.ToolExcludeRemove, "proxy",
		"Remove a bypass pattern", reflect.TypeFor[api.Envelope[proxytools.Removed]](), excludeRemove,
		reqType[proxyBypassRequest](), required("pattern"), doc(func(op *huma.Operation) {
			op.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{
				Type: "object", Properties: map[string]*huma.Schema{"pattern": api.StringSchema}, Required: []string{"pattern"}}}}}
		})),
	jsonRowAs(groupProxy, http.MethodGet, "/v1/proxy/diagnose", proxytools.ToolDiagnose, "proxy",
		"How a URL is routed (mapping, allow list, upstream or direct), checked with a connect", func(r *http.Request, _ struct{}) (proxytools.DiagnoseArgs, error) {
			u := r.URL.Query().Get("url")
			if u == "" {
				return proxytools.DiagnoseArgs{}, fieldError(inQuery, "url", "missing", "url is required")
			}
			return proxytools.DiagnoseArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, URL: u}, nil
		}, same[struct{}, proxytools.DiagnoseResult], doc(func(op *huma.Operation) {
			op.Parameters = append(op.Parameters, &huma.Param{Name: "url", In: "query", Required: true, Schema: api.StringSchema, Description: "URL to diagnose routing for"})
		})),
	jsonRowAs(groupProxy, http.MethodGet, "/v1/proxy/health", proxytools.ToolHealth, "proxy",
		"Whether the sandbox's proxy serves it, its routing agrees with the allow list, and its upstream answers a connect", proxySandbox, same[struct{}, proxytools.HealthResult]),
	jsonRowAs(groupProxy, http.MethodGet, "/v1/proxy/upstream", proxytools.ToolUpstreamGet, "proxy",
		"The upstream proxy (password masked), or null", proxySandbox,
		func(_ *http.Request, _ struct{}, u *proxytools.UpstreamInfo) (*ProxyUpstreamOrNull, error) {
			return (*ProxyUpstreamOrNull)(u), nil
		}),
	jsonRow(groupProxy, http.MethodPut, "/v1/proxy/upstream", proxytools.ToolUpstreamSet, "proxy",
		"Chain the sandbox's connections through an upstream proxy (HTTP CONNECT or SOCKS5; host in the allow list); answers it with the password masked", required("server")),
	jsonRowAs(groupProxy, http.MethodDelete, "/v1/proxy/upstream", proxytools.ToolUpstreamRemove, "proxy",
		"Remove the upstream proxy: allowed connections go direct", proxySandbox, same[struct{}, proxytools.Removed]),
})

// excludeRemove reads AIO's DELETE body (a pattern) and removes it.
func excludeRemove(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	in, err := decodeRow[proxyBypassRequest](rt, r)
	if err != nil {
		e.fail(w, r, rt, "", err)
		return
	}
	a := proxytools.ExcludeArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Pattern: in.Pattern}
	answer(e, rt, w, r, proxytools.ToolExcludeRemove, a, "")
}
