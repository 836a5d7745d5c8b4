package spareinit

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// Bind makes spare si's group the group of sandbox id: renamed to id (no
// task moves), then — after between (a test's way to fail there; nil:
// nothing) — the sandbox's limits written to it and to its user group,
// before anything of the sandbox runs. On failure the spare is killed
// and its group removed: the start clones a fresh init (Launch). It runs
// beside the start and changes only si, which the start's Launch reads
// once told the bind's outcome.
func (p *Spares) Bind(si *Init, id string, limits, userLimits cgroup.Limits, between func() error) (group, user cgroup.Group, err error) {
	fail := func(err error) (cgroup.Group, cgroup.Group, error) {
		si.Kill()
		return nil, nil, err
	}
	cg := p.cfg.CG
	group, err = cg.Rename(si.Group.Name(), id)
	if errors.Is(err, os.ErrExist) {
		// A group of this name left over (as a sandbox's start finds
		// one).
		if old, oerr := cg.Open(id); oerr == nil {
			_ = old.Destroy()
		}
		group, err = cg.Rename(si.Group.Name(), id)
	}
	if err != nil {
		return fail(err) // si.Group is still under the spare's name
	}
	si.Group = group // from here on the sandbox's name
	if between != nil {
		if err = between(); err != nil {
			return fail(err)
		}
	}
	if user, err = group.OpenSub(p.cfg.UserGroup); err == nil {
		if err = group.SetLimits(limits); err == nil {
			err = user.SetLimits(userLimits)
		}
	}
	if err != nil {
		return fail(err)
	}
	si.Group, si.Placed = nil, true
	return group, user, nil
}

// Launch starts sandbox id's init for spec: from spare si, else (si nil,
// a spare whose group could not be bound (bound false; it is gone then),
// or one that cannot be bound as this init would be cloned) a fresh one.
// A spare whose group became the sandbox's (Placed) is in it already and
// is not placed again; a fresh init that replaces it is.
func Launch(ctx context.Context, si *Init, spec agent.LaunchSpec, bound bool, id string, log *slog.Logger) (*agent.Instance, error) {
	if si == nil || !bound {
		return agent.Launch(ctx, spec)
	}
	bind := spec
	if si.Placed {
		bind.Place = nil
	}
	inst, err := si.Spare.Bind(ctx, bind)
	if errors.Is(err, agent.ErrSpareUnusable) {
		log.Warn("spare init not used", "id", id, "err", err)
		return agent.Launch(ctx, spec)
	}
	return inst, err
}
