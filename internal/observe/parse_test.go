package observe

import (
	"testing"
	"time"
)

func TestParsePS(t *testing.T) {
	out := "    1     0  9000  0.0  12      40 Ss   sandbox      sandhold-init\n" +
		"   17     1 65536 12.5   1       3 R    sandbox      python3\n" +
		"   18     1   100  0.0   1       0 R    sandbox      ps\n" +
		"garbage line\n" +
		"   19    17   200  0.1   2       1 S    sandbox      my prog\n"
	rows := parsePS(out, 10)
	if len(rows) != 3 {
		t.Fatalf("rows %+v", rows)
	}
	if r := rows[1]; r.PID != 17 || *r.PPID != 1 || r.RSSBytes != 65536*1024 || r.RSSMiB != 64 || *r.CPUPct != 12.5 || *r.Threads != 1 || *r.UptimeSec != 3 || *r.State != "R" || r.Comm != "python3" {
		t.Errorf("row %+v", r)
	}
	if rows[2].Comm != "my prog" {
		t.Errorf("comm with a space: %q", rows[2].Comm)
	}
	if got := parsePS(out, 1); len(got) != 1 {
		t.Errorf("top 1: %d rows", len(got))
	}
}

func TestSummarize(t *testing.T) {
	pct := func(f float64) *float64 { return &f }
	i64 := func(v int64) *int64 { return &v }
	samples := []Sample{
		{Cgroup: CgroupSnapshot{CPUUsageUsec: 1000, MemCurrentBytes: 10, MemUsagePct: pct(1), OOMKill: i64(2), Pids: 3}, Disk: []DiskSnapshot{{UsedBytes: 5}}},
		{Cgroup: CgroupSnapshot{CPUUsageUsec: 4000, MemCurrentBytes: 50, MemUsagePct: pct(5), OOMKill: i64(3), Pids: 1}, Disk: []DiskSnapshot{{UsedBytes: 7}}},
	}
	events := []Event{
		{TS: time.Unix(1, 0), Type: "audit.exec.run"},
		{TS: time.Unix(2, 0), Type: "audit.file.write"},
		{TS: time.Unix(3, 0), Type: "audit.file.read"},
		{TS: time.Unix(4, 0), Type: "guardrail.oom_kill"},
	}
	s := summarize(samples, events, 500, 2)
	want := Summary{Samples: 2, CPUUsageUsec: 3500, MemPeakBytes: 50, MemPeakPct: 5, OOMKills: 1, DiskPeakBytes: 7, PidsPeak: 3,
		ToolCalls: 3, Commands: 1, FileChanges: 1, GuardrailAlert: 1}
	if s != want {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
}

func TestSortEventsKeepsTheNewest(t *testing.T) {
	var ev []Event
	for i := range maxEvents + 5 {
		ev = append(ev, Event{TS: time.Unix(int64(maxEvents+5-i), 0)})
	}
	got := sortEvents(ev)
	if len(got) != maxEvents || got[0].TS.Unix() != 6 || got[len(got)-1].TS.Unix() != int64(maxEvents+5) {
		t.Fatalf("len %d first %v last %v", len(got), got[0].TS.Unix(), got[len(got)-1].TS.Unix())
	}
}
