package daemon

import "github.com/sandhold/sandhold/internal/dispatch"

// register puts a capability's tools (its package's Tools) into the
// dispatcher. A name registered twice is a wiring bug: it panics at start,
// before anything is served.
func (d *Daemon) register(tools []dispatch.Tool) {
	for _, t := range tools {
		d.dispatch.MustRegister(t)
	}
}
