package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds on waiting for the kernel, each with its reason. Waits poll: the
// v1 freezer and v1 emptiness have no notification, and one mechanism for
// both back ends keeps them alike.
const (
	// pollInterval: short enough that a kill of a small tree returns in
	// milliseconds, long enough not to burn the shared CPUs.
	pollInterval = 2 * time.Millisecond
	// maxStatePolls: polls (≈4 s) for a freeze or thaw to take effect; a
	// task stuck in uninterruptible sleep (NFS, FUSE) can delay freezing,
	// and after that the caller is told rather than blocked forever.
	maxStatePolls = 2000
	// killFreezePolls: polls (≈0.4 s) Kill waits for its freeze; a group
	// that will not freeze is killed anyway, freezing only stops forks.
	killFreezePolls = 200
	// maxKillRounds: freeze → SIGKILL → thaw rounds; one round kills a
	// frozen tree, more only matter when freezing failed and forks raced.
	maxKillRounds = 10
	// emptyPollsPerRound: polls (≈1 s) after each round for the killed
	// tasks to exit and leave the group.
	emptyPollsPerRound = 500
	// maxRmdirTries: polls (≈0.4 s) of rmdir on EBUSY, for tasks that are
	// still leaving the group after Kill returned.
	maxRmdirTries = 200
	// maxThreadsPerProc: threads of one process examined to tell whether
	// it lives wholly in a group; pids.max keeps real counts far below.
	maxThreadsPerProc = 1 << 16
)

func rmdirRetry(dir string) error {
	var err error
	for range maxRmdirTries {
		err = unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(pollInterval)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}

// collectPids reads file (cgroup.procs, tasks, cgroup.threads) in every dir.
func collectPids(dirs []string, file string) (map[int]bool, error) {
	set := map[int]bool{}
	for _, d := range dirs {
		s, err := readString(d + "/" + file)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV) {
				continue // group removed meanwhile
			}
			return nil, err
		}
		if err := parsePids(s, set); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", d, file, err)
		}
	}
	return set, nil
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// splitMembers sorts the processes listed in dirs into those that live
// wholly inside (every live thread is in one of the dirs) and visitors
// (some thread outside: the sandbox init's thread during a v1 thread
// attach). Only full members may be killed.
func splitMembers(dirs []string, threadsFile string) (full, visitors []int, err error) {
	procs, err := collectPids(dirs, "cgroup.procs")
	if err != nil || len(procs) == 0 {
		return nil, nil, err
	}
	tids, err := collectPids(dirs, threadsFile)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range sortedKeys(procs) {
		inside, err := allThreadsIn(p, tids)
		if err != nil {
			return nil, nil, err
		}
		if inside {
			full = append(full, p)
		} else {
			visitors = append(visitors, p)
		}
	}
	return full, visitors, nil
}

// allThreadsIn reports whether every thread of process pid is in tids. A
// process that has exited meanwhile counts as inside (killing it is a no-op).
func allThreadsIn(pid int, tids map[int]bool) (bool, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return true, nil
		}
		return false, fmt.Errorf("threads of %d: %w", pid, err)
	}
	defer f.Close() //nolint:errcheck // read-only procfs directory
	names, err := f.Readdirnames(maxThreadsPerProc + 1)
	if err != nil && len(names) == 0 {
		return true, nil // exited between open and read
	}
	if len(names) > maxThreadsPerProc {
		return false, fmt.Errorf("threads of %d: more than %d", pid, maxThreadsPerProc)
	}
	for _, n := range names {
		tid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if !tids[tid] {
			// A thread that exits between the two reads also lands
			// here; the caller retries, so that only delays the kill.
			if _, serr := os.Stat("/proc/" + strconv.Itoa(pid) + "/task/" + n); serr == nil {
				return false, nil
			}
		}
	}
	return true, nil
}

// freezer is what killByFreezing needs from a back end.
type freezer interface {
	freeze(polls int) error
	// thawAll thaws the group and every descendant frozen on its own
	// (a paused execution): killed tasks exit only once thawed.
	thawAll() error
	subtreeDirs() ([]string, error)
}

// killByFreezing kills every full member of g's subtree: freeze (so no
// member can fork while the list is read), SIGKILL all, thaw (frozen tasks
// act on SIGKILL only once thawed), wait for the group to empty. Visitors
// are never signalled; Kill waits for them to leave and reports them if
// they do not.
func killByFreezing(g freezer, threadsFile string) error {
	self := os.Getpid()
	var full, visitors []int
	for range maxKillRounds {
		dirs, err := g.subtreeDirs()
		if err != nil {
			return fmt.Errorf("kill: %w", err)
		}
		full, visitors, err = splitMembers(dirs, threadsFile)
		if err != nil {
			return fmt.Errorf("kill: %w", err)
		}
		if len(full) == 0 && len(visitors) == 0 {
			return nil
		}
		if slices.Contains(full, self) || slices.Contains(visitors, self) {
			return fmt.Errorf("kill: %w", ErrContainsSelf)
		}
		if len(full) > 0 {
			// Best effort: a group that does not freeze in time is
			// still killed; the next round catches what forked.
			_ = g.freeze(killFreezePolls)
			if dirs, err = g.subtreeDirs(); err == nil {
				if f, _, err := splitMembers(dirs, threadsFile); err == nil {
					full = f
				}
			}
			for _, p := range full {
				if p == self {
					continue
				}
				_ = unix.Kill(p, unix.SIGKILL) // ESRCH: already gone
			}
			if err := g.thawAll(); err != nil {
				return fmt.Errorf("kill: %w", err)
			}
		}
		for range emptyPollsPerRound {
			dirs, err = g.subtreeDirs()
			if err != nil {
				return fmt.Errorf("kill: %w", err)
			}
			procs, err := collectPids(dirs, "cgroup.procs")
			if err != nil {
				return fmt.Errorf("kill: %w", err)
			}
			if len(procs) == 0 {
				return nil
			}
			time.Sleep(pollInterval)
		}
	}
	if len(full) == 0 && len(visitors) > 0 {
		return fmt.Errorf("kill: processes %v keep threads both inside and outside the group", visitors)
	}
	return fmt.Errorf("kill: group not empty after %d rounds (%d processes left)", maxKillRounds, len(full)+len(visitors))
}

// thawSubtree thaws every descendant of root (writing value to file; a
// group removed meanwhile is skipped), then the group itself with thaw.
func thawSubtree(root, file, value string, thaw func() error) error {
	dirs, err := walkGroups(root)
	if err != nil {
		return err
	}
	for _, d := range dirs[1:] {
		err := writeString(d+"/"+file, value)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENODEV) {
			return err
		}
	}
	return thaw()
}

// freezeChecked freezes a group unless it holds this process: the server
// never freezes itself.
func freezeChecked(rel string, procsOf func() ([]int, error), freeze func(polls int) error) error {
	procs, err := procsOf()
	if err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	if slices.Contains(procs, os.Getpid()) {
		return fmt.Errorf("freeze cgroup %q: %w", rel, ErrContainsSelf)
	}
	if err := freeze(maxStatePolls); err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	return nil
}

func wrapThaw(err error) error {
	if err != nil {
		return fmt.Errorf("thaw: %w", err)
	}
	return nil
}
