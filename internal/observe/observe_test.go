package observe_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/observe"
)

type client struct {
	t  *testing.T
	cl *daemontest.Client
	sb string
}

func (c client) call(name string, args map[string]any, out any) daemontest.Reply {
	c.t.Helper()
	args["sandbox"] = c.sb
	r := c.cl.Do("POST", "/v1/tools/call", map[string]any{"name": name, "arguments": args})
	if out != nil && r.Success {
		if err := json.Unmarshal(r.Data, out); err != nil {
			c.t.Fatalf("%s: decode %s: %v", name, r.Raw, err)
		}
	}
	return r
}

func (c client) must(name string, args map[string]any, out any) {
	c.t.Helper()
	if r := c.call(name, args, out); !r.Success {
		c.t.Fatalf("%s: %d %s", name, r.Status, r.Raw)
	}
}

// TestObserveSessionRecordsTheSandbox starts a capture session, makes the
// sandbox work (a command that holds memory, a file written), stops the
// session and reads the report: samples with cgroup and disk figures and
// processes, the activity from the audit log, a summary.
func TestObserveSessionRecordsTheSandbox(t *testing.T) {
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	c := client{t: t, cl: cl, sb: cl.NewSandbox(nil)}

	var st observe.Status
	c.must(observe.ToolStatus.Name(), map[string]any{}, &st)
	if st.Mode != "off" || st.Running || st.ReportCount != 0 {
		t.Fatalf("status before: %+v", st)
	}
	var start observe.StartResult
	c.must(observe.ToolStart.Name(), map[string]any{"interval_seconds": 1, "idempotency_key": "k1"}, &start)
	if start.Mode != "capture" || start.IntervalSeconds != 1 || start.SessionID == "" {
		t.Fatalf("start %+v", start)
	}
	var again observe.StartResult
	c.must(observe.ToolStart.Name(), map[string]any{"interval_seconds": 1, "idempotency_key": "k1"}, &again)
	if again.SessionID != start.SessionID {
		t.Fatalf("idempotent retry made a new session: %s", again.SessionID)
	}
	if r := c.call(observe.ToolStart.Name(), map[string]any{}, nil); r.Success || r.Status != 409 {
		t.Fatalf("second session: %d %s", r.Status, r.Raw)
	}

	// Work while observed: a process holding memory for a few samples,
	// a file written through the file API.
	res := cl.Exec(c.sb, "python3 -c 'import time; b = bytearray(64<<20); time.sleep(3)' || sleep 3")
	if res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("work: %+v", res)
	}
	c.cl.Do("POST", "/v1/tools/call", map[string]any{"name": "file.write", "arguments": map[string]any{"sandbox": c.sb, "file": "/workspace/out.txt", "content": "x"}})

	var live observe.Live
	c.must(observe.ToolLive.Name(), map[string]any{"top_rows": 5}, &live)
	if live.Mode != "capture" || len(live.Disk) != 1 || live.Disk[0].TotalBytes <= 0 || live.Cgroup.MemCurrentBytes <= 0 {
		t.Fatalf("live %+v", live)
	}
	if len(live.TopProcesses) == 0 || len(live.TopProcesses) > 5 {
		t.Fatalf("live processes %+v", live.TopProcesses)
	}
	c.must(observe.ToolStatus.Name(), map[string]any{}, &st)
	if !st.Running || st.SessionID == nil || *st.SessionID != start.SessionID || st.LastSampleAt == nil {
		t.Fatalf("status during: %+v", st)
	}

	var stop observe.StopResult
	c.must(observe.ToolStop.Name(), map[string]any{}, &stop)
	if !stop.Stopped || !stop.ReportReady || stop.ReportID == "" {
		t.Fatalf("stop %+v", stop)
	}
	var reports []observe.ReportInfo
	c.must(observe.ToolReports.Name(), map[string]any{}, &reports)
	if len(reports) != 1 || reports[0].ReportID != stop.ReportID || reports[0].Reason != "stop" || reports[0].SizeBytes <= 0 {
		t.Fatalf("reports %+v", reports)
	}
	var rep observe.Report
	c.must(observe.ToolReport.Name(), map[string]any{"report_id": stop.ReportID}, &rep)
	zr, err := gzip.NewReader(bytes.NewReader(rep.Gzip))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	var body observe.ReportBody
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("report body: %v", err)
	}
	if body.SandboxID != c.sb || body.SessionID != start.SessionID || body.EndedAt == nil {
		t.Fatalf("report head %+v", body)
	}
	if len(body.Samples) < 2 || body.Summary.Samples != len(body.Samples) {
		t.Fatalf("samples %d, summary %+v", len(body.Samples), body.Summary)
	}
	if body.Summary.MemPeakBytes < 32<<20 || body.Summary.CPUUsageUsec <= 0 || body.Summary.DiskPeakBytes <= 0 {
		t.Errorf("summary figures %+v", body.Summary)
	}
	sawProc := false
	for _, s := range body.Samples {
		if len(s.Processes) > 0 {
			sawProc = true
		}
	}
	if !sawProc {
		t.Error("no process rows in any sample")
	}
	var types []string
	for _, e := range body.Events {
		types = append(types, e.Type)
	}
	if all := strings.Join(types, " "); !strings.Contains(all, "audit.exec.run") || !strings.Contains(all, "audit.file.write") {
		t.Errorf("activity missing from events: %s", all)
	}
	if body.Summary.Commands < 1 || body.Summary.FileChanges < 1 {
		t.Errorf("summary counts %+v", body.Summary)
	}

	var del observe.ReportInfo
	c.must(observe.ToolReportDelete.Name(), map[string]any{"report_id": stop.ReportID}, &del)
	if r := c.call(observe.ToolReport.Name(), map[string]any{"report_id": stop.ReportID}, nil); r.Success || r.Status != 404 {
		t.Fatalf("deleted report: %d", r.Status)
	}
	c.must(observe.ToolStatus.Name(), map[string]any{}, &st)
	if st.Running || st.Mode != "off" || st.ReportCount != 0 {
		t.Fatalf("status after: %+v", st)
	}
}

// TestObserveDurationEndsAndExports: a session with a duration ends by
// itself and leaves a report with reason duration; export works on the
// last session; refusals are the client's errors.
func TestObserveDurationEndsAndExports(t *testing.T) {
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	c := client{t: t, cl: cl, sb: cl.NewSandbox(nil)}
	for _, args := range []map[string]any{
		{"mode": "spy"}, {"interval_seconds": 0.1}, {"duration_seconds": 0}, {"duration_seconds": 100000},
	} {
		if r := c.call(observe.ToolStart.Name(), args, nil); r.Success || r.Status != 400 {
			t.Errorf("start %v: %d %s", args, r.Status, r.Raw)
		}
	}
	if r := c.call(observe.ToolExport.Name(), map[string]any{}, nil); r.Success || r.Status != 404 {
		t.Errorf("export without a session: %d %s", r.Status, r.Raw)
	}
	c.must(observe.ToolStart.Name(), map[string]any{"mode": "guardrail", "duration_seconds": 1, "interval_seconds": 1}, nil)
	var reports []observe.ReportInfo
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c.must(observe.ToolReports.Name(), map[string]any{}, &reports)
		if len(reports) > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(reports) != 1 || reports[0].Reason != "duration" {
		t.Fatalf("reports %+v", reports)
	}
	var info observe.ReportInfo
	c.must(observe.ToolExport.Name(), map[string]any{"reason": "audit", "idempotency_key": "e1"}, &info)
	var same observe.ReportInfo
	c.must(observe.ToolExport.Name(), map[string]any{"reason": "audit", "idempotency_key": "e1"}, &same)
	if info.Reason != "audit" || same.ReportID != info.ReportID {
		t.Fatalf("export %+v, retry %+v", info, same)
	}
}

// TestObserveAIORoutes: start, export and download through AIO's routes;
// the download is application/gzip holding the report's JSON.
func TestObserveAIORoutes(t *testing.T) {
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	if r := cl.Do("POST", "/v1/sandbox/observe/start", map[string]any{"interval_seconds": 1}); !r.Success {
		t.Fatalf("start: %s", r.Raw)
	}
	r := cl.Do("POST", "/v1/sandbox/observe/export", map[string]any{"reason": "check"})
	var info observe.ReportInfo
	if !r.Success || json.Unmarshal(r.Data, &info) != nil || info.ReportID == "" {
		t.Fatalf("export: %s", r.Raw)
	}
	r = cl.Do("GET", "/v1/sandbox/observe/reports/"+info.ReportID, nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("download: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.Raw))
	if err != nil {
		t.Fatal(err)
	}
	var body observe.ReportBody
	if err := json.NewDecoder(zr).Decode(&body); err != nil || body.ReportID != info.ReportID || body.Reason != "check" {
		t.Fatalf("report %+v: %v", body, err)
	}
	r = cl.Do("GET", "/v1/sandbox/observe/reports/rep_nope", nil)
	if r.Status != 200 || r.Success {
		t.Fatalf("missing report: %d %s", r.Status, r.Raw)
	}
}
