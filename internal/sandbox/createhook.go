package sandbox

import "context"

// CreateHook lets a capability take part in creating the sandboxes whose
// spec asks for it (a browser: "browser": true). One hook (the browser
// runtime's); see internal/browser.
type CreateHook struct {
	// Prepare runs first, before the spec's zero limits take the
	// server's defaults and every limit is checked against the maxima
	// (def, max): it may raise zero limits to what the capability needs
	// (never above max) or refuse the spec.
	Prepare func(spec *Spec, def, max Limits) error
	// After runs once the sandbox is created and listed; an error
	// deletes the sandbox again and fails the create with that error.
	After func(ctx context.Context, c Caller, s *Sandbox) error
}

// OnCreate registers h.
func (m *Manager) OnCreate(h CreateHook) {
	m.obs.mu.Lock()
	m.obs.create = h
	m.obs.mu.Unlock()
}

func (m *Manager) createHook() CreateHook {
	m.obs.mu.Lock()
	defer m.obs.mu.Unlock()
	return m.obs.create
}
