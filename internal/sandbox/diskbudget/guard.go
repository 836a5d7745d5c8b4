// Package diskbudget is the mechanism of the sandboxes' disk budget: the
// promise cap of the workspace quotas and the guard that stops the
// images' growth once what they really hold reaches the budget or the
// host's free space falls under its floor (the manager in internal/sandbox
// decides which sandboxes it applies to).
package diskbudget

import (
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/sandhold/sandhold/internal/fault"
)

// The disk guard is what makes an over-committed disk budget safe (thin
// provisioning's low-water mark). Workspace images are sparse: a fresh 5 GB
// workspace takes about 110 KiB of the host's disk, a Python venv 25 MB,
// and deleted files are punched out of the image again (online discard).
// So the quotas may promise SANDBOX_DISK_OVERCOMMIT times the budget
// (PromiseCap), and the guard keeps what the images really hold within it:
// every Every it reads the blocks the images hold and the data dir's free
// space, and growth stops when the images reach the budget or the free
// space falls under the floor kept for the store, the audit log and the
// host (sandbox.Config.DiskFloor):
//
//   - every mounted workspace file system is clamped where it stands: its
//     ext4 reserved_clusters (a per-mount count nobody, root included, may
//     allocate into) is set to its free blocks, so a write that needs a new
//     block gets ENOSPC from the kernel while deleting, truncating and
//     rewriting in place still work (ClampVolume);
//   - creates are refused (409) with a message saying what to free
//     (Guard.Refusal).
//
// Growth resumes once both figures are back a margin (ResumeGap) inside
// their bounds: the clamps are lifted and creates admitted again. Between
// two readings the images can grow past the budget by what sandboxes write
// in Every; that overshoot lands in the floor, not on a full disk.

// Periods and margins of the guard with their reasons.
const (
	// Every is how often the guard reads the disk: a stat per image and
	// one statfs, cheap even for thousands of sandboxes.
	Every = 2 * time.Second
	// MaxResumeGap bounds the hysteresis: growth resumes this far (or a
	// tenth of the bound, if smaller) inside the budget and above the
	// floor, so a sandbox that deletes a few files does not flip it back
	// and forth.
	MaxResumeGap = 256 << 20
)

// Reading is one look at the host's disk.
type Reading struct {
	// Images are the bytes the workspace images hold on the host (their
	// allocated blocks, not their sizes).
	Images int64
	// Free is what the data dir's file system has free for the server.
	Free int64
}

// Guard is the guard's state; its zero value lets growth go on.
type Guard struct {
	// check serialises readings and the clamps they lead to.
	check sync.Mutex

	mu sync.Mutex
	// stopped says why growth is stopped; "" while there is room.
	stopped string
	last    Reading
}

// ResumeGap is the hysteresis for a bound v.
func ResumeGap(v int64) int64 { return min(MaxResumeGap, v/10) }

// Verdict says why growth must stop after reading r ("" when it need
// not), given the budget and the floor (0: none) and whether it is stopped
// now.
func Verdict(r Reading, budget, floor int64, stopped bool) string {
	switch {
	case budget > 0 && r.Images >= budget:
		return fmt.Sprintf("the workspaces hold %s on the host, the whole disk budget of %s", IBytes(r.Images), IBytes(budget))
	case floor > 0 && r.Free < floor:
		return fmt.Sprintf("the server's disk has %s free, under the %s kept for the server itself", IBytes(r.Free), IBytes(floor))
	case !stopped:
		return ""
	case budget > 0 && r.Images > budget-ResumeGap(budget):
		return fmt.Sprintf("the workspaces hold %s on the host, within %s of the disk budget of %s", IBytes(r.Images), IBytes(ResumeGap(budget)), IBytes(budget))
	case floor > 0 && r.Free < floor+ResumeGap(floor):
		return fmt.Sprintf("the server's disk has %s free, within %s of the %s kept for the server itself", IBytes(r.Free), IBytes(ResumeGap(floor)), IBytes(floor))
	}
	return ""
}

// IBytes is n in binary units (KiB, MiB, …), as the refusals say sizes.
func IBytes(n int64) string { return humanize.IBytes(uint64(max(n, 0))) } // #nosec G115 -- not negative

// PromiseCap is what the quotas may promise together: the budget times
// the over-commit ratio (at least 1), saturating.
func PromiseCap(budget int64, ratio int) int64 {
	r := int64(max(ratio, 1))
	if budget > math.MaxInt64/r {
		return math.MaxInt64
	}
	return budget * r
}

// Refusal is the 409 of a create while growth is stopped; nil while there
// is room.
func (g *Guard) Refusal() error {
	g.mu.Lock()
	why := g.stopped
	g.mu.Unlock()
	if why == "" {
		return nil
	}
	return &fault.Error{Kind: fault.Conflict, Field: "limits.disk", Msg: why +
		": workspaces cannot grow and no sandbox is created until space is freed; delete sandboxes or files in them (the operator can raise SANDBOX_DISK_BUDGET or give the server's data dir more space)"}
}

// Record keeps reading r and the verdict on it; it returns why growth is
// stopped now and why it was before ("" for room).
func (g *Guard) Record(r Reading, budget, floor int64) (why, was string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	was = g.stopped
	why = Verdict(r, budget, floor, was != "")
	g.stopped, g.last = why, r
	return why, was
}

// Check reads the disk once (read) and stops or resumes growth
// accordingly: apply clamps (stop) or unclamps every mounted workspace —
// while stopped, also those mounted since the last reading. Checks run one
// at a time.
func (g *Guard) Check(log *slog.Logger, budget, floor int64, read func() (Reading, error), apply func(stop bool)) {
	g.check.Lock()
	defer g.check.Unlock()
	r, err := read()
	if err != nil {
		log.Error("disk guard: read the disk", "err", err)
		return
	}
	why, was := g.Record(r, budget, floor)
	switch {
	case why != "" && was == "":
		log.Warn("disk guard: workspace growth stopped", "reason", why, "images_bytes", r.Images, "free_bytes", r.Free,
			"budget_bytes", budget, "floor_bytes", floor)
	case why == "" && was != "":
		log.Info("disk guard: workspace growth resumed", "images_bytes", r.Images, "free_bytes", r.Free)
	}
	apply(why != "")
}

// Last reports the guard's last reading and why growth is stopped ("" when
// it is not).
func (g *Guard) Last() (imagesBytes, freeBytes int64, stopped string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last.Images, g.last.Free, g.stopped
}
