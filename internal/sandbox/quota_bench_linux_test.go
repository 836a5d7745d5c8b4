package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/sandbox/volume"
)

func meminfoKB(b *testing.B, field string) int64 {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb
		}
	}
	b.Fatal("no " + field)
	return 0
}

// BenchmarkWorkspaceVolume is what the kernel-enforced quota costs per
// sandbox: one 5 GB image made, attached and mounted, all kept mounted like
// idle sandboxes (memory per volume from MemAvailable), then released (the
// loop devices detach by themselves). "mkfs" formats every image;
// "template" copies a pre-formatted template (made once, before the timer).
//
//	go test -run '^$' -bench WorkspaceVolume -benchtime 200x ./internal/sandbox/
func BenchmarkWorkspaceVolume(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	if _, err := volume.Tool("mkfs.ext4"); err != nil {
		b.Skip(err)
	}
	b.Run("mkfs", func(b *testing.B) { benchVolumes(b, nil, "") })
	b.Run("template", func(b *testing.B) {
		tm, dir := &volume.Templates{}, b.TempDir()
		// The first copy builds the template.
		if err := tm.Clone(dir, filepath.Join(b.TempDir(), volume.ImageName), 5_000_000_000, nil); err != nil {
			b.Fatal(err)
		}
		benchVolumes(b, tm, dir)
	})
}

func benchVolumes(b *testing.B, tm *volume.Templates, tmplDir string) {
	root := b.TempDir()
	fields := []string{"MemAvailable", "Slab", "Buffers"}
	before := make([]int64, len(fields))
	for i, f := range fields {
		before[i] = meminfoKB(b, f)
	}
	vols := make([]*os.File, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		dir := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		v, finish, err := volume.Open(filepath.Join(dir, volume.ImageName), 5_000_000_000, 1<<30+1000, tm, tmplDir, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := finish(); err != nil {
			b.Fatal(err)
		}
		vols = append(vols, v)
	}
	b.StopTimer()
	time.Sleep(time.Second)
	// MemAvailable is noisy on a shared host; Slab (superblocks, inodes,
	// dentries) and Buffers (the file systems' cached metadata) are the
	// volumes' own.
	for i, f := range fields {
		d := meminfoKB(b, f) - before[i]
		if f == "MemAvailable" {
			d = -d
		}
		b.ReportMetric(float64(d)/float64(b.N), "KB-"+f+"/volume")
	}
	var st = new(int64)
	for i := range b.N {
		if fi, err := os.Stat(filepath.Join(root, strconv.Itoa(i), volume.ImageName)); err == nil {
			if sys, ok := statBlocks(fi); ok {
				*st += sys
			}
		}
	}
	b.ReportMetric(float64(*st)/float64(b.N)/1024, "KB-disk/volume")
	t0 := time.Now()
	for _, v := range vols {
		_ = v.Close()
	}
	for {
		left, err := volume.LoopBackings(root)
		if err != nil {
			b.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if time.Since(t0) > 30*time.Second {
			b.Fatalf("%d loop devices still bound", len(left))
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000/float64(b.N), "ms-release/volume")
}

// statBlocks is the bytes a file occupies on disk (a sparse file less than
// its size).
func statBlocks(fi os.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Blocks * 512, true
}

// BenchmarkWorkspaceVolumeScale tells whether a workspace costs more when
// many exist: b.N template copies made and mounted one after the other and
// kept, reporting the p50 of the copy and of the attach+mount for the first
// and the last tenth (flat means the two match, give or take the load).
//
//	go test -run '^$' -bench WorkspaceVolumeScale -benchtime 1000x ./internal/sandbox/
func BenchmarkWorkspaceVolumeScale(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	if _, err := volume.Tool("mkfs.ext4"); err != nil {
		b.Skip(err)
	}
	const size = 5_000_000_000
	tm, dir, ws := &volume.Templates{}, b.TempDir(), b.TempDir()
	if err := tm.Clone(dir, filepath.Join(b.TempDir(), volume.ImageName), size, nil); err != nil {
		b.Fatal(err)
	}
	copies := make([]time.Duration, 0, b.N)
	mounts := make([]time.Duration, 0, b.N)
	vols := make([]*os.File, 0, b.N)
	defer func() {
		for _, v := range vols {
			_ = v.Close()
		}
	}()
	b.ResetTimer()
	for i := range b.N {
		img := filepath.Join(ws, strconv.Itoa(i)+".img")
		t0 := time.Now()
		if err := tm.Clone(dir, img, size, nil); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		v, _, err := volume.Mount(img, true, nil)
		if err != nil {
			b.Fatal(err)
		}
		vols = append(vols, v)
		copies = append(copies, t1.Sub(t0))
		mounts = append(mounts, time.Since(t1))
	}
	b.StopTimer()
	tenth := max(b.N/10, 1)
	for _, f := range []struct {
		name string
		d    []time.Duration
	}{{"copy", copies}, {"mount", mounts}} {
		b.ReportMetric(p50ms(f.d[:tenth]), "ms-"+f.name+"-first")
		b.ReportMetric(p50ms(f.d[len(f.d)-tenth:]), "ms-"+f.name+"-last")
	}
}

func p50ms(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}
