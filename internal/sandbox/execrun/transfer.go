package execrun

import (
	"context"
	"io"
	"os"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/archive"
	"github.com/sandhold/sandhold/internal/sandbox/execgroup"
)

// Extract unpacks src (a regular file the caller owns; usually one the init
// opened inside the sandbox) into the directory dest, by the init, inside
// the sandbox; a name deny refuses is refused. Refusals are
// *archive.Error; nothing is left behind then.
func (t *Table) Extract(ctx context.Context, dest string, format archive.Format, lim archive.Limits, deny agent.Deny, src *os.File) (archive.Result, error) {
	inst, err := t.host.Ensure(ctx)
	if err != nil {
		return archive.Result{}, err
	}
	t.host.Touch()
	// The extractor runs in an execution group of its own, as a command:
	// it counts against the sandbox's pids limit with the commands, not
	// against the init's reserve.
	slot, home, err := t.Acquire()
	if err != nil {
		return archive.Result{}, err
	}
	defer t.endSlot(slot)
	return inst.ExtractIn(ctx, agent.TransferReq{Path: dest, Format: format, Limits: lim, Deny: deny}, src, slot.Attach, home)
}

// endSlot gives back the execution group of an extractor that ended:
// whatever it left running is killed before the group serves again.
func (t *Table) endSlot(slot *execgroup.Group) {
	t.killLeftovers(slot)
	t.Release(slot)
}

// Pack streams the tree under dir as an archive, written by the init into
// a pipe (archive.Stream); a tree holding a name deny refuses is
// refused.
func (t *Table) Pack(ctx context.Context, dir string, format archive.Format, lim archive.Limits, deny agent.Deny) (io.ReadCloser, error) {
	inst, err := t.host.Ensure(ctx)
	if err != nil {
		return nil, err
	}
	t.host.Touch()
	slot, home, err := t.Acquire() // as Extract's
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Release(slot)
		return nil, err
	}
	p, finish := archive.NewStream(r)
	go func() {
		res, err := inst.PackIn(ctx, agent.TransferReq{Path: dir, Format: format, Limits: lim, Deny: deny}, w, slot.Attach, home)
		_ = w.Close()
		t.endSlot(slot)
		finish(res, err)
	}()
	return p, nil
}
