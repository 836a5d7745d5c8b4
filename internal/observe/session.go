package observe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// session is one observation session of a sandbox.
type session struct {
	id        string
	mode      string
	started   time.Time
	ends      time.Time
	interval  time.Duration
	procs     bool
	disk      bool
	sb        *sandbox.Sandbox
	cancel    context.CancelFunc
	done      chan struct{}
	cpu0, oom int64 // the cgroup counters at the start

	// mu guards the fields below.
	mu      sync.Mutex
	running bool
	stopped time.Time
	why     string // why it ended
	samples []Sample
	dropped int
	events  []Event
	last    time.Time
	cpu     cpuPoint
	prevOOM int64
}

func (se *session) end(why string) {
	se.mu.Lock()
	if se.running {
		se.running, se.stopped, se.why = false, time.Now().UTC(), why
	}
	se.mu.Unlock()
	se.cancel()
	<-se.done
}

func (se *session) isRunning() bool {
	se.mu.Lock()
	defer se.mu.Unlock()
	return se.running
}

// StartArgs is AIO's ObserveStartRequest.
type StartArgs struct {
	dispatch.On
	Mode             string   `json:"mode,omitempty" enum:"guardrail,capture" doc:"capture (default): keep every sample; guardrail: keep the latest and raise events at thresholds"`
	IdempotencyKey   *string  `json:"idempotency_key,omitempty" maxLength:"128" doc:"a retry with the same key answers the same session"`
	DurationSeconds  *int     `json:"duration_seconds,omitempty" doc:"session length in seconds (default and most: 86400)"`
	IntervalSeconds  *float64 `json:"interval_seconds,omitempty" doc:"sampling interval in seconds (1-600, default 5)"`
	IncludeProcesses *bool    `json:"include_processes,omitempty" doc:"sample the processes (ps inside the sandbox); default true in capture mode"`
	IncludeDisk      *bool    `json:"include_disk,omitempty" doc:"sample /workspace usage (default true)"`
}

// Validate checks the ranges.
func (a StartArgs) Validate() error {
	switch {
	case a.Mode != "" && a.Mode != ModeGuardrail && a.Mode != ModeCapture:
		return fault.InvalidField("body.mode", "mode is guardrail or capture")
	case a.IdempotencyKey != nil && len(*a.IdempotencyKey) > 128:
		return fault.InvalidField("body.idempotency_key", "idempotency_key is at most 128 characters")
	case a.DurationSeconds != nil && (*a.DurationSeconds < 1 || time.Duration(*a.DurationSeconds)*time.Second > MaxDuration):
		return fault.InvalidField("body.duration_seconds", fmt.Sprintf("duration_seconds must be between 1 and %d", int(MaxDuration.Seconds())))
	case a.IntervalSeconds != nil && (*a.IntervalSeconds < MinInterval.Seconds() || *a.IntervalSeconds > MaxInterval.Seconds()):
		return fault.InvalidField("body.interval_seconds", fmt.Sprintf("interval_seconds must be between %g and %g", MinInterval.Seconds(), MaxInterval.Seconds()))
	}
	return nil
}

// StartResult is AIO's ObservationStartResult.
type StartResult struct {
	SessionID       string     `json:"session_id"`
	Mode            string     `json:"mode"`
	StartedAt       time.Time  `json:"started_at"`
	EndsAt          *time.Time `json:"ends_at"`
	IntervalSeconds float64    `json:"interval_seconds"`
	RuntimeDir      string     `json:"runtime_dir" doc:"empty: sessions and reports are kept in server memory, not in the sandbox"`
}

// Start begins a session (at most one runs per sandbox).
func (s *Service) Start(ctx context.Context, c auth.Caller, a StartArgs) (StartResult, error) {
	if err := a.Validate(); err != nil {
		return StartResult{}, err
	}
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return StartResult{}, err
	}
	b := s.boxOf(sb.ID())
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stop:
		return StartResult{}, fault.New(fault.Unavailable, "the server is shutting down")
	default:
	}
	if se := b.session; se != nil && se.isRunning() {
		if a.IdempotencyKey != nil && b.idem[*a.IdempotencyKey] == se.id {
			return startResult(se), nil
		}
		return StartResult{}, fault.New(fault.Conflict, "an observation session is running ("+se.id+"); stop it first")
	}
	se := &session{id: newID("obs_"), mode: ModeCapture, interval: DefaultInterval, disk: true, sb: sb, done: make(chan struct{}), running: true}
	if a.Mode != "" {
		se.mode = a.Mode
	}
	se.procs = se.mode == ModeCapture
	if a.IncludeProcesses != nil {
		se.procs = *a.IncludeProcesses
	}
	if a.IncludeDisk != nil {
		se.disk = *a.IncludeDisk
	}
	if a.IntervalSeconds != nil {
		se.interval = time.Duration(*a.IntervalSeconds * float64(time.Second))
	}
	dur := MaxDuration
	if a.DurationSeconds != nil {
		dur = time.Duration(*a.DurationSeconds) * time.Second
	}
	se.started = time.Now().UTC()
	se.ends = se.started.Add(dur)
	if st, ok := s.stats(sb.ID()); ok {
		se.cpu0, se.oom, se.prevOOM = st.CPUUsage.Microseconds(), st.OOMKills, st.OOMKills
		se.cpu = cpuPoint{at: time.Now(), usage: st.CPUUsage}
	}
	// The session outlives the request that started it.
	runCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), se.ends)
	se.cancel = cancel
	b.session = se
	if a.IdempotencyKey != nil {
		b.idem[*a.IdempotencyKey] = se.id
	}
	s.wg.Add(1)
	go s.sample(runCtx, b, se) //nolint:gosec // G118: the session outlives its request; it ends on stop, its deadline, the sandbox's deletion or Close
	return startResult(se), nil
}

func startResult(se *session) StartResult {
	ends := se.ends
	return StartResult{SessionID: se.id, Mode: se.mode, StartedAt: se.started, EndsAt: &ends,
		IntervalSeconds: se.interval.Seconds(), RuntimeDir: ""}
}

// sample is a session's loop: one sample at once, then one per interval,
// until stopped, the duration ends, or the server closes. A session that
// runs out its duration exports its report (reason "duration").
func (s *Service) sample(ctx context.Context, b *box, se *session) {
	defer s.wg.Done()
	defer close(se.done)
	t := time.NewTicker(se.interval)
	defer t.Stop()
	s.take(ctx, se)
	for {
		select {
		case <-ctx.Done():
			se.mu.Lock()
			timedOut := se.running
			if se.running {
				se.running, se.stopped, se.why = false, time.Now().UTC(), "duration"
			}
			se.mu.Unlock()
			if timedOut {
				_, _ = s.export(context.Background(), b, se, "duration")
			}
			return
		case <-s.stop:
			return
		case <-t.C:
			s.take(ctx, se)
		}
	}
}

// take records one sample and the guardrail events it raises.
func (s *Service) take(ctx context.Context, se *session) {
	now := time.Now().UTC()
	se.mu.Lock()
	cpu := se.cpu
	se.mu.Unlock()
	sm := Sample{At: now, State: string(se.sb.State())}
	sm.Cgroup = s.snapshot(se.sb.ID(), &cpu, time.Now())
	if se.disk {
		sm.Disk = disk(ctx, se.sb)
	}
	if se.procs {
		sm.Processes = processes(ctx, se.sb, 10)
	}
	se.mu.Lock()
	defer se.mu.Unlock()
	se.cpu = cpu
	if !se.running {
		return
	}
	se.last = now
	keep := maxSamples
	if se.mode == ModeGuardrail {
		keep = guardrailSamples
	}
	se.samples = append(se.samples, sm)
	if len(se.samples) > keep {
		n := len(se.samples) - keep
		se.samples = append(se.samples[:0], se.samples[n:]...)
		se.dropped += n
	}
	add := func(typ, msg string, data map[string]any) {
		if len(se.events) < maxEvents {
			se.events = append(se.events, Event{TS: now, Type: "guardrail." + typ, Message: msg, Data: data})
		}
	}
	cg := sm.Cgroup
	if cg.MemUsagePct != nil && *cg.MemUsagePct >= threshold {
		add("memory_high", fmt.Sprintf("memory at %.1f%% of the sandbox's limit", *cg.MemUsagePct), map[string]any{"mem_current_bytes": cg.MemCurrentBytes})
	}
	if cg.OOMKill != nil && *cg.OOMKill > se.prevOOM {
		add("oom_kill", fmt.Sprintf("%d process(es) killed for memory", *cg.OOMKill-se.prevOOM), map[string]any{"oom_kill": *cg.OOMKill})
		se.prevOOM = *cg.OOMKill
	}
	if cg.PidsMax != nil && float64(cg.Pids) >= float64(*cg.PidsMax)*threshold/100 {
		add("pids_high", fmt.Sprintf("%d processes of at most %d", cg.Pids, *cg.PidsMax), nil)
	}
	for _, d := range sm.Disk {
		if d.UsagePct >= threshold {
			add("disk_high", fmt.Sprintf("%s at %.1f%% of its quota", d.Path, d.UsagePct), map[string]any{"used_bytes": d.UsedBytes})
		}
	}
	if n := len(se.samples); n >= 2 && se.samples[n-2].State == string(sandbox.Running) && sm.State != string(sandbox.Running) {
		add("sandbox_"+sm.State, "the sandbox is now "+sm.State, nil)
	}
}

// StopArgs is AIO's ObserveStopRequest.
type StopArgs struct {
	dispatch.On
	SessionID *string `json:"session_id,omitempty" doc:"the running session (default: the one running)"`
}

// StopResult is AIO's ObservationStopResult.
type StopResult struct {
	SessionID   string `json:"session_id"`
	Stopped     bool   `json:"stopped"`
	ReportReady bool   `json:"report_ready" doc:"a report of the session was exported (reason stop)"`
	ReportID    string `json:"report_id,omitempty" doc:"sandhold's addition: the report's id"`
}

// Stop ends the running session and exports its report.
func (s *Service) Stop(ctx context.Context, c auth.Caller, a StopArgs) (StopResult, error) {
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return StopResult{}, err
	}
	b := s.boxOf(sb.ID())
	s.mu.Lock()
	se := b.session
	s.mu.Unlock()
	if se == nil || (a.SessionID != nil && *a.SessionID != se.id) {
		return StopResult{}, errNoSession()
	}
	if !se.isRunning() {
		return StopResult{SessionID: se.id, Stopped: false}, nil
	}
	se.end("stop")
	info, err := s.export(ctx, b, se, "stop")
	if err != nil {
		return StopResult{SessionID: se.id, Stopped: true}, err
	}
	return StopResult{SessionID: se.id, Stopped: true, ReportReady: true, ReportID: info.ReportID}, nil
}

// ExportArgs is AIO's ObserveExportRequest.
type ExportArgs struct {
	dispatch.On
	IdempotencyKey *string `json:"idempotency_key,omitempty" maxLength:"128" doc:"a retry with the same key answers the same report"`
	SessionID      *string `json:"session_id,omitempty" doc:"the session to export (default: the running or last one)"`
	Reason         string  `json:"reason,omitempty" maxLength:"256" doc:"why the report is made (default manual)"`
}

// Validate checks the lengths.
func (a ExportArgs) Validate() error {
	if a.IdempotencyKey != nil && len(*a.IdempotencyKey) > 128 {
		return fault.InvalidField("body.idempotency_key", "idempotency_key is at most 128 characters")
	}
	if len(a.Reason) > 256 {
		return fault.InvalidField("body.reason", "reason is at most 256 characters")
	}
	return nil
}

// Export makes a report of the running or last session (so far).
func (s *Service) Export(ctx context.Context, c auth.Caller, a ExportArgs) (ReportInfo, error) {
	if err := a.Validate(); err != nil {
		return ReportInfo{}, err
	}
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return ReportInfo{}, err
	}
	b := s.boxOf(sb.ID())
	s.mu.Lock()
	se := b.session
	if a.IdempotencyKey != nil {
		if id, ok := b.idem["export:"+*a.IdempotencyKey]; ok {
			for _, r := range b.reports {
				if r.info.ReportID == id {
					s.mu.Unlock()
					return r.info, nil
				}
			}
		}
	}
	s.mu.Unlock()
	if se == nil || (a.SessionID != nil && *a.SessionID != se.id) {
		return ReportInfo{}, errNoSession()
	}
	reason := a.Reason
	if reason == "" {
		reason = "manual"
	}
	info, err := s.export(ctx, b, se, reason)
	if err == nil && a.IdempotencyKey != nil {
		s.mu.Lock()
		b.idem["export:"+*a.IdempotencyKey] = info.ReportID
		s.mu.Unlock()
	}
	return info, err
}

// export builds and keeps a report of se.
func (s *Service) export(ctx context.Context, b *box, se *session, reason string) (ReportInfo, error) {
	se.mu.Lock()
	samples := append([]Sample(nil), se.samples...)
	events := append([]Event(nil), se.events...)
	body := ReportBody{SandboxID: b.id, SessionID: se.id, Mode: se.mode, StartedAt: se.started,
		Interval: se.interval.Seconds(), SamplesDropped: se.dropped}
	to := time.Now().UTC()
	if !se.running {
		stopped := se.stopped
		body.EndedAt, to = &stopped, stopped
	}
	se.mu.Unlock()
	events = sortEvents(append(events, s.activity(ctx, b.id, se.started, to)...))
	body.ReportID, body.Reason, body.CreatedAt = newID("rep_"), reason, time.Now().UTC()
	body.Samples, body.Events = samples, events
	if body.Samples == nil {
		body.Samples = []Sample{}
	}
	if body.Events == nil {
		body.Events = []Event{}
	}
	body.Summary = summarize(samples, events, se.cpu0, se.oom)
	gz, err := encodeReport(body)
	if err != nil {
		return ReportInfo{}, fault.Wrap(fault.Internal, err, "could not encode the report")
	}
	sid := se.id
	r := &report{gz: gz, info: ReportInfo{ReportID: body.ReportID, SessionID: &sid, Reason: reason,
		CreatedAt: body.CreatedAt, Path: "/v1/sandbox/observe/reports/" + body.ReportID, SizeBytes: int64(len(gz))}}
	s.mu.Lock()
	b.reports = append(b.reports, r)
	if n := len(b.reports) - maxReports; n > 0 {
		b.reports = append(b.reports[:0], b.reports[n:]...)
	}
	s.mu.Unlock()
	return r.info, nil
}

// SandboxArgs names a sandbox.
type SandboxArgs struct {
	dispatch.On
}

// Status is AIO's ObservationStatus.
type Status struct {
	Mode            string     `json:"mode"`
	Running         bool       `json:"running"`
	SessionID       *string    `json:"session_id"`
	StartedAt       *time.Time `json:"started_at"`
	EndsAt          *time.Time `json:"ends_at"`
	IntervalSeconds *float64   `json:"interval_seconds"`
	LastSampleAt    *time.Time `json:"last_sample_at"`
	RuntimeDir      *string    `json:"runtime_dir"`
	ReportCount     int        `json:"report_count"`
}

// Status reports the sandbox's session, if one runs, and its reports.
func (s *Service) Status(ctx context.Context, c auth.Caller, a SandboxArgs) (Status, error) {
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return Status{}, err
	}
	b := s.boxOf(sb.ID())
	s.mu.Lock()
	se, n := b.session, len(b.reports)
	s.mu.Unlock()
	st := Status{Mode: ModeOff, ReportCount: n}
	if se == nil {
		return st, nil
	}
	se.mu.Lock()
	defer se.mu.Unlock()
	if !se.running {
		return st, nil
	}
	id, started, ends, iv := se.id, se.started, se.ends, se.interval.Seconds()
	st.Mode, st.Running, st.SessionID, st.StartedAt, st.EndsAt, st.IntervalSeconds = se.mode, true, &id, &started, &ends, &iv
	if !se.last.IsZero() {
		last := se.last
		st.LastSampleAt = &last
	}
	return st, nil
}

// LiveArgs is observe/live's query.
type LiveArgs struct {
	dispatch.On
	TopRows *int `json:"top_rows,omitempty" doc:"processes listed, biggest first (default 10, at most 100; 0: none)"`
}

// Validate checks top_rows.
func (a LiveArgs) Validate() error {
	if a.TopRows != nil && (*a.TopRows < 0 || *a.TopRows > maxTopRows) {
		return fault.InvalidField("query.top_rows", fmt.Sprintf("top_rows must be between 0 and %d", maxTopRows))
	}
	return nil
}

// Live is AIO's ObservationLiveSnapshot.
type Live struct {
	CapturedAt   time.Time         `json:"captured_at"`
	Mode         string            `json:"mode"`
	Cgroup       CgroupSnapshot    `json:"cgroup"`
	Disk         []DiskSnapshot    `json:"disk"`
	TopProcesses []ProcessSnapshot `json:"top_processes"`
	RecentEvents []Event           `json:"recent_events"`
}

// recentWindow is how far back a live snapshot's events reach without a
// session.
const recentWindow = 15 * time.Minute

// Live takes a snapshot now (it needs no session).
func (s *Service) Live(ctx context.Context, c auth.Caller, a LiveArgs) (Live, error) {
	if err := a.Validate(); err != nil {
		return Live{}, err
	}
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return Live{}, err
	}
	top := 10
	if a.TopRows != nil {
		top = *a.TopRows
	}
	b := s.boxOf(sb.ID())
	s.mu.Lock()
	se := b.session
	s.mu.Unlock()
	out := Live{CapturedAt: time.Now().UTC(), Mode: ModeOff, Disk: []DiskSnapshot{}, TopProcesses: []ProcessSnapshot{}, RecentEvents: []Event{}}
	from := time.Now().Add(-recentWindow)
	var prev *cpuPoint
	if se != nil && se.isRunning() {
		se.mu.Lock()
		out.Mode, from = se.mode, se.started
		out.RecentEvents = append(out.RecentEvents, se.events...)
		p := se.cpu
		prev = &p
		se.mu.Unlock()
	}
	out.Cgroup = s.snapshot(sb.ID(), prev, time.Now())
	if d := disk(ctx, sb); d != nil {
		out.Disk = d
	}
	if p := processes(ctx, sb, top); p != nil {
		out.TopProcesses = p
	}
	ev := sortEvents(append(out.RecentEvents, s.activity(ctx, sb.ID(), from, time.Now())...))
	if len(ev) > 20 {
		ev = ev[len(ev)-20:]
	}
	out.RecentEvents = ev
	return out, nil
}

// Reports lists the sandbox's reports, oldest first.
func (s *Service) Reports(ctx context.Context, c auth.Caller, a SandboxArgs) ([]ReportInfo, error) {
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	b := s.boxOf(sb.ID())
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ReportInfo, 0, len(b.reports))
	for _, r := range b.reports {
		out = append(out, r.info)
	}
	return out, nil
}

// ReportArgs names a report.
type ReportArgs struct {
	dispatch.On
	ReportID string `json:"report_id" required:"true" maxLength:"64" doc:"the report's id"`
}

// Report is a downloaded report: the gzip-compressed JSON (base64 in a
// JSON answer; the HTTP route serves it as application/gzip).
type Report struct {
	Info ReportInfo `json:"info"`
	Gzip []byte     `json:"gzip" doc:"the report: gzip-compressed JSON (ReportBody)"`
}

// reportOf resolves the sandbox (outside the lock) and finds the report.
// It returns with s.mu held on success.
func (s *Service) reportOf(ctx context.Context, c auth.Caller, a ReportArgs) (*box, int, error) {
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return nil, 0, err
	}
	b := s.boxOf(sb.ID())
	s.mu.Lock()
	for i, r := range b.reports {
		if r.info.ReportID == a.ReportID {
			return b, i, nil
		}
	}
	s.mu.Unlock()
	return nil, 0, fault.New(fault.NotFound, "no report "+a.ReportID)
}

// Download returns a report.
func (s *Service) Download(ctx context.Context, c auth.Caller, a ReportArgs) (Report, error) {
	b, i, err := s.reportOf(ctx, c, a)
	if err != nil {
		return Report{}, err
	}
	defer s.mu.Unlock()
	r := b.reports[i]
	return Report{Info: r.info, Gzip: r.gz}, nil
}

// DeleteReport removes a report and answers its info.
func (s *Service) DeleteReport(ctx context.Context, c auth.Caller, a ReportArgs) (ReportInfo, error) {
	b, i, err := s.reportOf(ctx, c, a)
	if err != nil {
		return ReportInfo{}, err
	}
	defer s.mu.Unlock()
	info := b.reports[i].info
	b.reports = append(b.reports[:i], b.reports[i+1:]...)
	return info, nil
}
