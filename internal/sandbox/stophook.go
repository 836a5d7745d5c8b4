package sandbox

import "context"

// BeforeStop registers fn, called before the manager stops a sandbox's
// init on request or on its own: Delete (the API, TTL expiry) with reason
// "delete", an idle stop with "idle". The sandbox may not be running (fn
// checks State). fn runs while the init still runs, so it can execute in
// the sandbox; it must bound its own time. Every registered fn runs, in
// the order registered (the sandbox's shutdown hooks first, then what
// forgets the sandbox's state).
func (m *Manager) BeforeStop(fn func(ctx context.Context, s *Sandbox, reason string)) {
	m.obs.mu.Lock()
	m.obs.stop = append(m.obs.stop, fn)
	m.obs.mu.Unlock()
}

func (m *Manager) beforeStop(s *Sandbox, reason string) {
	m.obs.mu.Lock()
	fns := m.obs.stop
	m.obs.mu.Unlock()
	for _, fn := range fns {
		fn(context.Background(), s, reason)
	}
}
