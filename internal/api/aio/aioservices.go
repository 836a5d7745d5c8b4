package aio

import (
	"bufio"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"reflect"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/convert"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/hooks"
	"github.com/sandhold/sandhold/internal/observe"
	"github.com/sandhold/sandhold/internal/skills"
)

// groupServices are the AIO namespaces served by capabilities of their own:
// util/convert_to_markdown, skills, and the sandbox's hooks and observe.
const groupServices = "services"

// ServiceRoutes mounts the rows of groupServices (the daemon calls it once their
// tools are registered).
func ServiceRoutes(s *api.Server, d *dispatch.Dispatcher) { mountAIO(s, d, groupServices) }

// ConvertRequest is AIO's UtilConvertToMarkdownRequest.
type ConvertRequest struct {
	URI string `json:"uri" required:"true" doc:"the document: a path in the sandbox (/workspace/a.pdf, a.pdf, file:///workspace/a.pdf) or an http(s) URL fetched from inside the sandbox"`
}

// serviceRows are the rows of groupServices. AIO's answers for these
// operations allow only the result or null as data, so a failure carries
// null (its message says what went wrong).
var serviceRows = nullData([]aioRoute{
	jsonRowAs(groupServices, http.MethodPost, "/v1/util/convert_to_markdown", convert.ToolConvert, "util",
		"Convert a document (HTML, PDF, DOCX, ODT, EPUB, RTF, …) to Markdown, inside the sandbox",
		func(r *http.Request, in ConvertRequest) (convert.Args, error) {
			return convert.Args{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, URI: in.URI}, nil
		},
		func(_ *http.Request, _ ConvertRequest, res convert.Result) (string, error) { return res.Markdown, nil },
		required("uri")),

	plainRow(groupServices, http.MethodPost, "/v1/skills/register", skills.ToolRegister, "skills",
		"Register skills from a zip (multipart field file) or a directory or .zip in the sandbox (field path); name names a single skill",
		reflect.TypeFor[api.Envelope[skills.RegisterResult]](), skillsRegister,
		takes("multipart/form-data"), doc(func(op *huma.Operation) {
			op.RequestBody = &huma.RequestBody{Content: map[string]*huma.MediaType{"multipart/form-data": {Schema: &huma.Schema{Type: "object",
				Properties: map[string]*huma.Schema{"file": api.BinarySchema, "path": api.StringSchema, "name": api.StringSchema}}}}}
		})),
	jsonRowAs(groupServices, http.MethodGet, "/v1/skills/metadatas", skills.ToolList, "skills",
		"The metadata (SKILL.md front matter) of the sandbox's skills; ?names=a,b filters",
		func(r *http.Request, _ struct{}) (skills.NamesArgs, error) {
			return skills.NamesArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Names: r.URL.Query().Get("names")}, nil
		}, same[struct{}, skills.Collection], doc(func(op *huma.Operation) { op.Parameters = append(op.Parameters, api.QueryParams("names")...) })),
	jsonRowAs(groupServices, http.MethodDelete, "/v1/skills", skills.ToolClear, "skills",
		"Delete every skill of the sandbox",
		func(r *http.Request, _ struct{}) (skills.ClearArgs, error) {
			return skills.ClearArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}}, nil
		},
		same[struct{}, skills.Cleared]),
	jsonRowAs(groupServices, http.MethodDelete, "/v1/skills/{name}", skills.ToolDelete, "skills",
		"Delete one skill", skillName, same[struct{}, skills.Metadata]),
	jsonRowAs(groupServices, http.MethodGet, "/v1/skills/{name}/content", skills.ToolContent, "skills",
		"A skill's SKILL.md without its front matter", skillName, same[struct{}, skills.Content]),

	jsonRow(groupServices, http.MethodPost, "/v1/sandbox/hooks", hooks.ToolRegister, "sandbox",
		"Register a command run inside the sandbox on an event (shutdown: before it is deleted, stopped idle, or the server stops)",
		required("name", "command")),
	jsonRowAs(groupServices, http.MethodGet, "/v1/sandbox/hooks", hooks.ToolList, "sandbox",
		"The sandbox's hooks of an event (?event=, default shutdown), in the order they run",
		func(r *http.Request, _ struct{}) (hooks.ListArgs, error) {
			return hooks.ListArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Event: r.URL.Query().Get("event")}, nil
		}, same[struct{}, []hooks.Hook], doc(func(op *huma.Operation) { op.Parameters = append(op.Parameters, api.QueryParams("event")...) })),
	jsonRowAs(groupServices, http.MethodDelete, "/v1/sandbox/hooks/{name}", hooks.ToolRemove, "sandbox",
		"Remove a hook by name",
		func(r *http.Request, _ struct{}) (hooks.RemoveArgs, error) {
			return hooks.RemoveArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Name: chi.URLParam(r, "name")}, nil
		}, same[struct{}, hooks.Removed]),

	jsonRowAs(groupServices, http.MethodGet, "/v1/sandbox/observe/status", observe.ToolStatus, "sandbox",
		"Whether an observation session runs, and how many reports there are", obsSandbox, same[struct{}, observe.Status]),
	jsonRowAs(groupServices, http.MethodGet, "/v1/sandbox/observe/live", observe.ToolLive, "sandbox",
		"A snapshot now: cgroup figures, /workspace, top processes (?top_rows=, default 10), recent activity",
		func(r *http.Request, _ struct{}) (observe.LiveArgs, error) {
			a := observe.LiveArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}}
			if v := r.URL.Query().Get("top_rows"); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil {
					return observe.LiveArgs{}, fieldError(inQuery, "top_rows", "int_parsing", "top_rows must be an integer")
				}
				a.TopRows = &n
			}
			return a, nil
		}, same[struct{}, observe.Live], doc(func(op *huma.Operation) { op.Parameters = append(op.Parameters, api.QueryParams("top_rows")...) })),
	jsonRow(groupServices, http.MethodPost, "/v1/sandbox/observe/start", observe.ToolStart, "sandbox",
		"Start recording the sandbox until stopped or the duration ends"),
	jsonRow(groupServices, http.MethodPost, "/v1/sandbox/observe/stop", observe.ToolStop, "sandbox",
		"Stop the running session and export its report"),
	jsonRow(groupServices, http.MethodPost, "/v1/sandbox/observe/export", observe.ToolExport, "sandbox",
		"Export a report of the running or last session"),
	jsonRowAs(groupServices, http.MethodGet, "/v1/sandbox/observe/reports", observe.ToolReports, "sandbox",
		"The sandbox's observation reports", obsSandbox, same[struct{}, []observe.ReportInfo]),
	plainRow(groupServices, http.MethodGet, "/v1/sandbox/observe/reports/{report_id}", observe.ToolReport, "sandbox",
		"Download a report (gzip-compressed JSON)", nil, observeReport, doc(func(op *huma.Operation) {
			op.Responses["200"] = &huma.Response{Description: "the report", Content: map[string]*huma.MediaType{"application/gzip": {Schema: api.BinarySchema}}}
		})),
	jsonRowAs(groupServices, http.MethodDelete, "/v1/sandbox/observe/reports/{report_id}", observe.ToolReportDelete, "sandbox",
		"Delete a report", reportRef, same[struct{}, observe.ReportInfo]),
})

// nullData sets every row's failures to carry data null.
func nullData(rows []aioRoute) []aioRoute {
	for i := range rows {
		lateInvalidFails()(&rows[i])
	}
	return rows
}

func skillName(r *http.Request, _ struct{}) (skills.NameArgs, error) {
	return skills.NameArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, Name: chi.URLParam(r, "name")}, nil
}

func obsSandbox(r *http.Request, _ struct{}) (observe.SandboxArgs, error) {
	return observe.SandboxArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}}, nil
}

func reportRef(r *http.Request, _ struct{}) (observe.ReportArgs, error) {
	return observe.ReportArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, ReportID: chi.URLParam(r, "report_id")}, nil
}

// skillsRegister reads AIO's form (multipart: file, path, name; every
// field optional) and registers the skills. The fields before the file
// are read here; the file is not: it goes to the tool as a stream, read
// only by the tool's run (after authentication, the rate limit and the
// policy) into the sandbox's workspace, and the fields after it are read
// then. No part of the zip is held in server memory.
func skillsRegister(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	a := skills.RegisterArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.ContentLength == 0 {
		ct = "" // no body: nothing to register (the tool says what is missing)
	}
	switch ct {
	case "multipart/form-data":
		if params["boundary"] == "" {
			e.fail(w, r, rt, "", fault.New(fault.Invalid, "the body is not valid multipart/form-data (no boundary)"))
			return
		}
		mr := multipart.NewReader(bufio.NewReader(r.Body), params["boundary"])
		parts := 0
		next := func() (*multipart.Part, error) {
			if parts++; parts > maxUploadParts {
				return nil, io.EOF
			}
			return mr.NextPart()
		}
		for {
			part, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				e.fail(w, r, rt, "", fault.Wrap(fault.Invalid, err, "the body is not valid multipart/form-data"))
				return
			}
			if part.FormName() == "file" {
				a.Upload = part
				a.AfterUpload = func() (string, string, error) { return skillFields(next) }
				break
			}
			if err := skillField(part, &a.Name, &a.Path); err != nil {
				e.fail(w, r, rt, "", err)
				return
			}
		}
	case "":
		// No body: nothing to register (the tool says what is missing).
	default:
		e.fail(w, r, rt, "", fault.New(fault.Invalid, "the body is not multipart/form-data"))
		return
	}
	// Every field of AIO's form is optional, so the tool's own rules (a
	// file or a path) are a tool-level failure, checked by the dispatcher.
	answer(e, rt, w, r, skills.ToolRegister, a, a.Path)
}

// skillFields reads the rest of a skills form (after its file): a name, a
// path; a second file is refused.
func skillFields(next func() (*multipart.Part, error)) (name, path string, err error) {
	for {
		part, err := next()
		if errors.Is(err, io.EOF) {
			return name, path, nil
		}
		if err != nil {
			return "", "", fault.Wrap(fault.Invalid, err, "the body is not valid multipart/form-data")
		}
		if part.FormName() == "file" {
			return "", "", fault.InvalidField(inBody+".file", "one zip file per registration")
		}
		if err := skillField(part, &name, &path); err != nil {
			return "", "", err
		}
	}
}

// skillField reads one field of a skills form other than its file.
func skillField(part *multipart.Part, name, path *string) error {
	switch part.FormName() {
	case "path", "name":
		b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
		if err != nil || len(b) > maxFieldBytes {
			return fault.InvalidField(inBody+"."+part.FormName(), "field "+part.FormName()+" is malformed or too long")
		}
		if part.FormName() == "path" {
			*path = string(b)
		} else {
			*name = string(b)
		}
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(part, maxFieldBytes))
	}
	return nil
}

// observeReport serves a report's gzip bytes.
func observeReport(e *aioEdge, rt *aioRoute, w http.ResponseWriter, r *http.Request) {
	a := observe.ReportArgs{On: dispatch.On{Sandbox: chi.URLParam(r, "id")}, ReportID: chi.URLParam(r, "report_id")}
	rep, err := observe.ToolReport.Call(r.Context(), e.dispatcher(), callerOf(r), a)
	if err != nil {
		e.fail(w, r, rt, a.ReportID, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/gzip")
	h.Set("Content-Disposition", `attachment; filename="`+rep.Info.ReportID+`.json.gz"`)
	h.Set("Content-Length", strconv.Itoa(len(rep.Gzip)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rep.Gzip)
}
