package api

import (
	"slices"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/dispatch/audittools"
	"github.com/sandhold/sandhold/internal/dispatch/authtools"
)

// useFoundation makes s call d, with the key, ticket and audit tools
// registered in d as the daemon wires them.
func useFoundation(s *Server, d *dispatch.Dispatcher) {
	s.UseDispatcher(d)
	for _, t := range slices.Concat(authtools.Tools(s.auth), audittools.Tools(s.audit)) {
		d.MustRegister(t)
	}
}
