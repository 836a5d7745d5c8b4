package convert

import (
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// ToolConvert is the tool's name (its audit action).
var ToolConvert = dispatch.Ref[Args, Result]("util.convert_to_markdown")

// Tool is util.convert_to_markdown. A sandbox file is Safe to convert
// (read through the file API's policy, converted inside the sandbox); a
// URL is Medium: it makes the sandbox reach out (its egress policy still
// decides). It counts as a command (it runs a converter).
func (s *Service) Tool() dispatch.Tool {
	return dispatch.Define(ToolConvert, dispatch.Spec{
		Description: "Convert a document (HTML, PDF, DOCX, ODT, EPUB, RTF, LaTeX, rst, …) in the sandbox, or at an http(s) URL fetched from inside it, to Markdown; the converter runs inside the sandbox",
		Risk:        guard.Safe, RiskCeiling: guard.Medium,
		Category: ratelimit.Command,
	}, s.Convert, dispatch.Hooks[Args, Result]{
		Assess: func(a Args) dispatch.Assessment {
			p, remote, err := parseURI(a.URI)
			if err != nil {
				return dispatch.Assessment{Risk: guard.Medium}
			}
			if remote {
				return dispatch.Assessment{Risk: guard.Medium, Reasons: []string{"fetches a URL from inside the sandbox"}}
			}
			return dispatch.Assessment{Risk: guard.Safe, Paths: []string{p}}
		},
		Describe: func(a Args) dispatch.Target {
			return dispatch.Target{Target: a.URI, Sandbox: a.Sandbox}
		},
		Summarize: func(_ Args, r Result) map[string]any {
			return map[string]any{"format": r.Format, "converter": r.Converter, "bytes": r.Bytes,
				"markdown_bytes": len(r.Markdown), "truncated": r.Truncated, "sandbox_id": r.SandboxID}
		},
	})
}

// Tools are the service's tools (one: util.convert_to_markdown).
func (s *Service) Tools() []dispatch.Tool { return []dispatch.Tool{s.Tool()} }
