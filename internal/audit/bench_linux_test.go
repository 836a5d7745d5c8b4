package audit

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// BenchmarkAppend measures one lone audit append (the exec hot path): a
// durable write transaction in WAL mode plus the head file's move. Besides
// the wall time it reports the process's CPU time per append (user+system,
// every thread, from getrusage), which a loaded machine distorts little.
func BenchmarkAppend(b *testing.B) {
	dir := b.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	l := New(st, dir)
	e := Entry{Actor: "key_a", Role: "agent", ClientAddr: "127.0.0.1", Action: "exec.run", Target: "echo hi", Sandbox: "sb_1", Verdict: Allow,
		Detail: map[string]any{"cmd": "echo hi", "exit": 0}}
	b.ResetTimer()
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := l.Append(context.Background(), e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the user+system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
