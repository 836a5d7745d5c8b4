package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/build"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/template/oci"
)

// TemplateCreateBody is POST /v1/templates: pull an image (image) or build
// a Dockerfile without a context (dockerfile).
type TemplateCreateBody struct {
	Name    string     `json:"name" maxLength:"128" doc:"the template's name"`
	Tag     string     `json:"tag,omitempty" maxLength:"128" doc:"the template's tag (default latest)"`
	Image   string     `json:"image,omitempty" maxLength:"512" doc:"pull this image from a registry the server allows (SANDBOX_REGISTRIES)"`
	Limits  LimitsBody `json:"limits,omitempty" doc:"default limits of the template's sandboxes"`
	Browser bool       `json:"browser,omitempty" doc:"the template carries a browser"`
	// A build without a context (POST /v1/templates/build takes one).
	Dockerfile string            `json:"dockerfile,omitempty" maxLength:"1048576" doc:"build this Dockerfile (subset); its RUN steps run in sandboxes as the caller"`
	BuildArgs  map[string]string `json:"build_args,omitempty" doc:"values of the Dockerfile's ARGs"`
	Network    sandbox.Network   `json:"network,omitzero" doc:"egress of the build's RUN sandboxes (default none)"`
	NoCache    bool              `json:"no_cache,omitempty" doc:"run every step again"`
}

// overrides are the body's template settings.
func (b TemplateCreateBody) overrides() (oci.Overrides, error) {
	l, err := b.Limits.limits()
	if err != nil {
		return oci.Overrides{}, err
	}
	return oci.Overrides{Limits: template.Limits{MemoryBytes: l.MemoryBytes, CPUMilli: l.CPUMilli, Pids: l.Pids, DiskBytes: l.DiskBytes},
		Browser: b.Browser}, nil
}

// TemplateSourceRoutes mounts the routes that make templates from images:
// POST /v1/templates (pull) and POST /v1/templates/import (an uploaded OCI
// layout or docker save tarball, streamed and exempt from SANDBOX_MAX_BODY:
// the import caps it). With Accept: text/event-stream both send their
// steps as "progress" events and end with "done" (the template's
// envelope) or "error".
func (s *Server) TemplateSourceRoutes(d *dispatch.Dispatcher) {
	s.router.Post("/v1/templates", func(w http.ResponseWriter, r *http.Request) {
		var body TemplateCreateBody
		if err := decodeJSON(r, &body); err != nil {
			WriteError(w, r, err)
			return
		}
		ov, err := body.overrides()
		if err != nil {
			WriteError(w, r, err)
			return
		}
		switch {
		case body.Image != "" && body.Dockerfile != "":
			WriteError(w, r, fault.InvalidField("image", "give an image to pull or a dockerfile to build, not both"))
			return
		case body.Dockerfile != "":
			ps := newProgressStream(w, r)
			args := build.Args{Name: body.Name, Tag: body.Tag, Dockerfile: body.Dockerfile, BuildArgs: body.BuildArgs, Network: body.Network,
				NoCache: body.NoCache, Overrides: ov, Progress: ps.progress()}
			ps.finish(dispatchTemplate(r, d, build.ToolBuild, args))
			return
		case body.Image == "":
			WriteError(w, r, fault.InvalidField("image", "give an image to pull or a dockerfile to build (or POST a context to /v1/templates/build)"))
			return
		}
		ps := newProgressStream(w, r)
		args := oci.PullArgs{Image: body.Image, Name: body.Name, Tag: body.Tag, Overrides: ov, Progress: ps.progress()}
		ps.finish(dispatchTemplate(r, d, oci.ToolPull, args))
	})
	s.AllowLargeBodies("/v1/templates/import")
	s.router.Post("/v1/templates/import", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		ps := newProgressStream(w, r)
		args := oci.ImportArgs{Name: q.Get("name"), Tag: q.Get("tag"), Body: r.Body, Progress: ps.progress()}
		ps.finish(dispatchTemplate(r, d, oci.ToolImport, args))
	})
	s.AllowLargeBodies("/v1/templates/build")
	s.router.Post("/v1/templates/build", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		args := build.Args{Name: q.Get("name"), Tag: q.Get("tag"), NoCache: q.Get("no_cache") == "true",
			Network: sandbox.Network{Mode: q.Get("network"), Allow: q["allow"]}, BuildArgs: map[string]string{}, Context: r.Body}
		for _, kv := range q["build_arg"] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				WriteError(w, r, fault.InvalidField("build_arg", "build_arg is KEY=VALUE"))
				return
			}
			args.BuildArgs[k] = v
		}
		if q.Get("dockerfile") != "" {
			args.Dockerfile = q.Get("dockerfile")
		}
		ps := newProgressStream(w, r)
		args.Progress = ps.progress()
		ps.finish(dispatchTemplate(r, d, build.ToolBuild, args))
	})
	doc := s.api.OpenAPI()
	bodySchema := doc.Components.Schemas.Schema(reflect.TypeFor[TemplateCreateBody](), true, "TemplateCreateRequest")
	resSchema := doc.Components.Schemas.Schema(reflect.TypeFor[Envelope[template.Template]](), true, "TemplateResponse")
	answers := map[string]*huma.Response{"201": {Description: "the template made (or, with Accept: text/event-stream, progress events ending in done or error)",
		Content: map[string]*huma.MediaType{"application/json": {Schema: resSchema}, "text/event-stream": {Schema: StringSchema}}}}
	doc.AddOperation(&huma.Operation{OperationID: "pull-template", Method: http.MethodPost, Path: "/v1/templates", Tags: []string{"templates"}, Security: Security,
		Summary:     "Make a template by pulling an image from an allowed registry",
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {Schema: bodySchema}}},
		Responses:   answers})
	doc.AddOperation(&huma.Operation{OperationID: "build-template", Method: http.MethodPost, Path: "/v1/templates/build", Tags: []string{"templates"}, Security: Security,
		Summary:     "Build a Dockerfile (subset) with an uploaded context (a tar, or a gzipped tar, holding the Dockerfile unless dockerfile is given) into a template",
		Parameters:  QueryParams("name", "tag", "dockerfile", "network", "allow", "build_arg", "no_cache"),
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/x-tar": {Schema: BinarySchema}, "application/gzip": {Schema: BinarySchema}}},
		Responses:   answers})
	huma.Register(s.api, huma.Operation{OperationID: "commit-sandbox", Method: http.MethodPost, Path: "/v1/sandboxes/{id}/commit", Tags: []string{"templates"}, Security: Security,
		Summary: "Make a template of a template sandbox's changes to its root", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *CommitInput) (*TemplateOutput, error) {
			t, err := call(ctx, d, build.ToolCommit, build.CommitArgs{ID: in.ID, Name: in.Body.Name, Tag: in.Body.Tag})
			if err != nil {
				return nil, err
			}
			return &TemplateOutput{Body: OK(t)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "template-build-log", Method: http.MethodGet, Path: "/v1/templates/builds/{build}/log", Tags: []string{"templates"}, Security: Security,
		Summary: "A build's kept log"},
		func(ctx context.Context, in *BuildLogInput) (*BuildLogOutput, error) {
			l, err := call(ctx, d, build.ToolLog, build.LogArgs{Build: in.Build})
			if err != nil {
				return nil, err
			}
			return &BuildLogOutput{Body: OK(l)}, nil
		})
	doc.AddOperation(&huma.Operation{OperationID: "import-template", Method: http.MethodPost, Path: "/v1/templates/import", Tags: []string{"templates"}, Security: Security,
		Summary:     "Make a template of an uploaded OCI image layout (as a tar) or docker save tarball",
		Parameters:  QueryParams("name", "tag"),
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/x-tar": {Schema: BinarySchema}, "application/octet-stream": {Schema: BinarySchema}}},
		Responses:   answers})
}

// CommitInput is POST /v1/sandboxes/{id}/commit.
type CommitInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		Name string `json:"name" maxLength:"128" doc:"the new template's name"`
		Tag  string `json:"tag,omitempty" maxLength:"128" doc:"its tag (default latest)"`
	}
}

// BuildLogInput names a build.
type BuildLogInput struct {
	Build string `path:"build" maxLength:"64"`
}

// BuildLogOutput is a build's log.
type BuildLogOutput struct {
	Body Envelope[string]
}

// dispatchTemplate runs a template-making tool for the request's caller.
func dispatchTemplate[A any](r *http.Request, d *dispatch.Dispatcher, tool dispatch.Ref[A, template.Template], args A) (template.Template, error) {
	return call(dispatch.WithStreaming(r.Context()), d, tool, args)
}

// progressStream answers a template-making request: as JSON at the end,
// or (Accept: text/event-stream) as SSE events while it runs.
type progressStream struct {
	w  http.ResponseWriter
	r  *http.Request
	fl http.Flusher
	// mu serialises events (a build's output comes from its reader).
	mu  sync.Mutex
	sse bool
}

func newProgressStream(w http.ResponseWriter, r *http.Request) *progressStream {
	ps := &progressStream{w: w, r: r}
	if fl, ok := w.(http.Flusher); ok && strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		// Events go out while an upload is still being read.
		_ = http.NewResponseController(w).EnableFullDuplex()
		ps.fl, ps.sse = fl, true
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		fl.Flush()
	}
	return ps
}

// send writes one SSE event.
func (ps *progressStream) send(event string, v any) {
	b, _ := json.Marshal(v)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	_, _ = fmt.Fprintf(ps.w, "event: %s\ndata: %s\n\n", event, b)
	ps.fl.Flush()
}

// progress is the tool's progress callback: events, or nil without SSE.
func (ps *progressStream) progress() template.Progress {
	if !ps.sse {
		return nil
	}
	return func(e template.Event) { ps.send("progress", e) }
}

// finish writes the outcome.
func (ps *progressStream) finish(t template.Template, err error) {
	if !ps.sse {
		if err != nil {
			WriteError(ps.w, ps.r, err)
			return
		}
		WriteData(ps.w, http.StatusCreated, t)
		return
	}
	if err != nil {
		b := errorBody(ps.r.Context(), err)
		ps.send("error", b)
		return
	}
	ps.send("done", OK(t))
}
