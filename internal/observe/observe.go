// Package observe records what happens in a sandbox over a stretch of
// time — AIO's /v1/sandbox/observe: status, a live snapshot, sessions
// started and stopped, and reports exported, listed, downloaded and
// deleted.
//
// A session samples, every interval, the sandbox's cgroup figures (CPU
// time and share, memory against its limit, OOM kills, processes against
// the pids limit — read by the server from the sandbox's cgroup, not
// reported by anything inside), its /workspace usage (statfs by the init)
// and, when asked, its processes (ps run inside the sandbox). In
// guardrail mode it keeps the latest samples and raises events when a
// figure crosses a line (memory or disk at 90 %, pids at 90 % of the
// limit, an OOM kill, the sandbox stopping); capture mode keeps every
// sample too. A report adds the sandbox's activity from the audit log
// (every tool call on it: commands with their exit, files written, …) in
// the session's window, and is kept gzip-compressed JSON in server memory.
//
// Limits: sessions, samples, events and reports are capped (below); a
// report lives in memory until deleted, the sandbox is deleted or the
// server restarts. Sampling never starts a stopped sandbox: a stopped or
// paused sandbox is sampled from its cgroup only (nothing runs in it).
package observe

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Modes.
const (
	ModeOff       = "off"
	ModeGuardrail = "guardrail"
	ModeCapture   = "capture"
)

// Defaults and caps, with their reasons.
const (
	DefaultInterval = 5 * time.Second
	MinInterval     = time.Second // each sample may run ps in the sandbox
	MaxInterval     = 10 * time.Minute
	// MaxDuration caps a session (and is its length when none is given).
	MaxDuration = 24 * time.Hour
	// maxSamples is what one session keeps (the oldest go first): 720
	// is an hour at the default interval.
	maxSamples = 720
	// guardrailSamples is what guardrail mode keeps.
	guardrailSamples = 60
	// maxEvents caps a session's and a report's events.
	maxEvents = 1000
	// maxReports caps the reports kept per sandbox (the oldest go first).
	maxReports = 16
	// maxTopRows caps top_rows of a live snapshot.
	maxTopRows = 100
	// auditPages bounds the audit log pages read for one report.
	auditPages = 20
	// psTimeout bounds one ps run in the sandbox.
	psTimeout = 10 * time.Second
	// threshold is the share of a limit that raises a guardrail event.
	threshold = 90.0
)

// Resolver returns the sandbox a call names ("" = the caller's default).
type Resolver func(ctx context.Context, c auth.Caller, id string) (*sandbox.Sandbox, error)

// Auditor is the part of the audit log a report reads.
type Auditor interface {
	Query(ctx context.Context, f audit.Filter) ([]audit.Record, error)
}

// Stats returns a sandbox's cgroup figures (false when it has none now).
type Stats func(id string) (cgroup.Stats, bool)

// Service runs observation sessions.
type Service struct {
	resolve Resolver
	stats   Stats
	audit   Auditor

	// mu guards boxes.
	mu    sync.Mutex
	boxes map[string]*box // sandbox id → its sessions and reports
	stop  chan struct{}
	wg    sync.WaitGroup
}

// box is one sandbox's observation state.
type box struct {
	id      string
	session *session // the running or the last session
	reports []*report
	// idem maps an idempotency key to the session or report it made.
	idem map[string]string
}

// New returns a service.
func New(resolve Resolver, stats Stats, au Auditor) *Service {
	return &Service{resolve: resolve, stats: stats, audit: au, boxes: make(map[string]*box), stop: make(chan struct{})}
}

// Close ends every session's sampling (reports are dropped with the
// server).
func (s *Service) Close() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Forget drops a deleted sandbox's sessions and reports.
func (s *Service) Forget(id string) {
	s.mu.Lock()
	b := s.boxes[id]
	delete(s.boxes, id)
	s.mu.Unlock()
	if b != nil && b.session != nil {
		b.session.end("sandbox_deleted")
	}
}

func (s *Service) boxOf(id string) *box {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.boxes[id]
	if b == nil {
		b = &box{id: id, idem: map[string]string{}}
		s.boxes[id] = b
	}
	return b
}

// CgroupSnapshot is AIO's ObservationCgroupSnapshot (the fields cgroups
// give on both v1 and v2; the rest are null).
type CgroupSnapshot struct {
	CPUUsagePct      *float64 `json:"cpu_usage_pct"`
	CPUUsageUsec     int64    `json:"cpu_usage_usec"`
	CPUNrPeriods     *int64   `json:"cpu_nr_periods"`
	CPUNrThrottled   *int64   `json:"cpu_nr_throttled"`
	CPUThrottledUsec *int64   `json:"cpu_throttled_usec"`
	MemCurrentBytes  int64    `json:"mem_current_bytes"`
	MemMaxBytes      *int64   `json:"mem_max_bytes"`
	MemUsagePct      *float64 `json:"mem_usage_pct"`
	OOM              *int64   `json:"oom"`
	OOMKill          *int64   `json:"oom_kill"`
	MemoryAnonBytes  *int64   `json:"memory_anon_bytes"`
	MemoryFileBytes  *int64   `json:"memory_file_bytes"`
	MemoryShmemBytes *int64   `json:"memory_shmem_bytes"`
	MemorySlabBytes  *int64   `json:"memory_slab_bytes"`
	// Pids and PidsMax are sandhold's additions (the user group's).
	Pids    int64  `json:"pids"`
	PidsMax *int64 `json:"pids_max"`
}

// DiskSnapshot is AIO's ObservationDiskSnapshot.
type DiskSnapshot struct {
	Path          string   `json:"path"`
	UsedBytes     int64    `json:"used_bytes"`
	TotalBytes    int64    `json:"total_bytes"`
	FreeBytes     int64    `json:"free_bytes"`
	UsagePct      float64  `json:"usage_pct"`
	InodeUsed     *int64   `json:"inode_used"`
	InodeTotal    *int64   `json:"inode_total"`
	InodeUsagePct *float64 `json:"inode_usage_pct"`
}

// ProcessSnapshot is AIO's ObservationProcessSnapshot.
type ProcessSnapshot struct {
	PID       int      `json:"pid"`
	User      string   `json:"user"`
	Comm      string   `json:"comm"`
	RSSBytes  int64    `json:"rss_bytes"`
	RSSMiB    float64  `json:"rss_mib"`
	CPUPct    *float64 `json:"cpu_pct"`
	Threads   *int     `json:"threads"`
	FDs       *int     `json:"fds"`
	State     *string  `json:"state"`
	UptimeSec *float64 `json:"uptime_sec"`
	PPID      *int     `json:"ppid"`
}

// Event is AIO's ObservationEvent.
type Event struct {
	TS      time.Time      `json:"ts"`
	Type    string         `json:"type"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

// Sample is one sampling of a session.
type Sample struct {
	At        time.Time         `json:"at"`
	State     string            `json:"state"`
	Cgroup    CgroupSnapshot    `json:"cgroup"`
	Disk      []DiskSnapshot    `json:"disk,omitempty"`
	Processes []ProcessSnapshot `json:"processes,omitempty"`
}

// cpuPoint is the last CPU reading, for the share since.
type cpuPoint struct {
	at    time.Time
	usage time.Duration
}

// snapshot reads the cgroup figures of sb.
func (s *Service) snapshot(id string, prev *cpuPoint, now time.Time) CgroupSnapshot {
	var out CgroupSnapshot
	st, ok := s.stats(id)
	if !ok {
		return out
	}
	out.CPUUsageUsec = st.CPUUsage.Microseconds()
	out.MemCurrentBytes = st.MemoryBytes
	out.Pids = st.Pids
	oom := st.OOMKills
	out.OOMKill = &oom
	if st.MemoryLimit > 0 {
		lim := st.MemoryLimit
		pct := round(float64(st.MemoryBytes) * 100 / float64(lim))
		out.MemMaxBytes, out.MemUsagePct = &lim, &pct
	}
	if st.PidsLimit > 0 {
		pl := st.PidsLimit
		out.PidsMax = &pl
	}
	if prev != nil {
		if dt := now.Sub(prev.at); dt > 0 && prev.at.Before(now) {
			pct := round(float64(st.CPUUsage-prev.usage) * 100 / float64(dt))
			if pct >= 0 {
				out.CPUUsagePct = &pct
			}
		}
		prev.at, prev.usage = now, st.CPUUsage
	}
	return out
}

func round(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 2, 64), 64)
	return v
}

// disk reads /workspace's usage; only for a running sandbox (statfs would
// start a stopped one).
func disk(ctx context.Context, sb *sandbox.Sandbox) []DiskSnapshot {
	if sb.State() != sandbox.Running {
		return nil
	}
	total, free, err := sb.StatFS(ctx, "/workspace")
	if err != nil || total <= 0 {
		return nil
	}
	used := total - free
	return []DiskSnapshot{{Path: "/workspace", UsedBytes: used, TotalBytes: total, FreeBytes: free,
		UsagePct: round(float64(used) * 100 / float64(total))}}
}

// psArgv lists the sandbox's processes, biggest first; fields are
// separated by spaces, comm is last-but-one free text so it comes last.
var psArgv = []string{"/usr/bin/ps", "-eo", "pid=,ppid=,rss=,pcpu=,nlwp=,etimes=,stat=,user:32=,comm=", "--sort=-rss"}

// processes runs ps inside a running sandbox.
func processes(ctx context.Context, sb *sandbox.Sandbox, top int) []ProcessSnapshot {
	if sb.State() != sandbox.Running || top <= 0 {
		return nil
	}
	e, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: psArgv, Timeout: psTimeout, OutputLimit: 256 << 10, Actor: "system"})
	if err != nil {
		return nil
	}
	r := e.Result()
	if r.Status != sandbox.StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 {
		return nil
	}
	return parsePS(r.Stdout, top)
}

// parsePS reads psArgv's output, skipping the ps process itself.
func parsePS(out string, top int) []ProcessSnapshot {
	var rows []ProcessSnapshot
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		ppid, err2 := strconv.Atoi(f[1])
		rss, err3 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		comm := strings.Join(f[8:], " ")
		if comm == "ps" {
			continue
		}
		p := ProcessSnapshot{PID: pid, PPID: &ppid, RSSBytes: rss * 1024, User: f[7], Comm: comm}
		p.RSSMiB = round(float64(p.RSSBytes) / (1 << 20))
		if v, err := strconv.ParseFloat(f[3], 64); err == nil {
			p.CPUPct = &v
		}
		if v, err := strconv.Atoi(f[4]); err == nil {
			p.Threads = &v
		}
		if v, err := strconv.ParseFloat(f[5], 64); err == nil {
			p.UptimeSec = &v
		}
		st := f[6]
		p.State = &st
		rows = append(rows, p)
		if len(rows) == top {
			break
		}
	}
	return rows
}

// newID returns a prefixed random id.
func newID(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// activity reads the audit records of the sandbox between from and to
// as events (tool calls on it: commands, files, hooks …), at most
// maxEvents, oldest first.
func (s *Service) activity(ctx context.Context, id string, from, to time.Time) []Event {
	if s.audit == nil {
		return nil
	}
	var out []Event
	var after int64
	for page := 0; page < auditPages && len(out) < maxEvents; page++ {
		recs, err := s.audit.Query(ctx, audit.Filter{Since: from, AfterSeq: after})
		if err != nil || len(recs) == 0 {
			break
		}
		for _, r := range recs {
			after = max(after, r.Seq)
			if r.Time.After(to) {
				return out
			}
			sid, _ := r.Detail["sandbox_id"].(string)
			if r.Sandbox != id && sid != id {
				continue
			}
			data := map[string]any{"actor": r.Actor, "verdict": r.Verdict, "seq": r.Seq}
			for _, k := range []string{"exit_code", "status", "risk", "guard", "bytes", "path", "reason", "duration_ms", "error"} {
				if v, ok := r.Detail[k]; ok {
					data[k] = v
				}
			}
			out = append(out, Event{TS: r.Time, Type: "audit." + r.Action, Message: r.Target, Data: data})
			if len(out) == maxEvents {
				break
			}
		}
	}
	return out
}

// report is one exported report, kept compressed.
type report struct {
	info ReportInfo
	gz   []byte
}

// ReportInfo is AIO's ObservationReportInfo (and ObservationExportResult).
type ReportInfo struct {
	ReportID  string    `json:"report_id"`
	SessionID *string   `json:"session_id"`
	Reason    string    `json:"reason"`
	CreatedAt time.Time `json:"created_at"`
	Path      string    `json:"path" doc:"where the report is downloaded: GET this path (reports are kept in server memory, not in the sandbox)"`
	SizeBytes int64     `json:"size_bytes"`
}

// ReportBody is the JSON inside a report's gzip.
type ReportBody struct {
	ReportID  string     `json:"report_id"`
	SandboxID string     `json:"sandbox_id"`
	SessionID string     `json:"session_id"`
	Reason    string     `json:"reason"`
	CreatedAt time.Time  `json:"created_at"`
	Mode      string     `json:"mode"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	Interval  float64    `json:"interval_seconds"`
	Summary   Summary    `json:"summary"`
	Samples   []Sample   `json:"samples"`
	Events    []Event    `json:"events"`
	// SamplesDropped counts samples older than the ones kept.
	SamplesDropped int `json:"samples_dropped"`
}

// Summary are the session's figures at a glance.
type Summary struct {
	Samples        int     `json:"samples"`
	CPUUsageUsec   int64   `json:"cpu_usage_usec" doc:"CPU time the sandbox used during the session"`
	MemPeakBytes   int64   `json:"mem_peak_bytes" doc:"highest memory sampled"`
	MemPeakPct     float64 `json:"mem_peak_pct"`
	OOMKills       int64   `json:"oom_kills" doc:"OOM kills during the session"`
	DiskPeakBytes  int64   `json:"disk_peak_bytes"`
	PidsPeak       int64   `json:"pids_peak"`
	ToolCalls      int     `json:"tool_calls" doc:"audited calls on the sandbox in the window"`
	Commands       int     `json:"commands" doc:"of which ran commands or code"`
	FileChanges    int     `json:"file_changes" doc:"of which changed files"`
	GuardrailAlert int     `json:"guardrail_events"`
}

func encodeReport(body ReportBody) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	enc.SetIndent("", " ")
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// summarize fills the figures from samples and events.
func summarize(samples []Sample, events []Event, cpu0 int64, oom0 int64) Summary {
	var sum Summary
	sum.Samples = len(samples)
	for _, sm := range samples {
		sum.MemPeakBytes = max(sum.MemPeakBytes, sm.Cgroup.MemCurrentBytes)
		if sm.Cgroup.MemUsagePct != nil {
			sum.MemPeakPct = max(sum.MemPeakPct, *sm.Cgroup.MemUsagePct)
		}
		sum.PidsPeak = max(sum.PidsPeak, sm.Cgroup.Pids)
		for _, d := range sm.Disk {
			sum.DiskPeakBytes = max(sum.DiskPeakBytes, d.UsedBytes)
		}
	}
	if n := len(samples); n > 0 {
		last := samples[n-1].Cgroup
		sum.CPUUsageUsec = max(last.CPUUsageUsec-cpu0, 0)
		if last.OOMKill != nil {
			sum.OOMKills = max(*last.OOMKill-oom0, 0)
		}
	}
	for _, e := range events {
		switch {
		case strings.HasPrefix(e.Type, "guardrail."):
			sum.GuardrailAlert++
		case strings.HasPrefix(e.Type, "audit."):
			sum.ToolCalls++
			act := strings.TrimPrefix(e.Type, "audit.")
			if isCommand(act) {
				sum.Commands++
			}
			if isFileChange(act) {
				sum.FileChanges++
			}
		}
	}
	return sum
}

func isCommand(action string) bool {
	for _, p := range []string{"exec.", "shell.", "bash.", "code.", "jupyter.", "nodejs.", "sandbox.hook"} {
		if strings.HasPrefix(action+".", p) || strings.HasPrefix(action, p) {
			return true
		}
	}
	return false
}

func isFileChange(action string) bool {
	switch action {
	case "file.write", "file.replace", "file.str_replace_editor", "file.upload", "file.extract",
		"artifact.write", "skills.register", "skills.delete", "skills.clear":
		return true
	}
	return false
}

// sortEvents orders events by time (stable, for equal times) and keeps
// the newest maxEvents.
func sortEvents(ev []Event) []Event {
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].TS.Before(ev[j].TS) })
	if len(ev) > maxEvents {
		ev = ev[len(ev)-maxEvents:]
	}
	return ev
}

func errNoSession() error {
	return fault.New(fault.NotFound, "no observation session: start one with /v1/sandbox/observe/start")
}
