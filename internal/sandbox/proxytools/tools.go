// Package proxytools declares the tools of AIO Sandbox's proxy namespace
// (/v1/proxy/...) on sandhold's egress proxy: a sandbox's upstream proxy,
// the destinations that bypass it (excludes), destination rewrites
// (mappings), a routing diagnosis and a health check. They act only on a
// sandbox in network mode proxy; in modes none and host they fail saying
// why. Reading is safe, changing excludes and mappings medium, setting
// the upstream dangerous (it changes where the sandbox's traffic goes).
// The upstream's password is never answered, audited or logged: answers
// mask it and the audit record names the upstream without it.
//
// The tools live under sandbox, not egress: they find a sandbox's proxy
// state through package sandbox, which itself imports egress.
package proxytools

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/egress"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Tool names (the audit actions).
var (
	ToolMappingsList   = dispatch.Ref[SandboxArgs, []MappingRoute]("proxy.mappings.list")
	ToolMappingAdd     = dispatch.Ref[MappingArgs, MappingRoute]("proxy.mappings.add")
	ToolMappingRemove  = dispatch.Ref[SourceArgs, Removed]("proxy.mappings.remove")
	ToolExcludesList   = dispatch.Ref[SandboxArgs, []string]("proxy.excludes.list")
	ToolExcludeAdd     = dispatch.Ref[ExcludeArgs, ExcludeResult]("proxy.excludes.add")
	ToolExcludeRemove  = dispatch.Ref[ExcludeArgs, Removed]("proxy.excludes.remove")
	ToolDiagnose       = dispatch.Ref[DiagnoseArgs, DiagnoseResult]("proxy.diagnose")
	ToolHealth         = dispatch.Ref[SandboxArgs, HealthResult]("proxy.health")
	ToolUpstreamGet    = dispatch.Ref[SandboxArgs, *UpstreamInfo]("proxy.upstream.get")
	ToolUpstreamSet    = dispatch.Ref[UpstreamArgs, UpstreamInfo]("proxy.upstream.set")
	ToolUpstreamRemove = dispatch.Ref[SandboxArgs, Removed]("proxy.upstream.remove")
)

// SandboxArgs names the sandbox.
type SandboxArgs struct {
	dispatch.On
}

// MappingArgs is AIO's ProxyMappingAddRequest.
type MappingArgs struct {
	dispatch.On
	Source string `json:"source" required:"true" maxLength:"1024" doc:"[protocol://]host[:port]; *.example.com matches sub-domains; no port: any port (http: 80, https: 443)"`
	Target string `json:"target" required:"true" maxLength:"1024" doc:"[host:]port; no host, 127.0.0.1 or localhost: the sandbox's own loopback; another host must be in the sandbox's allow list"`
}

// Validate parses source and target.
func (a MappingArgs) Validate() error {
	_, err := a.mapping()
	return err
}

func (a MappingArgs) mapping() (egress.Mapping, error) {
	m, err := egress.ParseMapping(a.Source, a.Target)
	if err != nil {
		field := "body.target"
		if _, serr := egress.ParseMapping(a.Source, "1"); serr != nil {
			field = "body.source"
		}
		return egress.Mapping{}, fault.InvalidField(field, err.Error())
	}
	return m, nil
}

// SourceArgs names a mapping by its source.
type SourceArgs struct {
	dispatch.On
	Source string `json:"source" required:"true" maxLength:"1024" doc:"the mapping's source, as listed (or any spelling of the same host and port)"`
}

// Validate checks the source is present.
func (a SourceArgs) Validate() error {
	if a.Source == "" {
		return fault.InvalidField("body.source", "source is required")
	}
	return nil
}

// ExcludeArgs is AIO's ProxyBypassRequest.
type ExcludeArgs struct {
	dispatch.On
	Pattern string `json:"pattern" required:"true" maxLength:"1024" doc:"a domain (example.com), its sub-domains (*.example.com or .example.com), an address or a CIDR range (10.0.0.0/8)"`
}

// Validate checks the pattern is present (its form is checked when used).
func (a ExcludeArgs) Validate() error {
	if a.Pattern == "" {
		return fault.InvalidField("body.pattern", "pattern is required")
	}
	return nil
}

// DiagnoseArgs names the URL to route.
type DiagnoseArgs struct {
	dispatch.On
	URL string `json:"url" required:"true" maxLength:"4096" doc:"URL to diagnose routing for (http, https, ws, wss)"`
}

// Validate checks the URL is present.
func (a DiagnoseArgs) Validate() error {
	if a.URL == "" {
		return fault.InvalidField("body.url", "url is required")
	}
	return nil
}

// UpstreamArgs is AIO's ProxyUpstreamUpdateRequest.
type UpstreamArgs struct {
	dispatch.On
	Server  string  `json:"server" required:"true" maxLength:"2048" doc:"upstream proxy: host:port or user:pass@host:port, optionally after http:// or socks5://; its host must be in the sandbox's allow list"`
	AuthCmd *string `json:"auth_cmd,omitempty" doc:"not supported by sandhold: put the credentials in server"`
}

// Validate parses the server (auth_cmd is refused by the tool: a
// supported field AIO clients may send, not a malformed one).
func (a UpstreamArgs) Validate() error {
	if _, err := egress.ParseUpstream(a.Server); err != nil {
		return fault.InvalidField("body.server", err.Error())
	}
	return nil
}

func (a UpstreamArgs) parsed() (egress.Upstream, error) { return egress.ParseUpstream(a.Server) }

// masked is the upstream for audit records and approvals: no password.
func (a UpstreamArgs) masked() string {
	u, err := a.parsed()
	if err != nil {
		return "(invalid upstream)"
	}
	return u.String()
}

// MappingRoute is AIO's ProxyMappingRoute. internal_port is the port the
// connections go to (AIO: its nginx's port for the domain).
type MappingRoute struct {
	Source       string `json:"source"`
	Target       string `json:"target"`
	SourceHost   string `json:"source_host" doc:"the source's host (*.domain for a wildcard)"`
	SourcePath   string `json:"source_path" doc:"always /: sandhold maps hosts and ports, not paths"`
	InternalPort int    `json:"internal_port" doc:"the port connections are sent to"`
	SourcePort   int    `json:"source_port,omitempty" doc:"the port the mapping applies to (absent: any)"`
	TargetAddr   string `json:"target_addr" doc:"host:port connections are sent to (127.0.0.1: the sandbox's own loopback)"`
	InSandbox    bool   `json:"in_sandbox" doc:"the target is a port on the sandbox's own loopback"`
}

func routeOf(m egress.Mapping) MappingRoute {
	return MappingRoute{Source: m.Source, Target: m.Target, SourceHost: m.SourceHost, SourcePath: "/",
		InternalPort: int(m.TargetPort), SourcePort: int(m.SourcePort), TargetAddr: m.TargetAddr(), InSandbox: m.Loopback()}
}

// Removed answers a removal.
type Removed struct {
	Removed bool   `json:"removed" doc:"false: there was nothing to remove"`
	What    string `json:"what,omitempty"`
}

// ExcludeResult answers an added exclude.
type ExcludeResult struct {
	Pattern  string   `json:"pattern" doc:"the pattern as stored (canonical)"`
	Excludes []string `json:"excludes" doc:"every exclude of the sandbox"`
}

// DiagnoseResult is AIO's ProxyDiagnoseResult.
type DiagnoseResult struct {
	URL             string        `json:"url"`
	MatchedMapping  *MappingRoute `json:"matched_mapping"`
	ResolvedTarget  *string       `json:"resolved_target" doc:"host:port the connection goes to"`
	TargetReachable bool          `json:"target_reachable" doc:"a connection along the route was opened just now"`
	Route           string        `json:"route" doc:"direct, upstream, sandbox-loopback or denied"`
	Via             string        `json:"via,omitempty" doc:"the upstream proxy (route upstream)"`
	Reason          string        `json:"reason,omitempty" doc:"why the route is denied or the connection failed"`
}

// HealthResult is AIO's ProxyHealthCheck. sandhold has one proxy where AIO
// has GOST and nginx: gost_alive and nginx_alive both say it serves the
// sandbox.
type HealthResult struct {
	Healthy           bool     `json:"healthy"`
	GostAlive         bool     `json:"gost_alive" doc:"sandhold's egress proxy serves this sandbox"`
	NginxAlive        bool     `json:"nginx_alive" doc:"the same proxy applies the mappings (sandhold has no nginx)"`
	ConfigConsistent  bool     `json:"config_consistent" doc:"every mapping target and the upstream are in the current allow list"`
	Inconsistencies   []string `json:"inconsistencies"`
	ActiveConnections int      `json:"active_connections"`
	Upstream          string   `json:"upstream,omitempty" doc:"the upstream, password masked"`
	UpstreamReachable *bool    `json:"upstream_reachable,omitempty" doc:"a TCP connect to the upstream succeeded just now"`
	UpstreamError     string   `json:"upstream_error,omitempty"`
}

// UpstreamInfo is AIO's ProxyUpstreamInfo, password masked.
type UpstreamInfo struct {
	Addr     string  `json:"addr" doc:"host:port"`
	Username *string `json:"username"`
	Password *string `json:"password" doc:"never shown: ******** when one is set"`
	Scheme   string  `json:"scheme" doc:"http (CONNECT) or socks5"`
}

func infoOf(u egress.Upstream) UpstreamInfo {
	m := u.Masked()
	in := UpstreamInfo{Addr: m.Addr(), Scheme: m.Scheme}
	if m.Username != "" {
		in.Username = &m.Username
	}
	if m.Password != "" {
		in.Password = &m.Password
	}
	return in
}

// service resolves sandboxes and acts on the proxy.
type service struct {
	m *sandbox.Manager
	p *egress.Proxy
}

// Tools declares the proxy tools on the manager's sandboxes and the egress
// proxy p.
func Tools(m *sandbox.Manager, p *egress.Proxy) []dispatch.Tool {
	s := &service{m: m, p: p}
	sb := func(a SandboxArgs) dispatch.Target { return dispatch.Target{Sandbox: a.Sandbox} }
	return []dispatch.Tool{
		dispatch.Define(ToolMappingsList, dispatch.Spec{Risk: guard.Safe,
			Description: "List the sandbox's proxy mappings (destination rewrites)"},
			s.listMappings, dispatch.Hooks[SandboxArgs, []MappingRoute]{Describe: sb}),
		dispatch.Define(ToolMappingAdd, dispatch.Spec{Risk: guard.Medium,
			Description: "Add or replace a proxy mapping: connections to the source host go to the target instead (a target outside the sandbox must be in its allow list)"},
			s.addMapping, dispatch.Hooks[MappingArgs, MappingRoute]{
				Describe: func(a MappingArgs) dispatch.Target {
					return dispatch.Target{Sandbox: a.Sandbox, Target: a.Source, Detail: map[string]any{"target": a.Target}}
				},
			}),
		dispatch.Define(ToolMappingRemove, dispatch.Spec{Risk: guard.Medium,
			Description: "Remove a proxy mapping by its source"},
			s.removeMapping, dispatch.Hooks[SourceArgs, Removed]{
				Describe: func(a SourceArgs) dispatch.Target { return dispatch.Target{Sandbox: a.Sandbox, Target: a.Source} },
			}),
		dispatch.Define(ToolExcludesList, dispatch.Spec{Risk: guard.Safe,
			Description: "List the destinations that bypass the upstream proxy"},
			s.listExcludes, dispatch.Hooks[SandboxArgs, []string]{Describe: sb}),
		dispatch.Define(ToolExcludeAdd, dispatch.Spec{Risk: guard.Medium,
			Description: "Add a destination pattern that bypasses the upstream proxy (it still needs the allow list)"},
			s.addExclude, dispatch.Hooks[ExcludeArgs, ExcludeResult]{
				Describe: func(a ExcludeArgs) dispatch.Target { return dispatch.Target{Sandbox: a.Sandbox, Target: a.Pattern} },
			}),
		dispatch.Define(ToolExcludeRemove, dispatch.Spec{Risk: guard.Medium,
			Description: "Remove a bypass pattern"},
			s.removeExclude, dispatch.Hooks[ExcludeArgs, Removed]{
				Describe: func(a ExcludeArgs) dispatch.Target { return dispatch.Target{Sandbox: a.Sandbox, Target: a.Pattern} },
			}),
		dispatch.Define(ToolDiagnose, dispatch.Spec{Risk: guard.Safe,
			Description: "How a URL is routed for the sandbox (mapping, allow list, upstream or direct), with a connect to check it is reachable"},
			s.diagnose, dispatch.Hooks[DiagnoseArgs, DiagnoseResult]{
				Describe: func(a DiagnoseArgs) dispatch.Target { return dispatch.Target{Sandbox: a.Sandbox, Target: a.URL} },
			}),
		dispatch.Define(ToolHealth, dispatch.Spec{Risk: guard.Safe,
			Description: "Whether the sandbox's egress proxy serves it, its routing agrees with the allow list, and its upstream answers"},
			s.health, dispatch.Hooks[SandboxArgs, HealthResult]{Describe: sb}),
		dispatch.Define(ToolUpstreamGet, dispatch.Spec{Risk: guard.Safe,
			Description: "The sandbox's upstream proxy (password masked), or null"},
			s.getUpstream, dispatch.Hooks[SandboxArgs, *UpstreamInfo]{Describe: sb}),
		dispatch.Define(ToolUpstreamSet, dispatch.Spec{Risk: guard.Dangerous,
			Description: "Chain the sandbox's connections through an upstream proxy (HTTP CONNECT or SOCKS5, with credentials); its host must be in the allow list"},
			s.setUpstream, dispatch.Hooks[UpstreamArgs, UpstreamInfo]{
				Assess: func(UpstreamArgs) dispatch.Assessment {
					return dispatch.Assessment{Risk: guard.Dangerous, Reasons: []string{"changes where the sandbox's traffic goes"}}
				},
				// The upstream without its password: the audit record and
				// an approval show this, never the credential.
				Describe: func(a UpstreamArgs) dispatch.Target {
					return dispatch.Target{Sandbox: a.Sandbox, Target: a.masked()}
				},
			}),
		dispatch.Define(ToolUpstreamRemove, dispatch.Spec{Risk: guard.Medium,
			Description: "Remove the upstream proxy: the sandbox's allowed connections go direct"},
			s.removeUpstream, dispatch.Hooks[SandboxArgs, Removed]{Describe: sb}),
	}
}

// proxied resolves the sandbox and checks its network mode: the routing
// exists only in mode proxy.
func (s *service) proxied(ctx context.Context, c auth.Caller, id string) (string, error) {
	sb, err := s.m.Resolve(ctx, c, id)
	if err != nil {
		return "", err
	}
	switch mode := sb.Info().Network.Mode; mode {
	case sandbox.NetworkProxy:
		return sb.ID(), nil
	case sandbox.NetworkHost:
		return "", fault.New(fault.Conflict, "this sandbox uses network mode host: it shares the host's network and its connections do not pass through sandhold's proxy, so there is no upstream, mapping or exclude to manage; they apply in network mode proxy")
	default:
		return "", fault.New(fault.Conflict, "this sandbox uses network mode none: nothing leaves it, so there is no proxy to route; the proxy routes apply to a sandbox in network mode proxy (POST /v1/sandboxes with network.mode proxy, or PUT /v1/sandboxes/{id}/network)")
	}
}

// failure maps the proxy's errors to faults. An input error names its
// field the way the dispatcher's decoder does (body.<field>, the field of
// the tool's arguments), whichever tool and route it came through.
func failure(err error) error {
	var ie *egress.InputError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ie):
		return fault.InvalidField("body."+ie.Field, ie.Error())
	case errors.Is(err, egress.ErrNotProxied):
		return fault.New(fault.Conflict, "the sandbox's egress proxy does not serve it right now (its network mode is changing); try again")
	}
	return fault.Wrap(fault.Internal, err, "the proxy routing could not be changed")
}

func (s *service) routing(ctx context.Context, c auth.Caller, id string) (egress.Routing, error) {
	sid, err := s.proxied(ctx, c, id)
	if err != nil {
		return egress.Routing{}, err
	}
	r, err := s.p.RoutingOf(sid)
	return r.Masked(), failure(err)
}

func (s *service) listMappings(ctx context.Context, c auth.Caller, a SandboxArgs) ([]MappingRoute, error) {
	r, err := s.routing(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	out := make([]MappingRoute, 0, len(r.Mappings))
	for _, m := range r.Mappings {
		out = append(out, routeOf(m))
	}
	return out, nil
}

func (s *service) addMapping(ctx context.Context, c auth.Caller, a MappingArgs) (MappingRoute, error) {
	m, err := a.mapping()
	if err != nil {
		return MappingRoute{}, err
	}
	sid, err := s.proxied(ctx, c, a.Sandbox)
	if err != nil {
		return MappingRoute{}, err
	}
	m, err = s.p.AddMapping(ctx, sid, m)
	if err != nil {
		return MappingRoute{}, failure(err)
	}
	return routeOf(m), nil
}

func (s *service) removeMapping(ctx context.Context, c auth.Caller, a SourceArgs) (Removed, error) {
	sid, err := s.proxied(ctx, c, a.Sandbox)
	if err != nil {
		return Removed{}, err
	}
	found, err := s.p.RemoveMapping(sid, a.Source)
	if err != nil {
		return Removed{}, failure(err)
	}
	if !found {
		return Removed{}, fault.New(fault.NotFound, fmt.Sprintf("no mapping has the source %q", a.Source))
	}
	return Removed{Removed: true, What: a.Source}, nil
}

func (s *service) listExcludes(ctx context.Context, c auth.Caller, a SandboxArgs) ([]string, error) {
	r, err := s.routing(ctx, c, a.Sandbox)
	return r.Excludes, err
}

func (s *service) addExclude(ctx context.Context, c auth.Caller, a ExcludeArgs) (ExcludeResult, error) {
	sid, err := s.proxied(ctx, c, a.Sandbox)
	if err != nil {
		return ExcludeResult{}, err
	}
	p, err := s.p.AddExclude(sid, a.Pattern)
	if err != nil {
		return ExcludeResult{}, failure(err)
	}
	r, err := s.p.RoutingOf(sid)
	return ExcludeResult{Pattern: p, Excludes: r.Excludes}, failure(err)
}

func (s *service) removeExclude(ctx context.Context, c auth.Caller, a ExcludeArgs) (Removed, error) {
	sid, err := s.proxied(ctx, c, a.Sandbox)
	if err != nil {
		return Removed{}, err
	}
	found, err := s.p.RemoveExclude(sid, a.Pattern)
	if err != nil {
		return Removed{}, failure(err)
	}
	if !found {
		return Removed{}, fault.New(fault.NotFound, fmt.Sprintf("%q is not an exclude of this sandbox", a.Pattern))
	}
	return Removed{Removed: true, What: a.Pattern}, nil
}

func (s *service) diagnose(ctx context.Context, c auth.Caller, a DiagnoseArgs) (DiagnoseResult, error) {
	sid, err := s.proxied(ctx, c, a.Sandbox)
	if err != nil {
		return DiagnoseResult{}, err
	}
	d, err := s.p.Diagnose(ctx, sid, a.URL)
	if err != nil {
		return DiagnoseResult{}, failure(err)
	}
	out := DiagnoseResult{URL: d.URL, TargetReachable: d.Reachable, Route: d.Route, Via: d.Via, Reason: d.Reason}
	if d.Target != "" {
		t := d.Target
		out.ResolvedTarget = &t
	}
	if d.Mapping != nil {
		m := routeOf(*d.Mapping)
		out.MatchedMapping = &m
	}
	return out, nil
}

func (s *service) health(ctx context.Context, c auth.Caller, a SandboxArgs) (HealthResult, error) {
	sid, err := s.proxied(ctx, c, a.Sandbox)
	if err != nil {
		return HealthResult{}, err
	}
	h, err := s.p.Health(ctx, sid)
	if err != nil {
		return HealthResult{}, failure(err)
	}
	return HealthResult{Healthy: h.Healthy(), GostAlive: h.Serving, NginxAlive: h.Serving,
		ConfigConsistent: len(h.Inconsistencies) == 0, Inconsistencies: h.Inconsistencies,
		ActiveConnections: h.ActiveConns, Upstream: h.Upstream, UpstreamReachable: h.UpstreamReachable,
		UpstreamError: h.UpstreamError}, nil
}

func (s *service) getUpstream(ctx context.Context, c auth.Caller, a SandboxArgs) (*UpstreamInfo, error) {
	r, err := s.routing(ctx, c, a.Sandbox)
	if err != nil || r.Upstream == nil {
		return nil, err
	}
	in := infoOf(*r.Upstream)
	return &in, nil
}

func (s *service) setUpstream(ctx context.Context, c auth.Caller, a UpstreamArgs) (UpstreamInfo, error) {
	if a.AuthCmd != nil && *a.AuthCmd != "" {
		return UpstreamInfo{}, fault.New(fault.Unsupported, "auth_cmd is not supported: sandhold does not run a command to obtain proxy credentials; put them in server as user:pass@host:port")
	}
	u, err := egress.ParseUpstream(a.Server)
	if err != nil {
		return UpstreamInfo{}, fault.InvalidField("body.server", err.Error())
	}
	sid, err := s.proxied(ctx, c, a.Sandbox)
	if err != nil {
		return UpstreamInfo{}, err
	}
	u, err = s.p.SetUpstream(ctx, sid, u)
	if err != nil {
		return UpstreamInfo{}, failure(err)
	}
	return infoOf(u), nil
}

func (s *service) removeUpstream(ctx context.Context, c auth.Caller, a SandboxArgs) (Removed, error) {
	sid, err := s.proxied(ctx, c, a.Sandbox)
	if err != nil {
		return Removed{}, err
	}
	had, err := s.p.RemoveUpstream(sid)
	if err != nil {
		return Removed{}, failure(err)
	}
	return Removed{Removed: had, What: "upstream"}, nil
}
