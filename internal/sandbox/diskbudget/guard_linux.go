package diskbudget

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// MaxImageScan bounds the workspace directories one reading looks at (far
// more than the sandboxes one server keeps).
const MaxImageScan = 20000

// EntriesBytes sums what the files named names in each entry of root hold
// on the host's disk (each entry itself when no name is given), one stat
// each, for the first MaxImageScan entries.
func EntriesBytes(root string, names ...string) int64 {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	var n int64
	for i, e := range entries {
		if i >= MaxImageScan {
			break
		}
		if len(names) == 0 {
			n += allocated(filepath.Join(root, e.Name()))
		}
		for _, name := range names {
			n += allocated(filepath.Join(root, e.Name(), name))
		}
	}
	return n
}

// allocated is what file p holds on the host's disk (0 if it is missing).
func allocated(p string) int64 {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return 0
}

// Free is what the data dir's file system has free for the server.
func Free(dataDir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dataDir, &st); err != nil {
		return 0, fmt.Errorf("statfs data dir: %w", err)
	}
	return int64(st.Bavail) * st.Bsize, nil // #nosec G115 -- block counts of a real file system fit in int64
}

// Clamp is a workspace file system whose growth the guard stopped.
type Clamp struct {
	// knob is the file system's reserved_clusters in sysfs.
	knob string
	// orig is the value it had before.
	orig int64
}

// ClampVolume stops the growth of the workspace file system mounted at vol
// where it stands: its reserved clusters become its free blocks (see
// guard.go). Release gives its reserve back.
func ClampVolume(vol *os.File) (*Clamp, error) {
	knob, err := reservedKnob(vol)
	if err != nil {
		return nil, err
	}
	orig, err := readKnob(knob)
	if err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(vol.Fd()), &st); err != nil {
		return nil, fmt.Errorf("statfs workspace: %w", err)
	}
	// ext4 refuses a reserve of the whole file system; Bfree is always
	// below Blocks (the metadata), and workspaces have no bigalloc, so a
	// block is a cluster.
	want := min(st.Bfree, st.Blocks-1)
	if err := os.WriteFile(knob, []byte(strconv.FormatUint(want, 10)), 0); err != nil {
		return nil, fmt.Errorf("clamp workspace: %w", err)
	}
	return &Clamp{knob: knob, orig: orig}, nil
}

// Release gives a clamped workspace its reserve back.
func (c *Clamp) Release() error {
	if err := os.WriteFile(c.knob, []byte(strconv.FormatInt(c.orig, 10)), 0); err != nil {
		return fmt.Errorf("unclamp workspace: %w", err)
	}
	return nil
}

// reservedKnob finds the file system's reserved_clusters from the mount
// itself: its device number names the loop device (/sys/dev/block/M:m),
// whose name names the ext4 instance in /sys/fs/ext4.
func reservedKnob(vol *os.File) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(vol.Fd()), &st); err != nil {
		return "", fmt.Errorf("stat workspace: %w", err)
	}
	link, err := os.Readlink(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		return "", fmt.Errorf("find the workspace's device: %w", err)
	}
	name := filepath.Base(link)
	if !strings.HasPrefix(name, "loop") {
		return "", fmt.Errorf("workspace on %q, not a loop device", name)
	}
	return filepath.Join("/sys/fs/ext4", name, "reserved_clusters"), nil
}

func readKnob(knob string) (int64, error) {
	b, err := os.ReadFile(knob) //nolint:gosec // G304: /sys/fs/ext4/loopN/reserved_clusters, named by the mount's own device
	if err != nil {
		return 0, fmt.Errorf("read the workspace's reserve: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read the workspace's reserve: %w", err)
	}
	return n, nil
}
