package observe

import (
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tool names (the audit actions).
var (
	ToolStatus       = dispatch.Ref[SandboxArgs, Status]("sandbox.observe.status")
	ToolLive         = dispatch.Ref[LiveArgs, Live]("sandbox.observe.live")
	ToolStart        = dispatch.Ref[StartArgs, StartResult]("sandbox.observe.start")
	ToolStop         = dispatch.Ref[StopArgs, StopResult]("sandbox.observe.stop")
	ToolExport       = dispatch.Ref[ExportArgs, ReportInfo]("sandbox.observe.export")
	ToolReports      = dispatch.Ref[SandboxArgs, []ReportInfo]("sandbox.observe.reports")
	ToolReport       = dispatch.Ref[ReportArgs, Report]("sandbox.observe.report")
	ToolReportDelete = dispatch.Ref[ReportArgs, ReportInfo]("sandbox.observe.report_delete")
)

// Tools are the observation tools. Reading is Safe; starting, stopping,
// exporting and deleting change what the server keeps (Medium).
func (s *Service) Tools() []dispatch.Tool {
	sbx := func(id string) dispatch.Target { return dispatch.Target{Sandbox: id} }
	return []dispatch.Tool{
		dispatch.Define(ToolStatus, dispatch.Spec{Risk: guard.Safe,
			Description: "Whether an observation session runs in the sandbox, and how many reports it has"},
			s.Status, dispatch.Hooks[SandboxArgs, Status]{Describe: func(a SandboxArgs) dispatch.Target { return sbx(a.Sandbox) }}),
		dispatch.Define(ToolLive, dispatch.Spec{Risk: guard.Safe,
			Description: "A snapshot of the sandbox now: cgroup figures, /workspace usage, top processes, recent activity"},
			s.Live, dispatch.Hooks[LiveArgs, Live]{Describe: func(a LiveArgs) dispatch.Target { return sbx(a.Sandbox) }}),
		dispatch.Define(ToolStart, dispatch.Spec{Risk: guard.Medium,
			Description: "Start recording the sandbox (cgroup figures, disk, processes, activity) until stopped or the duration ends"},
			s.Start, dispatch.Hooks[StartArgs, StartResult]{
				Describe: func(a StartArgs) dispatch.Target { return sbx(a.Sandbox) },
				Summarize: func(_ StartArgs, r StartResult) map[string]any {
					return map[string]any{"session_id": r.SessionID, "mode": r.Mode, "interval_seconds": r.IntervalSeconds}
				},
			}),
		dispatch.Define(ToolStop, dispatch.Spec{Risk: guard.Medium,
			Description: "Stop the running observation session and export its report"},
			s.Stop, dispatch.Hooks[StopArgs, StopResult]{
				Describe: func(a StopArgs) dispatch.Target { return sbx(a.Sandbox) },
				Summarize: func(_ StopArgs, r StopResult) map[string]any {
					return map[string]any{"session_id": r.SessionID, "report_id": r.ReportID}
				},
			}),
		dispatch.Define(ToolExport, dispatch.Spec{Risk: guard.Medium,
			Description: "Export a report of the running or last observation session"},
			s.Export, dispatch.Hooks[ExportArgs, ReportInfo]{
				Describe: func(a ExportArgs) dispatch.Target { return sbx(a.Sandbox) },
				Summarize: func(_ ExportArgs, r ReportInfo) map[string]any {
					return map[string]any{"report_id": r.ReportID, "size_bytes": r.SizeBytes}
				},
			}),
		dispatch.Define(ToolReports, dispatch.Spec{Risk: guard.Safe,
			Description: "List the sandbox's observation reports"},
			s.Reports, dispatch.Hooks[SandboxArgs, []ReportInfo]{Describe: func(a SandboxArgs) dispatch.Target { return sbx(a.Sandbox) }}),
		dispatch.Define(ToolReport, dispatch.Spec{Risk: guard.Safe,
			Description: "Download an observation report (gzip-compressed JSON)"},
			s.Download, dispatch.Hooks[ReportArgs, Report]{
				Describe: func(a ReportArgs) dispatch.Target { return dispatch.Target{Target: a.ReportID, Sandbox: a.Sandbox} },
			}),
		dispatch.Define(ToolReportDelete, dispatch.Spec{Risk: guard.Medium,
			Description: "Delete an observation report"},
			s.DeleteReport, dispatch.Hooks[ReportArgs, ReportInfo]{
				Describe: func(a ReportArgs) dispatch.Target { return dispatch.Target{Target: a.ReportID, Sandbox: a.Sandbox} },
			}),
	}
}
