package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/snapshot"
	"github.com/sandhold/sandhold/internal/template"
)

// The control plane: E2B's REST API (spec/openapi.yml of e2b-dev/E2B) for
// the calls the SDK makes, each answered by a dispatched tool.

// Timeouts of the control plane, with their reasons.
const (
	// defaultTimeout is a sandbox's lifetime when create names none: the
	// SDK's documented default ("alive for 5 minutes").
	defaultTimeout = 5 * time.Minute
	// maxTimeout caps every timeout a client sets: E2B's own largest
	// (a day), so a sandbox made through E2B always ends.
	maxTimeout = 24 * time.Hour
	// maxControlBody caps a control-plane request body (metadata and
	// environment at most; both are capped again by the sandbox).
	maxControlBody = 1 << 20
	// maxListLimit caps one page of a listing.
	maxListLimit = 1000
)

// stockTemplates are E2B's own template names; unless a sandhold template
// of that name exists, they mean the host template (sandhold's default).
var stockTemplates = []string{"base", "code-interpreter-v1", "code-interpreter", "code-interpreter-beta"}

// noEnd stands for "never" in endAt (required by the SDK), for a sandbox
// without a TTL (one made by the native API and connected to).
var noEnd = time.Date(2999, 12, 31, 0, 0, 0, 0, time.UTC)

func (s *Service) controlRoutes(r chi.Router) {
	s.snapshotRoutes(r)
	r.Post(Prefix+"/sandboxes", s.create)
	r.Post(Prefix+"/v2/sandboxes", s.create)
	r.Get(Prefix+"/sandboxes", s.list)
	r.Get(Prefix+"/v2/sandboxes", s.list)
	r.Get(Prefix+"/sandboxes/{sandboxID}", s.getInfo)
	r.Delete(Prefix+"/sandboxes/{sandboxID}", s.kill)
	r.Post(Prefix+"/sandboxes/{sandboxID}/timeout", s.setTimeout)
	r.Post(Prefix+"/sandboxes/{sandboxID}/refreshes", s.refresh)
	r.Post(Prefix+"/sandboxes/{sandboxID}/pause", s.pause)
	r.Post(Prefix+"/sandboxes/{sandboxID}/resume", s.connect)
	r.Post(Prefix+"/sandboxes/{sandboxID}/connect", s.connect)
	r.Post(Prefix+"/v2/sandboxes/{sandboxID}/connect", s.connect)
	r.Get(Prefix+"/sandboxes/{sandboxID}/metrics", s.metrics)
	r.Put(Prefix+"/sandboxes/{sandboxID}/network", s.updateNetwork)
	// Everything else of E2B's API (templates, volumes, secrets, logs,
	// teams …): 501, which the SDK reports as a SandboxError.
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		r.MethodFunc(m, Prefix+"/*", s.unsupported)
	}
}

// unsupported answers E2B calls sandhold does not serve.
func (s *Service) unsupported(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotImplemented, errorJSON{Code: http.StatusNotImplemented,
		Message: "sandhold does not serve " + r.Method + " " + strings.TrimPrefix(r.URL.Path, Prefix) + " of E2B's API (docs/e2b.md lists what it serves)"})
}

// readBody decodes a JSON body into v; an empty body leaves v as is.
func readBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxControlBody+1))
	if err != nil {
		return fault.Wrap(fault.Invalid, err, "cannot read the request body")
	}
	if len(b) > maxControlBody {
		return fault.New(fault.TooLarge, "request body over 1 MiB")
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fault.Wrap(fault.Invalid, err, "the body is not the JSON this call takes")
	}
	return nil
}

// seconds turns E2B's timeout (whole seconds) into a duration, capped.
func seconds(n *int64, def time.Duration) (time.Duration, error) {
	if n == nil || *n == 0 {
		return def, nil
	}
	if *n < 0 {
		return 0, fault.InvalidField("timeout", "timeout must not be negative")
	}
	d := time.Duration(min(*n, int64(maxTimeout/time.Second))) * time.Second
	return d, nil
}

// newSandbox is the body of POST /v2/sandboxes (NewSandboxV2) as far as
// sandhold reads it; what it cannot honour is refused, never ignored.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	AutoPause           *bool             `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	Network             *networkConfig    `json:"network"`
	MCP                 json.RawMessage   `json:"mcp"`
	IAM                 json.RawMessage   `json:"iam"`
	VolumeMounts        json.RawMessage   `json:"volumeMounts"`
	AutoResume          json.RawMessage   `json:"autoResume"`
}

// networkConfig is E2B's SandboxNetworkConfig: allowOut is the egress
// allow list (sandhold's network mode proxy); the rest is refused.
type networkConfig struct {
	AllowOut           []string        `json:"allowOut"`
	DenyOut            []string        `json:"denyOut"`
	AllowPublicTraffic *bool           `json:"allowPublicTraffic"`
	Rules              json.RawMessage `json:"rules"`
	EgressProxy        json.RawMessage `json:"egressProxy"`
}

// network maps an E2B network request onto sandhold's egress modes.
func (n *networkConfig) network(allowInternet *bool) (sandbox.Network, error) {
	if allowInternet != nil && *allowInternet {
		return sandbox.Network{}, fault.InvalidField("allow_internet_access", "sandhold sandboxes reach only what an allow list names: pass network.allowOut with the hosts to reach")
	}
	if n == nil {
		return sandbox.Network{}, nil
	}
	if (n.AllowPublicTraffic != nil && !*n.AllowPublicTraffic) || len(n.Rules) > 0 && string(n.Rules) != "null" || len(n.EgressProxy) > 0 && string(n.EgressProxy) != "null" {
		return sandbox.Network{}, fault.InvalidField("network", "sandhold takes only network.allowOut (the egress allow list)")
	}
	for _, d := range n.DenyOut {
		if d != "0.0.0.0/0" {
			return sandbox.Network{}, fault.InvalidField("network.denyOut", "egress is denied unless allowOut names it; denyOut takes only 0.0.0.0/0")
		}
	}
	if len(n.AllowOut) == 0 {
		return sandbox.Network{}, nil
	}
	return sandbox.Network{Mode: sandbox.NetworkProxy, Allow: n.AllowOut}, nil
}

// present reports whether a raw JSON field was sent with a value.
func present(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }

// spec is the sandbox.create spec a request asks for.
func (s *Service) spec(c auth.Caller, b newSandbox) (sandbox.Spec, error) {
	switch {
	case b.AutoPauseMemory != nil && *b.AutoPauseMemory:
		return sandbox.Spec{}, fault.InvalidField("autoPauseMemory", "a pause at the timeout hibernates the sandbox: its files and packages are kept, its memory and processes are not (use keepMemory: false)")
	case present(b.MCP):
		return sandbox.Spec{}, fault.InvalidField("mcp", "the MCP gateway is not supported; sandhold serves MCP at /sandboxes/{id}/mcp")
	case present(b.IAM), present(b.VolumeMounts), present(b.AutoResume):
		return sandbox.Spec{}, fault.New(fault.Invalid, "iam, volumeMounts and autoResume are not supported")
	}
	ttl, err := seconds(b.Timeout, defaultTimeout)
	if err != nil {
		return sandbox.Spec{}, err
	}
	netw, err := b.Network.network(b.AllowInternetAccess)
	if err != nil {
		return sandbox.Spec{}, err
	}
	spec := sandbox.Spec{TTL: ttl, Labels: b.Metadata, Env: b.EnvVars, Network: netw}
	if b.AutoPause != nil && *b.AutoPause {
		// lifecycle.onTimeout 'pause': hibernated when the timeout ends,
		// resumed by connect (which gives it a new timeout).
		spec.OnExpire = sandbox.ExpireHibernate
	}
	if snapshot.ValidID(b.TemplateID) {
		// A snapshot's id (createSnapshot's answer) as the template: the
		// sandbox is made from that snapshot (snapshots.go).
		spec.Snapshot = b.TemplateID
	} else {
		spec.Template = s.template(c, b.TemplateID)
	}
	return spec, nil
}

// template maps E2B's templateID onto a sandhold template: a template of
// that name, else host for E2B's stock names.
func (s *Service) template(c auth.Caller, id string) string {
	if template.IsHost(id) || !slices.Contains(stockTemplates, id) {
		return id
	}
	if s.d.Templates != nil {
		if _, err := s.d.Templates.Resolve(template.Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, id); err == nil {
			return id
		}
	}
	return template.Host
}

// sandboxJSON is E2B's Sandbox: what create and connect answer.
type sandboxJSON struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken string  `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// clientID fills E2B's deprecated clientID.
const clientID = "sandhold"

// answer is the Sandbox answer for info, with c's tokens.
func (s *Service) answer(ctx context.Context, r *http.Request, c auth.Caller, in sandbox.Info) (sandboxJSON, error) {
	envd, err := s.tokens.mint(ctx, purposeEnvd, c.KeyID, in.ID)
	if err != nil {
		return sandboxJSON{}, err
	}
	traffic, err := s.tokens.mint(ctx, purposeTraffic, c.KeyID, in.ID)
	if err != nil {
		return sandboxJSON{}, err
	}
	return sandboxJSON{TemplateID: in.Template, SandboxID: in.ID, Alias: in.Template, ClientID: clientID,
		EnvdVersion: EnvdVersion, EnvdAccessToken: envd, TrafficAccessToken: traffic, Domain: s.domain(r)}, nil
}

// domain is where getHost(port) points: the content origin's host names
// {port}-{id}.<SANDBOX_CONTENT_DOMAIN>, with the port this request came
// to (a wildcard name reaches every listener). Without a content domain
// there is no host that reaches a sandbox's port: the reserved .invalid
// name (RFC 2606) makes a URL built from it fail at once rather than go
// to E2B's cloud.
func (s *Service) domain(r *http.Request) *string {
	d := "content-domain-not-configured.invalid"
	if s.d.ContentDomain != "" {
		d = s.d.ContentDomain
		if _, p, err := net.SplitHostPort(r.Host); err == nil {
			d += ":" + p
		}
	}
	return &d
}

// detailJSON is E2B's SandboxDetail (and, without the token, ListedSandbox).
type detailJSON struct {
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	EnvdVersion string            `json:"envdVersion"`
	Domain      *string           `json:"domain,omitempty"`
	CPUCount    int64             `json:"cpuCount"`
	MemoryMB    int64             `json:"memoryMB"`
	DiskSizeMB  int64             `json:"diskSizeMB"`
	Metadata    map[string]string `json:"metadata"`
	State       string            `json:"state"`
}

func detailOf(in sandbox.Info) detailJSON {
	end := noEnd
	if in.Expires != nil {
		end = *in.Expires
	}
	state := "running"
	if paused(in.State) {
		state = "paused"
	}
	md := in.Labels
	if md == nil {
		md = map[string]string{}
	}
	return detailJSON{TemplateID: in.Template, Alias: in.Template, SandboxID: in.ID, ClientID: clientID,
		StartedAt: in.Created, EndAt: end, EnvdVersion: EnvdVersion,
		CPUCount: max(1, int64(math.Ceil(float64(in.Limits.CPUMilli)/1000))), MemoryMB: in.Limits.MemoryBytes >> 20,
		DiskSizeMB: in.Limits.DiskBytes >> 20, Metadata: md, State: state}
}

// caller is the request's authenticated key (the auth middleware put it
// there).
func (s *Service) caller(w http.ResponseWriter, r *http.Request) (auth.Caller, bool) {
	c, err := api.MustCaller(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return auth.Caller{}, false
	}
	return c, true
}

func (s *Service) create(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	var b newSandbox
	if err := readBody(r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	spec, err := s.spec(c, b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	in, err := sandbox.ToolCreate.Call(r.Context(), s.d.Dispatch, c, spec)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.answer(r.Context(), r, c, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Service) getInfo(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	in, err := sandbox.ToolGet.Call(r.Context(), s.d.Dispatch, c, sandbox.IDArgs{ID: chi.URLParam(r, "sandboxID")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// No access token here: getInfo is a read viewers may make too, and
	// the SDK takes tokens only from create and connect.
	d := detailOf(in)
	d.Domain = s.domain(r)
	writeJSON(w, http.StatusOK, d)
}

func (s *Service) kill(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	if _, err := sandbox.ToolDelete.Call(r.Context(), s.d.Dispatch, c, sandbox.IDArgs{ID: chi.URLParam(r, "sandboxID")}); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// paused reports whether a sandbox state is what E2B calls paused: frozen
// (sandbox.pause) or hibernated (sandbox.hibernate).
func paused(st sandbox.State) bool { return st == sandbox.Paused || st == sandbox.Hibernated }

// pauseBody is E2B's pause request: memory asks to keep the processes.
type pauseBody struct {
	Memory *bool `json:"memory"`
}

// pause maps E2B's pause onto sandhold's. By default the sandbox
// hibernates (sandbox.hibernate): its files and packages go into the
// snapshot store and everything else is freed, as E2B's pause frees a
// sandbox; its processes end (sandhold captures no memory), and connect or
// any later call restores it under its id. A pause that asks to keep
// memory (keepMemory), or of a sandbox without a workspace image (which
// cannot hibernate), freezes it instead (sandbox.pause): its processes
// stay, stopped, in memory. Either way the sandbox's timeout still runs, as
// E2B's does. Pausing a hibernated sandbox changes nothing; pausing a
// frozen one hibernates it.
func (s *Service) pause(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	var b pauseBody
	if err := readBody(r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	args := sandbox.IDArgs{ID: chi.URLParam(r, "sandboxID")}
	keepMemory := b.Memory != nil && *b.Memory
	var err error
	if !keepMemory {
		_, err = sandbox.ToolHibernate.Call(r.Context(), s.d.Dispatch, c, args)
	}
	if keepMemory || fault.Is(err, fault.Unsupported) {
		// Memory kept, or no workspace image: frozen, the other of
		// sandhold's pauses.
		_, err = sandbox.ToolPause.Call(r.Context(), s.d.Dispatch, c, args)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// timeoutBody is E2B's SandboxTimeoutRequest and ConnectSandbox.
type timeoutBody struct {
	Timeout *int64 `json:"timeout"`
}

func (s *Service) setTimeout(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	var b timeoutBody
	if err := readBody(r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	if b.Timeout == nil {
		s.writeError(w, r, fault.InvalidField("timeout", "timeout is required"))
		return
	}
	args := TimeoutArgs{ID: chi.URLParam(r, "sandboxID"), Seconds: *b.Timeout}
	if _, err := ToolSetTimeout.Call(r.Context(), s.d.Dispatch, c, args); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// refresh is E2B's legacy keep-alive: {"duration": seconds} from now.
func (s *Service) refresh(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	var b struct {
		Duration *int64 `json:"duration"`
	}
	if err := readBody(r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	secs := int64(defaultTimeout / time.Second)
	if b.Duration != nil {
		secs = *b.Duration
	}
	args := ConnectArgs{ID: chi.URLParam(r, "sandboxID"), Seconds: secs}
	if _, err := ToolConnect.Call(r.Context(), s.d.Dispatch, c, args); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// connect resumes a paused sandbox and extends its timeout (never shortens
// it), answering its tokens: Sandbox.connect, and E2B's legacy resume.
func (s *Service) connect(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	var b timeoutBody
	if err := readBody(r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	args := ConnectArgs{ID: chi.URLParam(r, "sandboxID"), Seconds: int64(defaultTimeout / time.Second)}
	if b.Timeout != nil {
		args.Seconds = *b.Timeout
	}
	in, err := ToolConnect.Call(r.Context(), s.d.Dispatch, c, args)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.answer(r.Context(), r, c, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// list answers GET /v2/sandboxes: the caller's sandboxes, filtered by
// metadata ("k=v&k2=v2", URL-encoded), state and template, oldest first
// (order=desc: newest first), paged by limit and nextToken (an offset).
func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	want, err := metadataFilter(q.Get("metadata"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var states []string
	for _, v := range q["state"] {
		states = append(states, strings.Split(v, ",")...)
	}
	limit, offset, err := page(q.Get("limit"), q.Get("nextToken"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	all, err := sandbox.ToolList.Call(r.Context(), s.d.Dispatch, c, sandbox.NoArgs{})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if q.Get("order") == "desc" {
		slices.Reverse(all)
	}
	out := []detailJSON{}
	for _, in := range all {
		d := detailOf(in)
		if !matchLabels(d.Metadata, want) || (len(states) > 0 && !slices.Contains(states, d.State)) ||
			(q.Get("template") != "" && q.Get("template") != d.TemplateID) {
			continue
		}
		out = append(out, d)
	}
	writePage(w, out, limit, offset)
}

// page reads a listing's limit (default 100) and nextToken (an offset
// this server gave).
func page(rawLimit, rawToken string) (limit, offset int, err error) {
	limit = 100
	if rawLimit != "" {
		if limit, err = strconv.Atoi(rawLimit); err != nil || limit < 1 || limit > maxListLimit {
			return 0, 0, fault.InvalidField("limit", fmt.Sprintf("limit must be 1 to %d", maxListLimit))
		}
	}
	if rawToken != "" {
		if offset, err = strconv.Atoi(rawToken); err != nil || offset < 0 {
			return 0, 0, fault.InvalidField("nextToken", "not a token this server gave")
		}
	}
	return limit, offset, nil
}

// writePage answers limit items of all from offset on, and the next
// page's token in X-Next-Token when there is one.
func writePage[T any](w http.ResponseWriter, all []T, limit, offset int) {
	offset = min(offset, len(all))
	p := all[offset:]
	if len(p) > limit {
		p = p[:limit]
		w.Header().Set("X-Next-Token", strconv.Itoa(offset+limit))
	}
	writeJSON(w, http.StatusOK, p)
}

// metadataFilter parses the SDK's metadata query: a URL-encoded query
// string of URL-encoded keys and values.
func metadataFilter(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	vs, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fault.InvalidField("metadata", "metadata is key=value pairs joined by &")
	}
	out := map[string]string{}
	for k, v := range vs {
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(v[0])
		if err1 != nil || err2 != nil {
			return nil, fault.InvalidField("metadata", "metadata keys and values are URL-encoded")
		}
		out[key] = val
	}
	return out, nil
}

func matchLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// metricJSON is E2B's SandboxMetric.
type metricJSON struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int64     `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// metrics answers one sample, now, from the sandbox's cgroup (sandhold
// keeps no history): cpuUsedPct is the CPU time used since the sandbox
// was created over that time and its CPUs.
func (s *Service) metrics(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	id := chi.URLParam(r, "sandboxID")
	all, err := sandbox.ToolResources.Call(r.Context(), s.d.Dispatch, c, sandbox.NoArgs{})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	in, err := sandbox.ToolGet.Call(r.Context(), s.d.Dispatch, c, sandbox.IDArgs{ID: id})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := time.Now().UTC()
	cpus := max(1, int64(math.Ceil(float64(in.Limits.CPUMilli)/1000)))
	m := metricJSON{Timestamp: now, TimestampUnix: now.Unix(), CPUCount: cpus, MemTotal: in.Limits.MemoryBytes}
	for _, st := range all {
		if st.ID != id {
			continue
		}
		if up := now.Sub(in.Created); up > 0 {
			m.CPUUsedPct = 100 * st.Cgroup.CPUUsage.Seconds() / (up.Seconds() * float64(cpus))
		}
		m.MemUsed = st.Cgroup.MemoryBytes
		m.DiskUsed, m.DiskTotal = st.Disk.UsedBytes, st.Disk.TotalBytes
		if st.Cgroup.MemoryLimit > 0 {
			m.MemTotal = st.Cgroup.MemoryLimit
		}
	}
	writeJSON(w, http.StatusOK, []metricJSON{m})
}

// updateNetwork maps E2B's network update onto network.update: allowOut
// is the proxy mode's allow list.
func (s *Service) updateNetwork(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	var b networkConfig
	if err := readBody(r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := b.network(nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	u := sandbox.NetworkUpdate{ID: chi.URLParam(r, "sandboxID"), Mode: n.Mode, Allow: n.Allow}
	if u.Mode == "" {
		u.Mode = sandbox.NetworkNone
	}
	if _, err := sandbox.ToolNetworkUpdate.Call(r.Context(), s.d.Dispatch, c, u); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
