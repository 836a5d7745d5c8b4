package daemon

import (
	"context"

	"github.com/sandhold/sandhold/internal/convert"
	"github.com/sandhold/sandhold/internal/skills"
	"github.com/sandhold/sandhold/internal/workspace"
)

// startAIOCaps wires the AIO namespaces that are capabilities of their
// own: util/convert_to_markdown (internal/convert), skills
// (internal/skills).
func (d *Daemon) startAIOCaps(_ context.Context) error {
	pol := workspace.DefaultPolicy()
	convert.New(d.sandboxes.Resolve, pol).Register(d.dispatch)
	skills.New(d.sandboxes.Resolve, pol).RegisterTools(d.dispatch)
	return nil
}
