package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandhold/sandhold/internal/sandbox/volume"
	"golang.org/x/sys/unix"
)

// maxImageScan bounds the workspace directories one reading looks at (far
// more than the sandboxes one server keeps: maxSlots).
const maxImageScan = 20000

// ImageBytes sums the blocks the workspace images under the data dir hold
// on the host (a staged copy's included), one stat each.
func ImageBytes(dataDir string) int64 {
	return imageBytes(filepath.Join(dataDir, "workspaces"))
}

func imageBytes(root string) int64 {
	return entriesBytes(root, volume.ImageName, volume.ImageName+volume.TmpSuffix, upperImage, upperImage+volume.TmpSuffix, flatImage+volume.TmpSuffix)
}

// entriesBytes sums what the files named names in each entry of root hold
// on the host's disk (each entry itself when no name is given), one stat
// each, for the first maxImageScan entries.
func entriesBytes(root string, names ...string) int64 {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	var n int64
	for i, e := range entries {
		if i >= maxImageScan {
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

// readDisk reads the images' blocks and the data dir's free space.
func readDisk(dataDir, wsRoot string) (diskReading, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dataDir, &st); err != nil {
		return diskReading{}, fmt.Errorf("statfs data dir: %w", err)
	}
	free := int64(st.Bavail) * st.Bsize // #nosec G115 -- block counts of a real file system fit in int64
	return diskReading{Images: imageBytes(wsRoot), Free: free}, nil
}

// volClamp is a workspace file system whose growth the guard stopped.
type volClamp struct {
	// knob is the file system's reserved_clusters in sysfs.
	knob string
	// orig is the value it had before.
	orig int64
}

// clampVolume stops the workspace file system's growth where it stands:
// its reserved clusters become its free blocks (see diskguard.go). A
// volume clamped already is left as it is, so what its sandbox deletes
// while clamped it may write again. Without a mounted volume, nothing.
func (s *Sandbox) clampVolume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vol == nil || s.clamp != nil {
		return nil
	}
	knob, err := reservedKnob(s.vol)
	if err != nil {
		return err
	}
	orig, err := readKnob(knob)
	if err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(s.vol.Fd()), &st); err != nil {
		return fmt.Errorf("statfs workspace: %w", err)
	}
	// ext4 refuses a reserve of the whole file system; Bfree is always
	// below Blocks (the metadata), and workspaces have no bigalloc, so a
	// block is a cluster.
	want := min(st.Bfree, st.Blocks-1)
	if err := os.WriteFile(knob, []byte(strconv.FormatUint(want, 10)), 0); err != nil {
		return fmt.Errorf("clamp workspace: %w", err)
	}
	s.clamp = &volClamp{knob: knob, orig: orig}
	return nil
}

// unclampVolume gives a clamped workspace its reserve back.
func (s *Sandbox) unclampVolume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clamp
	if c == nil || s.vol == nil {
		s.clamp = nil
		return nil
	}
	if err := os.WriteFile(c.knob, []byte(strconv.FormatInt(c.orig, 10)), 0); err != nil {
		return fmt.Errorf("unclamp workspace: %w", err)
	}
	s.clamp = nil
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
