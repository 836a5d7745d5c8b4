package daemon

import (
	"context"

	"github.com/sandhold/sandhold/internal/api/aio"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/workspace"
)

// startFiles wires the file API: the workspace service (its caps from
// SANDBOX_MAX_FILE_SIZE and SANDBOX_MAX_FILES_PER_REQUEST), its dispatcher
// tools (file.*) and the AIO file routes.
func (d *Daemon) startFiles(_ context.Context) error {
	cfg := d.cfg
	svc := workspace.New(workspace.Config{
		MaxFileSize:        cfg.MaxFileSize.Bytes(),
		MaxFilesPerRequest: cfg.MaxFilesPerRequest,
		AllowSudo:          cfg.EnableSudo,
		Policy:             workspace.DefaultPolicy(),
		Resolve: func(ctx context.Context, c auth.Caller, id string) (workspace.FS, error) {
			s, err := d.sandboxes.Resolve(ctx, c, id)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
	})
	d.closers = append(d.closers, func() error { svc.Close(); return nil })
	d.onRevoke(svc.RevokeWatches)
	d.register(workspace.Tools(svc))
	aio.FileRoutes(d.api, d.dispatch)
	return nil
}
