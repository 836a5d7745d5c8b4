// Package hostids keeps the sandboxes' host id ranges apart: the ranges
// (slots) handed to sandboxes, and the check that no local account, group
// or subordinate range of the host falls among them. internal/sandbox
// says where the ranges lie.
package hostids

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/sandhold/sandhold/internal/fault"
)

// Files are the local files that name host ids: accounts, groups and the
// subordinate ranges handed to users for their own user namespaces.
var Files = []string{"/etc/passwd", "/etc/group", "/etc/subuid", "/etc/subgid"}

// maxIDFileLines bounds the scan of one file.
const maxIDFileLines = 1 << 20

// Check refuses a host where a local account, group or subordinate range
// named in files falls among the sandboxes' host ids [lo, hi). A process
// of such an id would own files in a sandbox's workspace and could signal
// its processes, and, as the owner of that sandbox's user namespace
// (launcher.AsOwner), hold every capability in it. Only local files are
// read: ids from NSS (LDAP, SSSD, whose default range reaches past 2^30)
// are the operator's to keep apart.
func Check(files []string, lo, hi uint64) error {
	for _, name := range files {
		if err := scanIDFile(name, lo, hi); err != nil {
			return err
		}
	}
	return nil
}

func scanIDFile(name string, lo, hi uint64) error {
	f, err := os.Open(name) //nolint:gosec // G304: a fixed system file (tests pass fixtures)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	defer func() { _ = f.Close() }()
	sub := strings.HasPrefix(name[strings.LastIndex(name, "/")+1:], "sub")
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan() && n < maxIDFileLines; n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, ":")
		// passwd and group: name:x:id:…; subuid and subgid: name:first:count.
		var first uint64
		count := uint64(1)
		var perr error
		switch {
		case sub && len(fields) == 3:
			first, perr = strconv.ParseUint(fields[1], 10, 32)
			if perr == nil {
				count, perr = strconv.ParseUint(fields[2], 10, 32)
			}
		case !sub && len(fields) >= 3:
			first, perr = strconv.ParseUint(fields[2], 10, 32)
		default:
			continue
		}
		if perr != nil {
			continue
		}
		if first < hi && first+count > lo {
			return fmt.Errorf("%s: %q holds host ids %d-%d, among the sandboxes' own (%d-%d): its processes would own a sandbox's files and user namespace; move it or run sandhold on another host",
				name, fields[0], first, first+count-1, lo, hi-1)
		}
	}
	return sc.Err()
}

// Slots hands out host id ranges (slots) below a limit in O(1): a stack
// of freed slots, then the next never-used one.
type Slots struct {
	used map[int]bool
	free []int // freed slots, reused last-freed first
	next int   // every slot >= next is unused unless marked
	max  int
}

// NewSlots hands out the slots below limit.
func NewSlots(limit int) Slots { return Slots{used: make(map[int]bool), max: limit} }

// Mark reserves slot i (a recorded sandbox's, at start).
func (a *Slots) Mark(i int) { a.used[i] = true }

// Alloc reserves a free slot.
func (a *Slots) Alloc() (int, error) {
	for len(a.free) > 0 {
		i := a.free[len(a.free)-1]
		a.free = a.free[:len(a.free)-1]
		if !a.used[i] {
			a.used[i] = true
			return i, nil
		}
	}
	// Slots marked at start are skipped once each: amortised O(1).
	for a.next < a.max {
		i := a.next
		a.next++
		if !a.used[i] {
			a.used[i] = true
			return i, nil
		}
	}
	return 0, fault.New(fault.Unavailable, "no free sandbox id range")
}

// Release frees slot i (once).
func (a *Slots) Release(i int) {
	if !a.used[i] {
		return
	}
	delete(a.used, i)
	a.free = append(a.free, i)
}
