package sandbox

import (
	"context"
	"time"

	"github.com/sandhold/sandhold/internal/sandbox/warmpool"
	"github.com/sandhold/sandhold/internal/template"
)

// The warm pools (internal/sandbox/warmpool) keep pre-built sandboxes so
// that creating one is a hand-over, not a 20 ms init start. Claiming one
// applies the owner's limits and writes its record. Only specs a pool can
// serve take from it (network none, the default disk); others are built
// cold. This file makes and throws away the pools' sandboxes and moves
// their quotas between the pools' count and the manager's
// (diskbudget.Ledger).

// poolRetry is the pause after a failed refill, so a broken host does not
// spin launching inits.
const poolRetry = 5 * time.Second

// newPool starts a pool of size sandboxes of template name ("" the
// host's).
func newPool(m *Manager, size int, name string) *warmpool.Pool[*Sandbox] {
	return warmpool.New(warmpool.Config[*Sandbox]{
		Size: size, Name: name,
		Resolve: func() (string, error) { return warmpool.TemplateRef(m.cfg.Templates, name) },
		Make:    m.makePooled,
		Unpool: func(s *Sandbox, pending bool) func() {
			return m.disk.OutOfPool(s.diskBytes(), pending)
		},
		Alive:    func(s *Sandbox) bool { return s.State() == Running },
		Discard:  func(s *Sandbox) { s.shutdown(); m.discard(s) },
		Refilled: func(err error) { refillHook(err) },
		Retry:    poolRetry, Log: m.log, Stop: m.stop,
	})
}

// makePooled makes a pool sandbox of template ref, its quota reserved:
// keep moves the reservation to the pool's count (diskbudget.Ledger), drop
// releases it.
func (m *Manager) makePooled(ref string) (s *Sandbox, keep, drop func(), err error) {
	reserved := m.cfg.Default.DiskBytes
	release, err := m.reserveDisk(reserved)
	if err != nil {
		return nil, nil, nil, err
	}
	rec := Record{ID: newID()}
	rec.Spec.Template = ref
	s, err = m.cold(context.Background(), rec)
	if err == nil {
		err = warmUp(s)
	}
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	held := int64(0) // what reserveDisk put in pending
	if m.cfg.DiskBudget > 0 && reserved > 0 {
		held = reserved
	}
	return s, func() { m.disk.IntoPool(held, s.diskBytes()) }, release, nil
}

// takePooled hands out a ready sandbox of the pool that serves spec, and
// the release of its quota, or nil. Its quota moves from the pool's count
// to pending in the same step (diskbudget.Ledger); the caller calls
// release once the sandbox is listed, or thrown away.
func (m *Manager) takePooled(spec Spec) (*Sandbox, func()) {
	if spec.Network.Mode != NetworkNone || !m.poolDisk(spec) {
		return nil, nil
	}
	name, _ := template.SplitRecorded(spec.Template)
	for _, p := range m.pools {
		moved := p.Name() != "" && template.PolicyName(name) == template.PolicyName(p.Name())
		if s, release, ok := p.Take(spec.Template, moved); ok {
			wakeInit(s)
			return s, release
		}
	}
	return nil, nil
}

// refillHook sees the end of every refill attempt (nil: a sandbox was
// added): a test's window into the race of a refill and a take.
var refillHook = func(error) {}

// wakeInit pings a pool sandbox's init as it is handed out, beside the
// rest of the create: an init idle for its quiet period sleeps in its
// keeper (internal/agent, sleep_linux.go), and the wake (a Go runtime
// start, ≈17 ms) should not fall on the owner's first command.
func wakeInit(s *Sandbox) {
	s.mu.Lock()
	inst := s.inst
	s.mu.Unlock()
	if inst == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = inst.Ping(ctx) // a dead init is the sandbox's own restart's business
	}()
}

// warmUp runs one command in a fresh pool sandbox, so its init has paged
// in the spawn path and an execution group is ready: the owner's first
// command then costs what every later one does.
func warmUp(s *Sandbox) error {
	_, err := s.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/true"}, Timeout: 10 * time.Second})
	if err != nil {
		s.shutdown()
		s.m.discard(s)
		return err
	}
	s.execs.Forget()
	return nil
}

// PoolStatus is the warm pool's size and how many sandboxes wait in it,
// and the spare inits cold creates bind (spares.go).
type PoolStatus struct {
	Size   int         `json:"size"`
	Ready  int         `json:"ready"`
	Spares SpareStatus `json:"spares"`
}
