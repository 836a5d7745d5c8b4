package archive

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/testenv"
)

// requireMount skips unless the test may mount a tmpfs (root on Linux).
func requireMount(t *testing.T) {
	t.Helper()
	testenv.SkipShort(t, "mounts a tmpfs")
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
}

// TestExtractNoSpaceLeavesNothing fills a 1 MiB tmpfs during pass two (the
// caps allow the archive; the disk does not) and checks the refusal names
// the rule and the staging directory is gone.
func TestExtractNoSpaceLeavesNothing(t *testing.T) {
	requireMount(t)
	base := t.TempDir()
	if err := unix.Mount("sandhold-test", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		t.Skipf("cannot mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(base, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the test tmpfs: %v", err)
		}
	})
	must(t, os.Mkdir(filepath.Join(base, "dst"), 0o755))
	must(t, os.WriteFile(filepath.Join(base, "sentinel"), []byte("keep"), 0o644))
	r, err := os.OpenRoot(base)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() //nolint:errcheck // a root handle: nothing to flush
	d := &dest{base: base, root: r}
	var ents []tent
	for i := range 4 {
		ents = append(ents, tent{name: "f" + string(rune('a'+i)), body: noise(i, 400_000)})
	}
	src := archiveFile(t, gz(t, buildTar(t, ents...)))
	_, err = Extract(context.Background(), src, FormatTarGz, r, "dst", DefaultLimits())
	ae := wantReason(t, err, ReasonNoSpace)
	if ae.Kind != KindTooLarge {
		t.Fatalf("kind %s", ae.Kind)
	}
	d.assertUntouched(t)
}
